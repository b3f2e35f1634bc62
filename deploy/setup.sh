#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine (Python 3.11, Java 17
# and Maven present): a virtualenv with the pinned packages, and the Apache
# Kafka jars from Maven Central for the embedded local clusters. Safe to rerun:
# each step is skipped when what it makes is already there and up to date.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" - <<'PY' || { echo "setup: Python 3.11 is required" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)
PY
command -v java >/dev/null || { echo "setup: Java 17 (java on PATH) is required" >&2; exit 1; }
command -v mvn >/dev/null || { echo "setup: Maven (mvn on PATH) is required" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi

# Reinstall only when the dependency list changed.
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "setup: installing Python packages (first run takes a minute or two)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  rm -f .venv/.installed-* && touch "$stamp"
fi

echo "setup: fetching Apache Kafka jars through Maven (cached after the first run)"
.venv/bin/mirror-pipeline local install

#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine (Python 3.11, Java 17
# and Maven present): a virtualenv with the pinned packages, the Apache Kafka
# jars from Maven Central for the embedded local clusters, and (as root, with
# apt) Debian's chromium for the browser tests. Safe to rerun:
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

# The browser tests (tests/browser) drive Debian's `chromium` through Playwright,
# which never downloads a browser of its own. Installed here when it is missing
# and apt-get can run as root; anywhere else setup goes on and those tests skip,
# saying why.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing chromium (Debian package) for the browser tests"
    if ! { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; then
      echo "setup: could not install chromium; the browser tests will skip" >&2
    fi
  else
    echo "setup: no chromium (install it to run tests/browser, which skip without it)" >&2
  fi
fi

echo "setup: fetching Apache Kafka jars through Maven (cached after the first run)"
.venv/bin/mirror-pipeline local install

#!/usr/bin/env bash
# Installs everything the project needs on a fresh machine (Python 3.11, Java 17
# and Maven present): a virtualenv with the pinned packages, the Apache Kafka
# jars from Maven Central for the embedded local clusters, a class archive for
# the Spark driver's JVM, and (as root, with apt) Debian's chromium and
# postgresql for the browser and deployment tests. Safe to rerun: each step is
# skipped when what it makes is already there and up to date.
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

# Two test suites drive Debian packages, installed here when they are missing and
# apt-get can run as root (one apt-get run for both); anywhere else setup goes on, and
# the tests that need them say why (the browser tests skip; the deployment tests fail):
# - the browser tests (tests/browser) drive `chromium` through Playwright, which
#   never downloads a browser of its own;
# - the tests of the deployment's Dagster instance (tests/deploy,
#   deploy/dagster-postgres.yaml) start a throwaway server with `postgresql`'s
#   binaries (initdb and pg_ctl under /usr/lib/postgresql/<version>/bin, run as
#   the `postgres` user the package creates).
missing=()
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  missing+=(chromium)
fi
if ! command -v initdb >/dev/null 2>&1 && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  missing+=(postgresql)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${missing[*]} (Debian packages) for the browser and Postgres instance tests"
    if ! { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }; then
      echo "setup: could not install ${missing[*]}; the tests that need them will say so" >&2
    fi
  else
    echo "setup: missing ${missing[*]} (install them to run tests/browser and tests/deploy)" >&2
  fi
fi

echo "setup: fetching Apache Kafka jars through Maven (cached after the first run)"
.venv/bin/mirror-pipeline local install

# Spark sessions start faster with the classes their JVM loads already parsed and verified
# (mirror_pipeline/replication/driver_class_archive.py); made once per JDK and Spark.
.venv/bin/python -m mirror_pipeline.replication.class_archive_setup

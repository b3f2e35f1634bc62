# The two Quickstart commands. Each installs what is missing first
# (deploy/setup.sh: a virtualenv with pinned packages, Kafka jars via Maven).
.PHONY: setup demo test faults lint check

setup:
	@deploy/setup.sh

demo: setup
	.venv/bin/mirror-pipeline demo

# Lint, format and types first (the few seconds CI spends before the Kafka suites), then
# four pytest-xdist workers, a test file to each at a time (the secured pair's tests all to
# one), the longest files first (tests/conftest.py); worker N > 0 starts Kafka clusters of its
# own, so no test sees another's links or broker kills. Many tests mostly wait (for a run, a
# deployment to heal, a browser): with four workers the two cores stay busy; with three they
# stood idle for minutes. A worker that crashes is not replaced: pytest-xdist 3.8's loadgroup
# scheduler then waits forever (its issue #1323, fixed after that release), so the run ends at
# once with the test the worker died in named as failed.
test: lint
	.venv/bin/pytest -n 4 --dist loadgroup --no-loadscope-reorder --max-worker-restart=0

# The full fault-injection suite (over a hundred kill points, every race);
# `make test` runs a slice of it.
faults: setup
	MIRROR_PIPELINE_FAULTS=full .venv/bin/pytest tests/faults

# ruff and mypy, with the settings pinned in pyproject.toml.
lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

# The quick loop, in under two minutes: lint, format, types and the unit tests (the import
# contract among them) on both cores.
check: lint
	.venv/bin/pytest -q -p no:cacheprovider tests/unit -n 2

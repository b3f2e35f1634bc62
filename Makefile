# The two Quickstart commands. Each installs what is missing first
# (deploy/setup.sh: a virtualenv with pinned packages, Kafka jars via Maven).
.PHONY: setup demo test faults

setup:
	@deploy/setup.sh

demo: setup
	.venv/bin/mirror-pipeline demo

test: setup
	.venv/bin/pytest

# The full fault-injection suite (over a hundred kill points, every race);
# `make test` runs a slice of it.
faults: setup
	MIRROR_PIPELINE_FAULTS=full .venv/bin/pytest tests/faults

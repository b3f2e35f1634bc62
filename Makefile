# The two Quickstart commands. Each installs what is missing first
# (deploy/setup.sh: a virtualenv with pinned packages, Kafka jars via Maven).
.PHONY: setup demo test faults

setup:
	@deploy/setup.sh

demo: setup
	.venv/bin/mirror-pipeline demo

# Three pytest-xdist workers, a test file to each at a time (the secured pair's tests all to one);
# worker N > 0 starts Kafka clusters of its own (tests/conftest.py), so no test sees another's links
# or broker kills. More workers only queue for the two cores.
test: setup
	.venv/bin/pytest -n 3 --dist loadgroup

# The full fault-injection suite (over a hundred kill points, every race);
# `make test` runs a slice of it.
faults: setup
	MIRROR_PIPELINE_FAULTS=full .venv/bin/pytest tests/faults

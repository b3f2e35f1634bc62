# The two Quickstart commands. Each installs what is missing first
# (deploy/setup.sh: a virtualenv with pinned packages, Kafka jars via Maven).
.PHONY: setup demo test

setup:
	@deploy/setup.sh

demo: setup
	.venv/bin/mirror-pipeline demo

test: setup
	.venv/bin/pytest

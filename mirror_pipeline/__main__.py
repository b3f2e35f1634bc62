"""`python -m mirror_pipeline` is the `mirror-pipeline` command."""

from mirror_pipeline.cli import main

main()

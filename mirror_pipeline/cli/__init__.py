"""The `mirror-pipeline` command: runbook verbs over the engine (R-ORC-2).

Exit codes and the error boundary: see `mirror_pipeline.cli.common`.
"""

from __future__ import annotations

import atexit
import gc

import click

from mirror_pipeline.cli.acls import acls
from mirror_pipeline.cli.common import DEBUG_ENV, RootGroup
from mirror_pipeline.cli.demo import demo
from mirror_pipeline.cli.lifecycle import register as register_lifecycle
from mirror_pipeline.cli.link import link
from mirror_pipeline.cli.local import local
from mirror_pipeline.cli.metrics import metrics
from mirror_pipeline.cli.mirror import mirror
from mirror_pipeline.cli.offsets import offsets
from mirror_pipeline.cli.run import run
from mirror_pipeline.cli.ui import ui
from mirror_pipeline.cli.verify import verify
from mirror_pipeline.replication import gc_policy


@click.group(cls=RootGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mirror-pipeline")
@click.option(
    "--debug", is_flag=True, envvar=DEBUG_ENV, help=f"On an internal error, print its traceback [also ${DEBUG_ENV}=1]."
)
def cli(debug: bool) -> None:
    """Kafka cross-cluster replication: mirror topics copied by Spark, orchestrated by Dagster.

    Exit codes: 0 done, 1 refused or failed (the message says why), 2 usage
    error (the message names the argument), 3 internal error, 130 interrupted.
    """


for command in (local, link, mirror, run, demo, offsets, metrics, ui):
    cli.add_command(command)
register_lifecycle(mirror)
mirror.add_command(verify)
link.add_command(acls)


def main() -> None:
    # Registered first, so it runs last: the interpreter's finalization then skips the full
    # collections over everything a command loaded (Dagster, PySpark, a plan of 10,000
    # partitions), 0.6-0.7 s after a 10,000-partition `run` had done its work, for memory the
    # process hands back anyway. Objects still go when their last reference does, and every
    # record a command writes is flushed before it returns: nothing waits on a collection.
    atexit.register(gc.freeze)
    gc_policy.apply()  # and collects less often while it works: a wide link's plan holds no cycles
    cli()

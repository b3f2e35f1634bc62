"""Each copy, offset sync and mirror creation of the CLI, recorded in the Dagster instance the UI reads.

`run`, `offsets sync`, `mirror create` and `demo` call these functions once
their work is done, so the UI shows what they did exactly as if a Dagster run
had done it (see `dagster_recording` for what is recorded, and where).

This module is cheap to import, and is the CLI's one door to its Dagster
side (`dagster_recording`, and `dagster_runs`, which the lifecycle verbs get
through `dagster_runs()`, and `metrics_exporter`, which `metrics` gets through
`metrics_exporter()`): Dagster takes seconds to import, so it is loaded
only when a job is launched or there is something to record, after the work,
and never by `--help` or by the verbs that only read.

A record never fails a command: when the instance cannot be written (a
`$DAGSTER_HOME` that is not a directory, a locked or read-only database, ...),
one warning line goes to stderr and the command exits as its work did.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

import click

from mirror_pipeline import engine
from mirror_pipeline.cli.common import dagster_home_in_use, debug_requested
from mirror_pipeline.cli.values import printable
from mirror_pipeline.config.loader import PipelineConfig
from mirror_pipeline.config.redaction import scrub
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.results import MirrorInfo

# `scheme://user:password@host` in a foreign message (an instance's storage URL): never shown.
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/\s@]+@")
_MAX_REASON = 300


def record_cycle(
    config: PipelineConfig, link: str, result, mirrors: Sequence[str] = (), *, origin: str, as_json: bool = False
) -> None:
    """One `mirror_data` materialization per mirror the cycle changed (copied to or grew), and per
    mirror named in `mirrors`; with them, the outcomes of the copy asset's checks.

    An idle mirror would otherwise gain a materialization every cycle that says
    nothing, and each costs the instance a write: written one at a time (about
    25 ms each on SQLite), a cycle of a link of 1,000 idle mirrors spent 26 s
    recording them; in batches (`dagster_batch`) still a few ms each.
    """
    covered = changed_mirrors(result, mirrors)
    if not covered:
        return  # nothing was copied or asked for: nothing to record, and no Dagster import

    def read_then_record() -> None:
        # Dagster's import and the instance's opening (CPU), then the materializations' writes (CPU), overlap
        # the checks' read of Kafka (waits): at 10,000 partitions each took a second or two, one after the other.
        # In a `run` that started a Spark session the first two began beside the session's start, and are done.
        prepare_in_background()
        with ThreadPoolExecutor(1, thread_name_prefix="copy-checks") as pool:
            overview = pool.submit(copy_checks_overview, config, link, result.measured_lags)
            _prepared().record_cycle(config, link, result, covered, origin, overview.result)

    _guarded(config, as_json, read_then_record)


# The link's mirrors and the lag of each not STOPPED (`engine.mirror_overview`), for the copy asset's checks.
Overview = tuple[list[MirrorInfo], dict[str, int]]


def copy_checks_overview(config: PipelineConfig, link: str, measured_lags: dict[str, int]) -> Overview | None:
    """What the copy asset's checks are decided on (one read of the registry for both, the lags the cycle
    measured taken as they are); None when Kafka stopped answering since the cycle."""
    try:
        return engine.mirror_overview(config, link, measured_lags)
    except MirrorError:
        return None


def changed_mirrors(result, named: Sequence[str] = ()) -> list[str]:
    """The mirrors a cycle copied to or grew, those a follow epoch left partitions of to the next epoch (a task
    ready too late: the epoch's record says so), and those named, in order."""
    changed = {
        m
        for m, c in result.mirrors.items()
        if c.records or c.partitions_added or any(p.left_to_next_epoch for p in c.partitions)
    }
    return sorted(changed | set(named))


def record_offset_sync(
    config: PipelineConfig, link: str, result, mirrors: Sequence[str] = (), *, origin: str, as_json: bool = False
) -> None:
    """One `consumer_offsets` materialization per mirror synced (all syncable ones when `mirrors` is empty)."""
    _record(config, as_json, lambda r: r.record_offset_sync(config, link, result, mirrors, origin))


def record_config_sync(config: PipelineConfig, link: str, result, *, origin: str, as_json: bool = False) -> None:
    """One `mirror_config` materialization per mirror whose configs were synced, and the `config_in_sync` check."""
    if result.mirrors:
        _record(config, as_json, lambda r: r.record_config_sync(config, link, result, origin))


def record_demo(
    config: PipelineConfig, link: str, cycle, offset_sync, mirrors: Sequence[str], *, as_json: bool = False
) -> None:
    """The demo's copy and offset sync, with at most one warning for both."""

    def both(r) -> None:
        if cycle is not None:
            overview = copy_checks_overview(config, link, cycle.measured_lags)
            r.record_cycle(config, link, cycle, changed_mirrors(cycle, mirrors), "demo", lambda: overview)
        if offset_sync is not None:
            r.record_offset_sync(config, link, offset_sync, mirrors, "demo")

    if cycle is not None or offset_sync is not None:
        _record(config, as_json, both)


def register_mirrors(config: PipelineConfig, link: str, mirrors: Sequence[str], *, as_json: bool = False) -> None:
    """The mirrors as partitions of the link's assets, at once (not at the lag sensor's next tick)."""
    _record(config, as_json, lambda r: r.register_mirrors(link, mirrors))


def dagster_runs() -> ModuleType:
    """`dagster_runs` (promote, failover and reverse run as Dagster jobs), imported on first use."""
    return _dagster_side().dagster_runs


def metrics_exporter() -> ModuleType:
    """`metrics_exporter` (it reads the recorded copies back from the instance), imported on first use."""
    # It imports Dagster and prometheus-client: only `metrics serve` and `metrics show` load it.
    import mirror_pipeline.cli.metrics_exporter as metrics_exporter

    return metrics_exporter


# The thread of the latest `load_in_background` or `prepare_in_background`.
_loading: threading.Thread | None = None


def load_in_background() -> None:
    """Start importing the Dagster side now, on a thread, so that the record after the work finds it
    loaded: work that waits on the network (an offset sync of 1,000 groups, a read of a wide link's
    lags) hides most of the import's second. Only beside work that imports nothing heavy meanwhile
    (a cycle's Spark session imports PySpark first), and that leaves a core to the import: beside
    a copy's Spark job it slowed the job's tasks more than it saved."""
    _start_loading(_dagster_side)


def prepare_in_background() -> None:
    """`load_in_background`, then open the instance (about 0.6 s the first time in a process), which
    the record takes over: only where a record follows, since it may create the instance's files."""
    home = dagster_home_in_use()  # named now: the instance is taken only while the process still uses that home
    _start_loading(lambda: _dagster_side().open_instance_ahead(home))


def _start_loading(load: Callable[[], object]) -> None:
    global _loading
    if _loading is not None and _loading.is_alive():
        return

    def quietly() -> None:
        try:
            load()
        except Exception:  # the record loads it again, and says there what went wrong
            pass

    _loading = threading.Thread(target=quietly, name="dagster-import", daemon=True)
    _loading.start()


def _prepared() -> ModuleType:
    """The Dagster side, once the loading in flight (if any) has ended: an instance it opens is then
    used, not opened a second time beside it."""
    if _loading is not None:
        _loading.join()
    return _dagster_side()


def _dagster_side() -> ModuleType:
    """`dagster_recording`, which carries `dagster_runs`: the CLI's modules that import Dagster."""
    # Dagster takes seconds to import: only commands that launch a job or record an event load it.
    import mirror_pipeline.cli.dagster_recording as dagster_recording

    return dagster_recording


def _record(config: PipelineConfig, as_json: bool, record: Callable) -> None:
    _guarded(config, as_json, lambda: record(_prepared()))


def _guarded(config: PipelineConfig, as_json: bool, work: Callable[[], None]) -> None:
    try:
        work()
    except Exception as exc:  # the work is done: a record that could not be written is a warning, not a failure
        if debug_requested():
            traceback.print_exception(exc, file=sys.stderr)
        warn(
            f"not recorded in the Dagster instance ({os.environ.get('DAGSTER_HOME') or './.dagster-home'}): "
            f"{reason(exc, config.secret_values())}",
            as_json,
        )


def reason(exc: BaseException, secrets: Sequence[str]) -> str:
    """One line saying why, without the file's secrets or a URL's credentials."""
    said = str(exc) if isinstance(exc, MirrorError) else f"{type(exc).__name__}: {exc}"
    said = _URL_CREDENTIALS.sub("***@", scrub(" ".join(said.split()), secrets))
    return said if len(said) <= _MAX_REASON else said[: _MAX_REASON - 3] + "..."


def warn(message: str, as_json: bool = False) -> None:
    if as_json:
        click.echo(json.dumps({"warning": message}), err=True)
    else:
        click.echo(f"warning: {printable(message, keep='')}", err=True)

"""`mirror_verified`: the link's mirrors compared with their sources by checksums (R-REL-4).

Per link: an asset check on the copy asset that runs a sampled verify (one
Spark job), its own job and daily schedule that run just that check, and a
second job that runs it over every record, for an on-demand full verify from
the UI (its run config says `sample: 1.0`; the launchpad can change it).

The replicate job leaves this check out (a verify every minute would load
both clusters for nothing); a materialization launched from the UI may still
select it with the asset, so it yields no result in runs that copy (the run
shows it as skipped) and verifies only in its own runs.
"""

# No `from __future__ import annotations`: Dagster reads the check's signature types.
import time

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetSelection,
    Config,
    DefaultScheduleStatus,
    Definitions,
    Failure,
    MetadataValue,
    ScheduleDefinition,
    define_asset_job,
    multi_asset_check,
)
from dagster_pyspark import PySparkResource
from pydantic import Field

from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.verification.results import VerifyResult
from mirror_pipeline_dagster.naming import LinkNames
from mirror_pipeline_dagster.resources.engine import MirrorEngine

VERIFY_CHECK = "mirror_verified"
VERIFY_CRON = "30 3 * * *"  # daily, at a quiet hour
DEFAULT_SAMPLE = 0.05
# A scheduled check must not starve replication: both clusters together, per link.
DEFAULT_MAX_BYTES_PER_SECOND = 50_000_000


class VerifyCheckConfig(Config):
    sample: float = Field(
        default=DEFAULT_SAMPLE,
        gt=0,
        le=1,
        description="Share of each partition's checksum ranges compared; 1.0 compares everything.",
    )
    max_bytes_per_second: int | None = Field(
        default=DEFAULT_MAX_BYTES_PER_SECOND,
        ge=1,
        description="Cap on what the verify reads from both clusters together; empty: no cap.",
    )
    mirrors: list[str] | None = Field(default=None, description="Only these mirror topics [default: all].")


def verify_job_name(names: LinkNames) -> str:
    return f"{names.group}_verify"


def full_verify_job_name(names: LinkNames) -> str:
    return f"{names.group}_verify_full"


def _op_name(names: LinkNames) -> str:
    return f"{names.group}_{VERIFY_CHECK}"


def build_verify_check(names: LinkNames) -> AssetChecksDefinition:
    spec = AssetCheckSpec(
        VERIFY_CHECK,
        asset=names.mirror_data_key,
        description=(
            f"A sample of every mirror of link '{names.link}' compared with its source by checksums; "
            "a failure names the mirror, partition and first differing source offset."
        ),
    )

    # can_subset: in runs that copy, the check yields nothing (see the module's docstring).
    @multi_asset_check(specs=[spec], name=_op_name(names), can_subset=True)
    def _mirror_verified(
        context: AssetCheckExecutionContext,
        config: VerifyCheckConfig,
        mirror_engine: MirrorEngine,
        pyspark: PySparkResource,
    ):
        if _run_copies(context, names):
            context.log.info(f"{VERIFY_CHECK}: not run with a copy; it runs in {verify_job_name(names)}")
            return
        try:
            result = mirror_engine.verify_mirrors(
                names.link,
                pyspark.spark_session,
                mirrors=config.mirrors,
                sample=config.sample,
                max_bytes_per_second=config.max_bytes_per_second,
                seed=time.strftime("%Y-%m-%d"),
            )
        except MirrorError as exc:
            raise Failure(description=str(exc)) from exc
        yield AssetCheckResult(
            asset_key=names.mirror_data_key,
            check_name=VERIFY_CHECK,
            passed=result.identical,
            severity=AssetCheckSeverity.ERROR,
            description="; ".join(result.problems()) or None,
            metadata=verify_metadata(result),
        )

    return _mirror_verified


def _run_copies(context: AssetCheckExecutionContext, names: LinkNames) -> bool:
    """Whether this run materializes the copy asset (the replicate job, or a materialization from the UI)."""
    selected = context.run.asset_selection or ()
    return context.run.job_name == names.replicate_job or names.mirror_data_key in selected


def verify_metadata(result: VerifyResult) -> dict:
    """Per mirror: identical or the first bad offset; counts; never a payload or a secret."""
    per_mirror = {
        name: {
            "identical": m.identical,
            "state": m.state,
            "records": m.source_records,
            "problem": m.problem(),
            "first_bad_offset": _first_bad(m),
            "skipped": m.skipped,
        }
        for name, m in sorted(result.mirrors.items())
    }
    rows = ["| mirror | result | records compared | first bad source offset |", "| --- | --- | ---: | --- |"]
    rows += [
        f"| {name} | {_verdict(r)} | {r['records']} | {r['first_bad_offset'] or '–'} |"
        for name, r in per_mirror.items()
    ]
    return {
        "sample": MetadataValue.float(float(result.sample)),
        "records_compared": MetadataValue.int(result.source_records),
        "bytes_read": MetadataValue.int(result.bytes_read),
        "duration_s": MetadataValue.float(round(result.duration_s, 3)),
        "mirrors": MetadataValue.md("\n".join(rows)),
        "results": MetadataValue.json(per_mirror),
        "details": MetadataValue.json({n: m.to_dict() for n, m in sorted(result.mirrors.items())}),
    }


def _verdict(row: dict) -> str:
    if row["skipped"]:
        return "not verified: " + row["skipped"].replace("|", "/")
    return "identical" if row["identical"] else "DIFFERENT"


def _first_bad(mirror) -> str:
    first = mirror.first_mismatch
    return "" if first is None else f"partition {first[0]} offset {first[1].source_offset}"


def verify_definitions(link: str) -> Definitions:
    """The check, its daily job and schedule, and the on-demand full verify job of one link."""
    names = LinkNames(link)
    check = build_verify_check(names)
    selection = AssetSelection.checks(check)
    sampled = define_asset_job(
        verify_job_name(names),
        selection=selection,
        description=f"A sampled verify of link '{names.link}' (the {VERIFY_CHECK} check).",
    )
    full = define_asset_job(
        full_verify_job_name(names),
        selection=selection,
        config={"ops": {_op_name(names): {"config": {"sample": 1.0}}}},
        description=f"A full verify of link '{names.link}': every record of every mirror's common range.",
    )
    schedule = ScheduleDefinition(
        name=f"{names.group}_verify_schedule",
        job=sampled,
        cron_schedule=VERIFY_CRON,
        default_status=DefaultScheduleStatus.STOPPED,
        description=f"Daily, a sampled verify of link '{names.link}' ({DEFAULT_SAMPLE:g} of the ranges).",
    )
    return Definitions(asset_checks=[check], jobs=[sampled, full], schedules=[schedule])

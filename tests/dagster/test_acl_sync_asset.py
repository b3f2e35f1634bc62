"""ACL sync in Dagster: the asset, job and schedule exist only for links that sync ACLs; no Kafka needed."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

import dagster as dg
import pytest

from mirror_pipeline.sync.acl_plan import AclSyncFailed, AclSyncResult
from tests.dagster.offline_config import VALID_CONFIG, stub_engine

SECRET = "Sx-acl-secret-Qz"
ACL_CONFIG = VALID_CONFIG.replace(
    """\
    destination: us-east
""",
    """\
    destination: us-east
    acl.sync.enable: true
    acl.sync.ms: 600000
    acl.filters: '{"aclFilters": [{"resourceFilter": {"resourceType": "topic"}}]}'
""",
    1,
).replace(
    """\
  us-east:
    bootstrap.servers: 127.0.0.1:29999
""",
    f"""\
  us-east:
    bootstrap.servers: 127.0.0.1:29999
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: mirror
    sasl.password: {SECRET}
""",
)
KEY = dg.AssetKey(["west_to_east", "acl_bindings"])
BINDING = {
    "resourceType": "topic",
    "name": "orders",
    "patternType": "literal",
    "principal": "User:app",
    "host": "*",
    "operation": "read",
    "permissionType": "allow",
}


@pytest.fixture
def acl_config(tmp_path: Path) -> Path:
    path = tmp_path / "mirror.yaml"
    path.write_text(ACL_CONFIG)
    return path


@pytest.fixture
def defs(acl_config: Path) -> dg.Definitions:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MIRROR_PIPELINE_CONFIG", "/nonexistent/mirror.yaml")
        definitions = importlib.import_module("mirror_pipeline_dagster.definitions")
    return definitions.build_definitions(acl_config)


def test_only_links_that_sync_acls_get_the_asset_job_and_schedule(defs: dg.Definitions) -> None:
    repo = defs.get_repository_def()
    asset = defs.get_assets_def(KEY)
    assert asset.group_names_by_key[KEY] == "west_to_east"
    assert asset.partitions_def is None and "mirror_engine" in asset.required_resource_keys
    job = repo.get_job("west_to_east_acl_sync")
    assert job.asset_layer.selected_asset_keys == {KEY}
    assert job.tags == {"mirror-pipeline/acl-sync": "west-to-east"}
    schedule = repo.get_schedule_def("west_to_east_acl_sync_schedule")
    assert schedule.job_name == job.name
    assert schedule.cron_schedule == "*/10 * * * *"  # acl.sync.ms 600000
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    # The other link does not sync ACLs: nothing of it.
    assert not repo.has_job("east_to_west_acl_sync")
    assert not repo.has_schedule_def("east_to_west_acl_sync_schedule")
    assert dg.AssetKey(["east_to_west", "acl_bindings"]) not in {k for a in defs.assets for k in a.keys}


def test_the_default_interval_is_every_minute() -> None:
    from mirror_pipeline_dagster.acl_sync import acl_sync_definitions

    (schedule,) = acl_sync_definitions("west-to-east").schedules
    assert schedule.cron_schedule == "* * * * *"


def test_no_link_syncs_acls_no_acl_definitions(config_file: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MIRROR_PIPELINE_CONFIG", "/nonexistent/mirror.yaml")
        definitions = importlib.import_module("mirror_pipeline_dagster.definitions")
    repo = definitions.build_definitions(config_file).get_repository_def()
    assert not [j for j in repo.job_names if j.endswith("_acl_sync")]


def _materialize(defs, engine, raise_on_error=True):
    return dg.materialize(
        [defs.get_assets_def(KEY)], resources={"mirror_engine": engine}, raise_on_error=raise_on_error
    )


def test_a_materialization_records_what_the_sync_did(defs, acl_config) -> None:
    asked = []

    def fake_sync(link, dry_run=False):
        asked.append((link, dry_run))
        return AclSyncResult(
            link,
            True,
            False,
            time.time(),
            0.2,
            source_bindings=5,
            selected=3,
            created=(BINDING,),
            in_sync_bindings=2,
            foreign=4,
            skipped=({"binding": {**BINDING, "name": "__consumer_offsets"}, "reason": "internal"},),
        )

    result = _materialize(defs, stub_engine(acl_config, sync_acls=fake_sync))
    assert result.success and asked == [("west-to-east", False)]
    (event,) = result.get_asset_materialization_events()
    meta = event.materialization.metadata
    assert meta["created"].value == 1 and meta["deleted"].value == 0 and meta["foreign_bindings"].value == 4
    assert meta["created_bindings"].value == [BINDING] and meta["already_in_place"].value == 2
    assert meta["skipped"].value[0]["reason"] == "internal" and meta["error"].value == "none"
    assert meta["in_sync"].value is False
    assert SECRET not in json.dumps({k: str(v.value) for k, v in meta.items()})


def test_a_sync_turned_off_since_load_says_so(defs, acl_config) -> None:
    off = AclSyncResult("west-to-east", False, False, time.time(), message="ACL sync is off for link 'west-to-east'")
    result = _materialize(defs, stub_engine(acl_config, sync_acls=lambda link, dry_run=False: off))
    (event,) = result.get_asset_materialization_events()
    assert event.materialization.metadata["enabled"].value is False
    assert "is off" in event.materialization.metadata["note"].value


def test_a_sync_that_stops_part_way_fails_the_run_with_what_it_did(defs, acl_config) -> None:
    def failing(link, dry_run=False):
        partial = AclSyncResult(
            link,
            True,
            False,
            time.time(),
            created=(BINDING,),
            error="cluster 'us-east': the link's principal may not delete ACLs",
        )
        raise AclSyncFailed(f"link '{link}': ACL sync stopped: {partial.error}", partial)

    result = _materialize(defs, stub_engine(acl_config, sync_acls=failing), raise_on_error=False)
    assert not result.success
    (failure,) = result.get_step_failure_events()
    data = failure.step_failure_data.user_failure_data
    assert "may not delete ACLs" in data.description
    assert data.metadata["created"].value == 1

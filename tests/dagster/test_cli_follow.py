"""Follow mode from the CLI (`run --link L --follow`, #14): a link served whole without the Dagster daemon.

Against the local Kafka pair, through the real command line in a subprocess
with a throwaway `DAGSTER_HOME`: records written while it runs are mirrored
byte for byte; a source topic's changed config and a consumer group's
committed offsets reach the destination on the link's intervals (the syncs
beside the epochs); every epoch is a line of JSON and a `mirror_data`
materialization; SIGTERM stops it gracefully (exit 0).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import dagster as dg
import yaml
from confluent_kafka.admin import AdminClient

from mirror_pipeline import engine
from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline_dagster.naming import LinkNames
from tests.dagster.cli_link import produce, write_config
from tests.integration.test_config_sync import set_configs, wait_for
from tests.kafka_records import assert_identical, commit, committed, read_topic

LINK = f"cli-follow-{uuid.uuid4().hex[:8]}"
# Shorter than the first epoch's Spark task may take to start cold (a new Python worker, its imports
# and clients: 2-4 s here), so that the test also meets a task ready too late for its epoch, which
# leaves its partitions to the next epoch (`hand_over.wait_for_start`) and makes the next epochs
# longer (`epoch_pace`), and many hand-overs.
EPOCH_S = 2


def wait_until(check, what: str, timeout: float = 90.0, follower=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        assert follower is None or follower.poll() is None, f"follow mode ended while waiting for {what}"
        time.sleep(0.3)
    raise AssertionError(f"follow mode: no {what} within {timeout:.0f}s")


def test_follow_mode_copies_syncs_and_records_until_sigterm(
    tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    group = unique_name("billing")
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, group, LINK)
    settings = yaml.safe_load(path.read_text())
    settings["links"][LINK].update({"topic.config.sync.ms": 1000, "consumer.offset.sync.ms": 1000})
    path.write_text(yaml.safe_dump(settings))
    config = load_config(path)
    topic = create_topic(source_bootstrap, unique_name("orders"), partitions=3)
    produce(source_bootstrap, topic, {0: 50, 1: 20, 2: 5})
    engine.create_mirror(config, LINK, topic)
    home = ensure_dagster_home(tmp_path / "dagster-home")
    out, err = open(tmp_path / "follow.out", "w+"), open(tmp_path / "follow.err", "w+")
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mirror_pipeline",
            "run",
            "--link",
            LINK,
            "--follow",
            "--epoch-seconds",
            str(EPOCH_S),
            "--json",
            "--config",
            str(path),
        ],
        stdout=out,
        stderr=err,
        env={**os.environ, "DAGSTER_HOME": str(home)},
    )
    try:
        wait_until(lambda: '"epoch"' in (tmp_path / "follow.out").read_text(), "first epoch", 120, follower)
        # Written while it runs: records, a config change, a group's committed offsets.
        produce(source_bootstrap, topic, {0: 30, 1: 40, 2: 1})
        set_configs(AdminClient({"bootstrap.servers": source_bootstrap}), topic, retention_ms="7300000")
        commit(source_bootstrap, group, topic, {0: 60, 1: 25})

        source_ends = {0: 80, 1: 60, 2: 6}
        wait_until(
            lambda: (
                engine.mirror_lags(config, LINK).get(topic) == 0
                and all(len(r) == source_ends[p] for p, r in read_topic(destination_bootstrap, topic, 3).items())
            ),
            "copy",
            follower=follower,
        )
        wait_for(
            AdminClient({"bootstrap.servers": destination_bootstrap}), topic, {"retention.ms": "7300000"}, timeout=60
        )
        wait_until(
            lambda: committed(destination_bootstrap, group, topic, 2) == {0: 60, 1: 25},
            "offset sync",
            follower=follower,
        )
        time.sleep(EPOCH_S)
    finally:
        follower.send_signal(signal.SIGTERM)
        try:
            code = follower.wait(EPOCH_S + 90)
        except subprocess.TimeoutExpired:
            follower.kill()
            code = None
    out.seek(0), err.seek(0)
    stdout, stderr = out.read(), err.read()
    assert code == 0, f"SIGTERM is a graceful stop (exit {code}): {stderr[-3000:]}"
    assert "not recorded" not in stderr and "Traceback" not in stderr, stderr[-3000:]

    assert_identical(read_topic(source_bootstrap, topic, 3), read_topic(destination_bootstrap, topic, 3))
    lines = [json.loads(line) for line in stdout.splitlines()]
    epochs = [line for line in lines if "epoch" in line]
    assert [e["epoch"] for e in epochs] == list(range(1, len(epochs) + 1)) and len(epochs) >= 2
    assert all(e["error"] is None for e in epochs), [e["error"] for e in epochs if e["error"]]
    assert sum(e["cycle"]["records"] for e in epochs) == sum(source_ends.values())
    # A partition whose task was ready too late for its epoch copied nothing in it, and the epoch counts it.
    for e in epochs:
        left = [p for m in e["cycle"]["mirrors"].values() for p in m["partitions"] if p["left_to_next_epoch"]]
        assert e["cycle"]["left_to_next_epoch"] == len(left) and not any(p["records"] for p in left), e
    # Each task packs its epoch's segments (one per chunk) before it ends: at most one a partition per epoch stays.
    segments = LinkContext.open(config, LINK).store.read_segments([topic]).segments
    assert segments and all(len(kept) <= len(epochs) for kept in segments.values()), {
        p: len(kept) for p, kept in segments.items()
    }
    synced = {line["sync"] for line in lines if "sync" in line and line["error"] is None}
    assert synced == {"config", "offsets"}, lines

    names = LinkNames(LINK)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.fetch_materializations(names.mirror_data_key, limit=100).records
        copied = [r for r in records if r.asset_materialization.metadata["records"].value]
        assert sum(r.asset_materialization.metadata["records"].value for r in copied) == sum(source_ends.values())
        assert instance.fetch_materializations(names.mirror_config_key, limit=5).records, "the config sync is recorded"
        assert instance.fetch_materializations(names.consumer_offsets_key, limit=5).records, "the offset sync too"

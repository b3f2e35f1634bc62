"""Heartbeats (R-OBS-3) on the real local pair: written on the source, mirrored, read back as an age.

The link has internal topics of its own (its heartbeats topic included), so
its registry and its heartbeats meet no other test's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

from confluent_kafka.admin import AdminClient

from mirror_pipeline import engine
from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline.config.loader import load_config
from tests.config_files import write_pair_config
from tests.kafka_records import load_source, read_topic

LINK = "beating"


def test_cycles_write_mirror_and_show_heartbeats(
    tmp_path, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    tag = uuid.uuid4().hex[:8]
    own = {
        f"mirror.{kind}.topic": f"_hb-{tag}.{kind.replace('.', '-')}"
        for kind in ("state", "offset.map", "checkpoints", "heartbeats")
    }
    path = write_pair_config(
        tmp_path / "mirror.yaml",
        source_bootstrap,
        destination_bootstrap,
        LINK,
        {**own, "emit.heartbeats.enabled": True},
    )
    config = load_config(path)
    topic = create_topic(source_bootstrap, unique_name(), partitions=1)
    load_source(source_bootstrap, topic, records=10, partitions=1)
    engine.create_mirror(config, LINK, topic)
    heartbeats, mirrored = f"_hb-{tag}.heartbeats", f"us-west._hb-{tag}.heartbeats"
    assert engine.heartbeat_status(config, LINK).sentence() == f"none has reached '{mirrored}' yet"

    before_ms = int(time.time() * 1000)
    first = engine.run_cycle(config, LINK, spark)
    # The cycle wrote a heartbeat on the source before it planned, made its mirror, and copied it.
    assert mirrored in first.mirrors and first.mirrors[mirrored].records == 1
    assert {m.mirror_topic: m.source_topic for m in engine.list_mirrors(config, LINK)}[mirrored] == heartbeats
    status = engine.heartbeat_status(config, LINK)
    assert status.newest_emitted_ms >= before_ms and status.age_ms >= 0
    beat = json.loads(read_topic(destination_bootstrap, mirrored, 1)[0][0].value)
    assert (beat["link"], beat["source"], beat["target"]) == (LINK, "us-west", "us-east")
    assert beat["emitted_ms"] == status.newest_emitted_ms

    engine.run_cycle(config, LINK, spark)
    later = engine.heartbeat_status(config, LINK)
    assert later.newest_emitted_ms > status.newest_emitted_ms
    # Byte for byte, like any mirror; and the source side is one partition.
    assert read_topic(source_bootstrap, heartbeats, 1) == read_topic(destination_bootstrap, mirrored, 1)
    source_topics = AdminClient({"bootstrap.servers": source_bootstrap}).list_topics(heartbeats, timeout=10).topics
    assert len(source_topics[heartbeats].partitions) == 1

    out = subprocess.run(
        [sys.executable, "-m", "mirror_pipeline", "link", "describe", LINK, "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if line.strip().startswith("heartbeats:"))
    assert f"heartbeats: the newest on '{mirrored}' was written " in line, out.stdout


def test_follow_mode_writes_heartbeats_on_its_interval(tmp_path, source_bootstrap, destination_bootstrap):
    tag = uuid.uuid4().hex[:8]
    own = {
        f"mirror.{kind}.topic": f"_hb-{tag}.{kind.replace('.', '-')}"
        for kind in ("state", "offset.map", "checkpoints", "heartbeats")
    }
    path = write_pair_config(
        tmp_path / "mirror.yaml",
        source_bootstrap,
        destination_bootstrap,
        LINK,
        {**own, "emit.heartbeats.enabled": True, "emit.heartbeats.interval.seconds": 1},
    )
    config = load_config(path)
    home = ensure_dagster_home(tmp_path / "dagster-home")
    log = open(tmp_path / "follow.log", "w+")
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
            "2",
            "--config",
            str(path),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
    )
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        # No mirror was created by hand: the heartbeats mirror is the link's only one, made by follow mode.
        while len(seen) < 4 and time.monotonic() < deadline:
            assert follower.poll() is None, (tmp_path / "follow.log").read_text()[-3000:]
            emitted = engine.heartbeat_status(config, LINK).newest_emitted_ms
            if emitted is not None:
                seen.add(emitted)
            time.sleep(0.5)
    finally:
        follower.send_signal(signal.SIGTERM)
        code = follower.wait(120)
    assert len(seen) >= 4, f"heartbeats mirrored while following: {sorted(seen)}"
    assert code == 0, (tmp_path / "follow.log").read_text()[-3000:]
    mirrored = read_topic(destination_bootstrap, f"us-west._hb-{tag}.heartbeats", 1)[0]
    assert len(mirrored) >= 4 and [r.timestamp for r in mirrored] == sorted(r.timestamp for r in mirrored)

"""The metrics exporter (R-OBS-1, R-OBS-2) against a known copy on the local Kafka pair (issue #13).

Through the real command line with a throwaway `DAGSTER_HOME`: a CLI cycle
copies known records and an offset sync commits a group; then
`metrics serve` is scraped over HTTP and every figure is checked against what
the copy recorded; `metrics show --json` then sees lag that no copy has
taken yet.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

import dagster as dg
from prometheus_client.parser import text_string_to_metric_families

from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline_dagster.naming import LinkNames
from tests.cli_process import run_cli, stoppable_with_ctrl_c
from tests.dagster.cli_link import produce, write_config
from tests.kafka_records import commit
from tests.ports import free_port

LINK = f"metrics-{uuid.uuid4().hex[:8]}"


def scrape(url: str, deadline_s: float = 120.0) -> dict:
    """{(family, labels as a sorted tuple): value} of one scrape, once the exporter answers."""
    until = time.monotonic() + deadline_s
    while True:
        try:
            text = urllib.request.urlopen(url, timeout=5).read().decode()
            break
        except OSError:
            if time.monotonic() > until:
                raise
            time.sleep(0.5)
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def stats(scraped: dict, name: str, **labels) -> dict:
    out = {}
    for (family, pairs), value in scraped.items():
        found = dict(pairs)
        if family == name and all(found.get(k) == v for k, v in labels.items()) and set(found) == {*labels, "stat"}:
            out[found["stat"]] = value
    return out


def test_exporter_serves_every_metric_with_windows_matching_a_known_copy(
    tmp_path, source_bootstrap, destination_bootstrap, create_topic, unique_name
):
    group = unique_name("billing")
    path = write_config(tmp_path, source_bootstrap, destination_bootstrap, group, link=LINK)
    orders = create_topic(source_bootstrap, unique_name("orders"), partitions=2)
    refunds = create_topic(source_bootstrap, unique_name("refunds"), partitions=1)
    home = ensure_dagster_home(tmp_path / "dagster-home")
    for topic in (orders, refunds):
        created = run_cli(home, "mirror", "create", topic, "--link", LINK, "--config", str(path))
        assert created.returncode == 0, created.stderr[-2000:]
    produced_at = time.time()
    produce(source_bootstrap, orders, {0: 70, 1: 30})
    produce(source_bootstrap, refunds, {0: 50})
    ran = run_cli(home, "run", "--link", LINK, "--config", str(path), "--json")
    copied_by = time.time()
    assert ran.returncode == 0, ran.stderr[-2000:]
    commit(source_bootstrap, group, orders, {0: 40, 1: 30})
    synced = run_cli(home, "offsets", "sync", "--link", LINK, "--config", str(path))
    assert synced.returncode == 0, synced.stderr[-2000:]

    names = LinkNames(LINK)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        recorded = {
            r.asset_materialization.partition: r.asset_materialization.metadata
            for r in instance.fetch_materializations(names.mirror_data_key, limit=10).records
        }
        offsets = instance.fetch_materializations(names.consumer_offsets_key, limit=10).records
    duration = recorded[orders]["cycle_duration_s"].value
    checkpoint_ms = offsets[0].asset_materialization.metadata["checkpoint-latency-ms"].value

    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mirror_pipeline",
            "metrics",
            "serve",
            "--config",
            str(path),
            "--port",
            str(port),
            "--interval",
            "2",
            "--window",
            "600",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        preexec_fn=stoppable_with_ctrl_c,
    )
    try:
        scraped = scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=60)
    assert server.returncode == 0, err[-2000:]
    assert "Serving metrics" in out

    for mirror, records in ((orders, 100), (refunds, 50)):
        rate = stats(scraped, "mirror_pipeline_topic_byte_rate", link=LINK, topic=mirror)
        expected = recorded[mirror]["bytes"].value / duration
        assert rate["count"] == 1 and abs(rate["max"] - expected) < 1e-6 * expected and rate["min"] == rate["max"]
        latency = stats(scraped, "mirror_pipeline_topic_replication_latency_ms", link=LINK, topic=mirror)
        assert latency["count"] == records  # one value per record copied
        assert 0 <= latency["min"] <= latency["avg"] <= latency["max"] <= (copied_by - produced_at) * 1000 + 1
        lineage = recorded[mirror]["lineage_json"].value
        assert latency["sum"] == sum(p["latency_sum_ms"] for p in lineage)  # exact: summed over records
        assert latency["max"] == max(p["latency_max_ms"] for p in lineage)
        lag = stats(scraped, "mirror_pipeline_topic_replication_records_lag", link=LINK, topic=mirror)
        assert lag["count"] >= 1 and lag["max"] == 0
    link_rate = stats(scraped, "mirror_pipeline_link_byte_rate", link=LINK)
    total_bytes = recorded[orders]["cycle_bytes"].value
    assert total_bytes == recorded[orders]["bytes"].value + recorded[refunds]["bytes"].value
    assert link_rate["count"] == 1 and abs(link_rate["sum"] - total_bytes / duration) < 1e-6 * link_rate["sum"]
    assert stats(scraped, "mirror_pipeline_link_replication_latency_ms", link=LINK)["count"] == 150
    checkpoint = stats(scraped, "mirror_pipeline_link_checkpoint_latency_ms", link=LINK)
    assert checkpoint["count"] == 1 and abs(checkpoint["max"] - checkpoint_ms) < 1e-9
    assert stats(scraped, "mirror_pipeline_topic_checkpoint_latency_ms", link=LINK, topic=orders)["count"] == 1
    assert scraped[("mirror_pipeline_link_mirrors", (("link", LINK), ("state", "ACTIVE")))] == 2
    assert scraped[("mirror_pipeline_link_mirrors", (("link", LINK), ("state", "PAUSED")))] == 0
    assert scraped[("mirror_pipeline_link_sample_success", (("link", LINK),))] == 1
    assert scraped[("mirror_pipeline_metrics_window_seconds", ())] == 600

    # Lag that no copy has taken yet: sampled from the clusters.
    produce(source_bootstrap, refunds, {0: 5})
    shown = run_cli(home, "metrics", "show", "--link", LINK, "--config", str(path), "--json")
    assert shown.returncode == 0, shown.stderr[-2000:]
    rows = {(r["metric"], r["topic"]): r for r in json.loads(shown.stdout)["metrics"]}
    assert rows[("replication-records-lag", refunds)]["max"] == 5
    assert rows[("replication-records-lag", None)]["max"] == 5
    assert rows[("byte-rate", refunds)]["count"] == 1


def test_unknown_link_and_busy_port_are_refused_before_anything_starts(tmp_path, config_file):
    home = ensure_dagster_home(tmp_path / "dagster-home")
    unknown = run_cli(home, "metrics", "serve", "--config", str(config_file), "--link", "nope")
    assert unknown.returncode == 1 and "unknown link 'nope'" in unknown.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = run_cli(home, "metrics", "serve", "--config", str(config_file), "--port", str(port))
    assert busy.returncode == 1 and "already in use (another exporter?)" in busy.stderr

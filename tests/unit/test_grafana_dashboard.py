"""The Grafana dashboard in deploy/grafana asks only for what the Prometheus exporter serves.

The exporter is built as `metrics serve` builds it, over a link with a mirror,
states, a heartbeat age and a failed sample, on an empty Dagster instance; its
scrape is parsed and every metric and label a panel or a variable of the
dashboard names must be in it. A renamed metric then breaks this test, not the
operator's dashboard.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import dagster as dg
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from mirror_pipeline.cli.metrics_exporter import LinkMetrics, registry_for
from mirror_pipeline.config.loader import parse_config

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "mirror-pipeline.json"
METRIC = re.compile(r"\bmirror_pipeline_[a-z_]+\b")
SELECTOR = re.compile(r"\{([^}]*)\}")
VARIABLE = re.compile(r"\$\{?(\w+)")
GROUPING = re.compile(r"\bby \(([^)]*)\)")


def served() -> dict[str, set[str]]:
    """Each family the exporter serves, with the labels of its samples."""
    config = parse_config(
        {
            "clusters": {"a": {"bootstrap.servers": "127.0.0.1:1"}, "b": {"bootstrap.servers": "127.0.0.1:2"}},
            "links": {"l": {"source": "a", "destination": "b"}},
        },
        "mirror.yaml",
        {},
    )
    with dg.DagsterInstance.ephemeral() as instance:
        metrics = LinkMetrics(config, instance, 300.0)
        metrics.mirrors["l"], metrics.states["l"] = ["orders"], {"ACTIVE": 1}
        metrics.errors["l"], metrics.heartbeat_ages_ms["l"] = "", 1500
        scrape = generate_latest(registry_for(metrics)).decode()
    families: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(scrape):
        families[family.name] = {label for sample in family.samples for label in sample.labels}
    return families


def queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable."""
    found = [(f"panel '{p['title']}'", t["expr"]) for p in dashboard["panels"] for t in p["targets"]]
    found += [
        (f"variable '{v['name']}'", v["query"]["query"])
        for v in dashboard["templating"]["list"]
        if v["type"] == "query"
    ]
    return found


def test_every_query_names_a_metric_and_labels_the_exporter_serves():
    dashboard, families = json.loads(DASHBOARD.read_text()), served()
    assert dashboard["panels"] and all(p["targets"] for p in dashboard["panels"])
    for where, query in queries(dashboard):
        names = METRIC.findall(query)
        assert names, f"{where}: names no mirror-pipeline metric: {query}"
        for name in names:
            assert name in families, f"{where}: the exporter serves no '{name}' (it serves {sorted(families)})"
        labels = {
            matcher.split("=")[0].strip().rstrip("!~")
            for selector in SELECTOR.findall(query)
            for matcher in selector.split(",")
        }
        labels |= {label.strip() for grouping in GROUPING.findall(query) for label in grouping.split(",")}
        known = set().union(*(families[n] for n in names))
        assert labels <= known, f"{where}: labels {sorted(labels - known)} are on none of {names}"


def test_the_dashboard_covers_lag_rates_latencies_states_and_heartbeats_per_link_and_per_mirror():
    dashboard = json.loads(DASHBOARD.read_text())
    asked = {name for _, query in queries(dashboard) for name in METRIC.findall(query)}
    for metric in ("replication_records_lag", "byte_rate", "replication_latency_ms", "checkpoint_latency_ms"):
        assert {f"mirror_pipeline_link_{metric}", f"mirror_pipeline_topic_{metric}"} <= asked, metric
    assert {
        "mirror_pipeline_link_mirrors",
        "mirror_pipeline_link_heartbeat_age_seconds",
        "mirror_pipeline_link_sample_success",
    } <= asked
    defined = {v["name"] for v in dashboard["templating"]["list"]}
    used = {name for _, query in queries(dashboard) for name in VARIABLE.findall(query)}
    used |= {name for p in dashboard["panels"] for name in VARIABLE.findall(json.dumps(p["datasource"]))}
    assert used <= defined, f"variables used but not defined: {sorted(used - defined)}"

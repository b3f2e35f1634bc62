"""Messages and lines that name a link's mirrors stay readable on a link of 1,000 of them."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.model.errors import MirrorError
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.text import some_of
from mirror_pipeline_dagster.config_sync import config_in_sync_result
from tests.config_files import write_pair_config

LINK = "west-to-east"


def test_a_few_names_are_all_shown_and_many_are_counted() -> None:
    assert some_of([]) == "none"
    assert some_of([], none="it has none") == "it has none"
    assert some_of(["a", "b", "c"]) == "a, b, c"
    many = [f"m{i:04d}" for i in range(1000)]
    assert some_of(many) == ", ".join(many[:10]) + " and 990 more"


def test_link_describe_counts_the_mirrors_of_a_wide_link(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = str(write_pair_config(tmp_path / "mirror.yaml", "127.0.0.1:1", "127.0.0.1:1", LINK))
    infos = [MirrorInfo(LINK, f"t{i:04d}", f"t{i:04d}", "ACTIVE", 0.0, "", 0.0) for i in range(1000)]
    monkeypatch.setattr(engine, "link_mirrors", lambda cfg, link: (infos, 16))

    def no_heartbeats(cfg, link):
        raise MirrorError("not asked in this test")

    monkeypatch.setattr(engine, "heartbeat_status", no_heartbeats)
    text = CliRunner().invoke(cli, ["link", "describe", LINK, "--config", config])
    assert text.exit_code == 0, text.output
    line = next(x for x in text.output.splitlines() if x.startswith("  mirrors: "))
    assert (
        line == "  mirrors: 1,000: t0000, t0001, t0002, t0003, t0004, t0005, t0006, t0007, t0008, t0009 and 990 more "
        "(`mirror list` lists them)"
    )
    listed = CliRunner().invoke(cli, ["link", "describe", LINK, "--config", config, "--json"])
    assert len(json.loads(listed.output)["mirrors"]) == 1000  # --json has every one


def test_the_config_check_of_a_wide_link_names_ten_drifted_mirrors() -> None:
    """The Dagster layer's lines say the same way which mirrors they mean (`some_of`)."""
    drifts = {f"t{i:04d}": {"in_sync": i % 2 == 1, "config_sync_lag_ms": 0} for i in range(1000)}
    description = config_in_sync_result(drifts).description or ""
    assert description.startswith("500 of 1000 mirror(s) differ from their source: t0000, t0002, ")
    assert description.endswith("t0018 and 490 more")

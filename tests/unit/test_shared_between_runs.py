"""The leases by which pytest runs (and xdist workers) share the test clusters (tests/conftest.py)."""

from __future__ import annotations

import pytest

from tests.conftest import shared_between_runs


def test_the_last_run_to_finish_stops_the_servers(tmp_path):
    calls = []
    with shared_between_runs(tmp_path, lambda: calls.append("start"), lambda: calls.append("stop")):
        assert calls == ["start"]
        assert [lease.name for lease in tmp_path.iterdir() if lease.name.isdigit()], "this run holds a lease"
    assert calls == ["start", "stop"]
    assert not [lease for lease in tmp_path.iterdir() if lease.name.isdigit()]


def test_a_start_that_fails_gives_its_lease_back_and_stops_what_it_started(tmp_path):
    calls = []

    def start():
        calls.append("start")
        raise RuntimeError("cluster us-west did not answer")

    with pytest.raises(RuntimeError, match="did not answer"):
        with shared_between_runs(tmp_path, start, lambda: calls.append("stop")):
            pytest.fail("the body must not run when the servers did not start")
    assert calls == ["start", "stop"]
    assert not [lease for lease in tmp_path.iterdir() if lease.name.isdigit()]

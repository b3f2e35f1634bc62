"""`committed_offsets` runs librdkafka's whole-group OffsetFetch in a child process: when the
child fails (a crash, a timeout, an answer it did not write) or cannot be given the settings, no group is listed, and
offset sync asks each group itself. The child's answer is tested against Kafka in
tests/integration/test_offset_sync.py."""

from __future__ import annotations

import json
import subprocess

from mirror_pipeline.sync import committed_offsets as listing


def test_an_answer_becomes_offsets_per_group(monkeypatch):
    sent = {}

    def child(args, input, **kwargs):
        sent.update(json.loads(input))
        return subprocess.CompletedProcess(args, 0, stdout=json.dumps({"g": [["t", 0, 5], ["t", 1, 9]], "h": []}))

    monkeypatch.setattr(listing.subprocess, "run", child)
    got = listing.committed_offsets({"bootstrap.servers": "x", "sasl.password": "s3cret"}, ["g", "h"], "a", 5)
    assert got == {"g": {("t", 0): 5, ("t", 1): 9}, "h": {}}
    assert sent["groups"] == ["g", "h"] and sent["conf"]["sasl.password"] == "s3cret"  # on stdin, not argv


def test_a_crashed_child_lists_no_group(monkeypatch, caplog):
    monkeypatch.setattr(
        listing.subprocess,
        "run",
        lambda args, **kwargs: subprocess.CompletedProcess(args, -11, stdout="", stderr="boom"),
    )
    assert listing.committed_offsets({"bootstrap.servers": "x"}, ["g"], "a", 5) == {}
    assert "exit code -11" in caplog.text and "one by one" in caplog.text


def test_a_child_that_hangs_lists_no_group(monkeypatch):
    def hangs(args, **kwargs):
        raise subprocess.TimeoutExpired(args, kwargs["timeout"])

    monkeypatch.setattr(listing.subprocess, "run", hangs)
    assert listing.committed_offsets({"bootstrap.servers": "x"}, ["g"], "a", 5) == {}


def test_settings_that_are_not_plain_data_are_not_sent(monkeypatch):
    monkeypatch.setattr(listing.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(AssertionError("no child")))
    assert listing.committed_offsets({"oauth_cb": print}, ["g"], "a", 5) == {}
    assert listing.committed_offsets({"bootstrap.servers": "x"}, [], "a", 5) == {}


def test_an_answer_that_is_not_the_childs_lists_no_group(monkeypatch, caplog):
    for stdout in ("%7|librdkafka debug line\n{}", json.dumps(["g"]), json.dumps({"g": [["t", 0]]})):
        monkeypatch.setattr(
            listing.subprocess,
            "run",
            lambda args, stdout=stdout, **kwargs: subprocess.CompletedProcess(args, 0, stdout=stdout),
        )
        assert listing.committed_offsets({"bootstrap.servers": "x"}, ["g"], "a", 5) == {}
    assert "no readable answer" in caplog.text


def test_commits_go_to_the_child_with_what_they_were_decided_from(monkeypatch):
    sent = {}

    def child(args, input, **kwargs):
        sent.update(json.loads(input))
        return subprocess.CompletedProcess(args, 0, stdout=json.dumps(["g", "not-asked"]))

    monkeypatch.setattr(listing.subprocess, "run", child)
    commits = {"g": ({("t", 0): None, ("t", 1): 4}, {("t", 0): 5, ("t", 1): 9}), "h": ({("t", 0): 1}, {("t", 0): 2})}
    assert listing.commit_if_unchanged({"bootstrap.servers": "x"}, commits, "a", 5) == {"g"}
    assert sent["commits"]["g"] == {"expected": [["t", 0, None], ["t", 1, 4]], "offsets": [["t", 0, 5], ["t", 1, 9]]}


def test_a_failed_commit_child_commits_no_group(monkeypatch, caplog):
    commits = {"g": ({("t", 0): None}, {("t", 0): 5})}
    for answer in (
        subprocess.CompletedProcess([], -11, stdout="", stderr="boom"),
        subprocess.CompletedProcess([], 0, stdout=json.dumps({"g": []})),
        subprocess.CompletedProcess([], 0, stdout=json.dumps([["g"]])),
    ):
        monkeypatch.setattr(listing.subprocess, "run", lambda args, answer=answer, **kwargs: answer)
        assert listing.commit_if_unchanged({"bootstrap.servers": "x"}, commits, "a", 5) == set()
    assert "exit code -11" in caplog.text and "committed one by one" in caplog.text
    assert listing.commit_if_unchanged({"bootstrap.servers": "x"}, {}, "a", 5) == set()

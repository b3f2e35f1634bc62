"""Setup removes the Spark driver class archives that no session has used for days, and only those."""

from __future__ import annotations

import os

from mirror_pipeline.replication.class_archive_setup import STALE_AFTER_S, prune_stale_archives

NOW = 2_000_000_000.0


def archive(directory, name: str, last_used_s_ago: float):
    path = directory / name
    path.write_bytes(b"archive")
    os.utime(path, (NOW - last_used_s_ago, NOW - last_used_s_ago))
    return path


def test_archives_unused_for_days_go_and_the_current_and_recently_used_ones_stay(tmp_path):
    current = archive(tmp_path, "spark-driver-aaaa.jsa", 30 * 86400)  # this install's, however old
    recent = archive(tmp_path, "spark-driver-bbbb.jsa", STALE_AFTER_S - 60)  # another checkout's, in use
    stale = archive(tmp_path, "spark-driver-cccc.jsa", STALE_AFTER_S + 60)
    half_written = archive(tmp_path, "spark-driver-dddd.jsa.123.partial", STALE_AFTER_S + 60)
    log = archive(tmp_path, "spark-driver-archive.log", 30 * 86400)
    other = archive(tmp_path, "kafka-4.1.1", 30 * 86400)

    assert prune_stale_archives(current, now=NOW) == [stale, half_written]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (current, recent, log, other))


def test_a_recent_access_keeps_an_old_archive(tmp_path):
    current = archive(tmp_path, "spark-driver-aaaa.jsa", 0)
    mapped = archive(tmp_path, "spark-driver-bbbb.jsa", 30 * 86400)
    os.utime(mapped, (NOW - 60, NOW - 30 * 86400))  # a session mapped it a minute ago

    assert prune_stale_archives(current, now=NOW) == []
    assert mapped.exists()

"""kill -9 during a reverse, and two reverses racing, with applications writing to the new side
(R-LC-7, R-LC-8, R-REL-1).

The old source holds a divergent tail in every partition, so the reverse saves
records, deletes the old topic and creates it again: kills land while it counts,
saves, deletes, creates and records. After the last kill a reverse runs to the
end; then the saved topic must hold the tail exactly once, in order, and the
rebuilt mirror, once caught up, every record of the new source at its offset.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter

import pytest

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.operations.divergence import ORIGIN_HEADER
from tests.config_files import write_two_way_config
from tests.faults.conftest import FULL
from tests.faults.harness import LiveSource, Verdict, catch_up, kill_session, preload, python_cmd, start, wait_exit
from tests.faults.test_kills import SEED
from tests.kafka_records import assert_identical, read_partition, read_topic

FORWARD, BACK = "faults-forward", "faults-back"
PARTITIONS = 4
MIRRORED, TAIL = 2_000, 15_000  # per partition: copied before the failover, then written only to the old source
KILLS = 8 if FULL else 3


def start_reverse(path, topic: str, log_dir):
    script = (
        "import sys; from mirror_pipeline import engine; from mirror_pipeline.config.loader import load_config; "
        "print(engine.reverse(load_config(sys.argv[1]), sys.argv[2], [sys.argv[3]]).to_dict())"
    )
    return start(python_cmd("-c", script, str(path), FORWARD, topic), "reverse", log_dir)


@pytest.mark.timeout(1800)
def test_killed_and_racing_reverses_save_the_tail_once_and_rebuild_exactly(
    tmp_path, spark, source_bootstrap, destination_bootstrap, create_topic, unique_name, log_dir, fault_report
):
    rng = random.Random(f"{SEED}-reverse")
    path = write_two_way_config(
        tmp_path / "mirror.yaml",
        source_bootstrap,
        destination_bootstrap,
        FORWARD,
        BACK,
        f"faults-reverse-{uuid.uuid4().hex[:6]}",
        defaults={"mirror.chunk.max.records": 2000},
    )
    config = load_config(path)
    topic = create_topic(source_bootstrap, unique_name(), partitions=PARTITIONS)
    old = preload(source_bootstrap, topic, PARTITIONS, MIRRORED)
    engine.create_mirror(config, FORWARD, topic)
    catch_up(config, spark, topic, link=FORWARD)
    preload(source_bootstrap, topic, PARTITIONS, TAIL, source=old)  # the divergent tail
    tails = {p: read_partition(source_bootstrap, topic, p)[MIRRORED:] for p in range(PARTITIONS)}
    engine.failover(config, FORWARD, [topic])
    # The applications moved to us-east: they keep writing there throughout.
    apps = LiveSource(destination_bootstrap, topic, PARTITIONS, "gapfree", rate=400, seed=7)
    apps.seq = list(old.seq)
    apps.start()
    kills = 0
    hit: Counter = Counter()
    try:
        for _ in range(KILLS):
            started = start_reverse(path, topic, log_dir)
            if wait_exit(started, rng.uniform(1.0, 6.0)) is None:
                kill_session(started)
                kills += 1
                hit[_phase(config, topic)] += 1
        racing = [start_reverse(path, topic, log_dir) for _ in range(2)]
        codes = [wait_exit(r, 600) for r in racing]
        assert 0 in codes, [r.output() for r in racing]
        for r in racing:
            kill_session(r)
        last = start_reverse(path, topic, log_dir)  # whoever lost the race: the reverse is done
        assert wait_exit(last, 600) == 0, last.output()
        assert "already reversed" in last.output()
        engine.run_cycle(config, BACK, spark, mirrors=[topic])  # copying while the applications write
    finally:
        apps.stop()
    catch_up(config, spark, topic, link=BACK)

    for p in range(PARTITIONS):
        saved = read_partition(source_bootstrap, f"{topic}.diverged", p)
        origins = [dict(r.headers)[ORIGIN_HEADER] for r in saved]
        assert origins == [f"{topic}/{p}/{r.offset}".encode() for r in tails[p]], f"partition {p}: saved tail differs"
        assert [(r.key, r.value, r.timestamp) for r in saved] == [(r.key, r.value, r.timestamp) for r in tails[p]]
    new_source = read_topic(destination_bootstrap, topic, PARTITIONS)
    assert_identical(new_source, read_topic(source_bootstrap, topic, PARTITIONS))
    checked = sum(len(t) for t in tails.values()) + sum(len(r) for r in new_source.values())
    where = ", ".join(f"{phase} {n}" for phase, n in sorted(hit.items()))
    fault_report(f"reverse: killed ({where}), then two racing", {"reverse": kills}, Verdict(records_checked=checked))


def _phase(config, topic: str) -> str:
    """How far the killed reverse got, as its record on the reverse link says."""
    record = {m.mirror_topic: m for m in engine.list_mirrors(config, BACK)}.get(topic)
    if record is None:
        return "before recording a plan"
    return (record.reverse_of or {}).get("phase", "?")

"""Links on the same clusters never wait for each other (issue: a writer killed
mid-transaction on a shared offset-map topic held every link's reads back).

A writer of one link is killed with -9 inside a transaction on that link's
offset-map topic, with a transaction timeout long enough that the broker
cannot abort it during the test. The other link's cycle must then run as
before: it finishes while the killed transaction is still open (proof that
it read nothing that transaction holds back) and copies exactly. The cycle
times before and after the kill are printed, not asserted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from confluent_kafka import Producer

from mirror_pipeline import engine
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from tests.config_files import TEST_FENCE_WAIT_MS
from tests.kafka_records import assert_identical, read_topic

# The killed writer's transaction outlives the test's cycles by far: the broker
# aborts it only after this.
KILLED_TRANSACTION_TIMEOUT_MS = 120_000

# Begins a transaction on the link's offset-map topic as a writer of the link (its
# transactional id is under the link's prefix), writes a segment key, says so,
# and waits to be killed.
_WRITER = """
import sys, time
from mirror_pipeline.kafka import clients as kc
bootstrap, link, topic, timeout_ms = sys.argv[1:5]
producer = kc.producer(kc.client_config({"bootstrap.servers": bootstrap}, link, "state-writer", **{
    "transactional.id": f"mirror-pipeline/{link}/killed-writer", "transaction.timeout.ms": int(timeout_ms)}))
producer.init_transactions(30)
producer.begin_transaction()
producer.produce(topic, key=f"{link}/killed/0/0".encode(), value=b"{}")
producer.flush(30)
print("open", flush=True)
time.sleep(600)
"""


def _two_links(path: Path, source: str, destination: str, one: str, two: str) -> Path:
    """Two links on the same pair with the default internal topic names."""
    link = {"source": "us-west", "destination": "us-east"}
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": {"us-west": {"bootstrap.servers": source}, "us-east": {"bootstrap.servers": destination}},
                "defaults": {"mirror.writer.fence.wait.ms": TEST_FENCE_WAIT_MS},
                "links": {one: dict(link), two: dict(link)},
                "spark": {"master": "local[2]"},
            },
            sort_keys=False,
        )
    )
    return path


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=os.urandom(64), partition=i % 2)
    assert producer.flush(30) == 0


def _timed_cycle(config, link: str, spark) -> float:
    started = time.monotonic()
    result = engine.run_cycle(config, link, spark)
    assert result.lag_after == 0
    return time.monotonic() - started


def _transaction_open(ctx: LinkContext, topic: str) -> bool:
    high = kc.list_offsets(ctx.dest_admin, [(topic, 0)], "latest", ctx.dest.alias, read_committed=False)[(topic, 0)]
    stable = kc.list_offsets(ctx.dest_admin, [(topic, 0)], "latest", ctx.dest.alias)[(topic, 0)]
    return stable < high


def test_a_writer_killed_mid_transaction_does_not_delay_another_link(
    tmp_path, source_bootstrap, destination_bootstrap, spark, create_topic, unique_name
):
    one, two = unique_name("one"), unique_name("two")
    config = load_config(_two_links(tmp_path / "mirror.yaml", source_bootstrap, destination_bootstrap, one, two))
    topics = {
        one: create_topic(source_bootstrap, unique_name("t1"), 2),
        two: create_topic(source_bootstrap, unique_name("t2"), 2),
    }
    for link, topic in topics.items():
        _produce(source_bootstrap, topic, 200)
        engine.create_mirror(config, link, topic)
        _timed_cycle(config, link, spark)

    ctx_one, ctx_two = LinkContext.open(config, one), LinkContext.open(config, two)
    ctx_one.registry()
    ctx_two.registry()
    killed_topic = ctx_one.store.offset_map_topic
    before = []
    for _ in range(2):
        _produce(source_bootstrap, topics[two], 200)
        before.append(_timed_cycle(config, two, spark))

    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, destination_bootstrap, one, killed_topic, str(KILLED_TRANSACTION_TIMEOUT_MS)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert writer.stdout.readline().strip() == "open"
    finally:
        os.killpg(writer.pid, signal.SIGKILL)
        writer.wait()
    assert _transaction_open(ctx_one, killed_topic)

    _produce(source_bootstrap, topics[two], 200)
    after = _timed_cycle(config, two, spark)
    # Link two finished its cycle while link one's killed transaction still holds
    # its topic: link two read nothing that transaction holds back.
    assert _transaction_open(ctx_one, killed_topic), "the killed transaction ended before link two's cycle did"
    assert ctx_two.store.offset_map_topic != killed_topic
    assert_identical(read_topic(source_bootstrap, topics[two], 2), read_topic(destination_bootstrap, topics[two], 2))
    print(
        f"\nlink '{two}' cycle: {', '.join(f'{s:.1f}' for s in before)} s before, {after:.1f} s with "
        f"link '{one}''s writer killed mid-transaction"
    )

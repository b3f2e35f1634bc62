"""What `TransactionalWriter._fenced_meanwhile` relies on, on the real local pair: once another
writer with its transactional id took over, a writer's abort raises the fence (a producer's
fatal error), whatever its failed commit said; a writer nobody fenced just aborts."""

from __future__ import annotations

from mirror_pipeline.config.loader import load_config
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.link.state_writers import TransactionalWriter
from tests.integration.conftest import LINK


def test_an_abort_tells_a_fenced_writer_from_one_nobody_fenced(write_config, unique_name):
    tag = unique_name("fenced")
    config = load_config(
        write_config({"mirror.state.topic": f"_{tag}.state", "mirror.offset.map.topic": f"_{tag}.map"})
    )
    ctx = LinkContext.open(config, LINK)
    ctx.store.ensure_topics()
    topic, props = ctx.store.offset_map_topic, ctx.store.dest_properties

    def writer(txn_id: str) -> TransactionalWriter:
        w = TransactionalWriter(props, LINK, f"{tag}-{txn_id}", topic)
        w.fence()
        w._producer.begin_transaction()
        w._producer.produce(topic, key=b"k", value=b"v")
        return w

    old, alone = writer("slot"), writer("other")
    new = TransactionalWriter(props, LINK, f"{tag}-slot", topic)
    new.fence()  # takes over from `old` while its transaction is open
    try:
        assert old._fenced_meanwhile()
        assert not alone._fenced_meanwhile()
        alone.write([("k", b"v")])  # its transaction was aborted: the writer goes on
    finally:
        for w in (old, alone, new):
            w.close()

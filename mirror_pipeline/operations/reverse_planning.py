"""`reverse`'s plan (R-LC-7): per partition of the old source, continue in place or rebuild, what a
rebuild would drop (counted, to be saved), and how the plan is told. Read-only: `reverse`
records the plan and carries it out.
"""

from __future__ import annotations

import time

from confluent_kafka import TopicCollection

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorRefused
from mirror_pipeline.model.offset_map import resolve_keyed
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.reverse_plan import (
    CONTINUE,
    REBUILD,
    PartitionFacts,
    PartitionReverse,
    decide_partition,
    new_source_partition,
    topic_action,
)
from mirror_pipeline.operations import divergence

# The phases of a recorded plan, in order.
PLANNED, SAVED, REBUILT = "planned", "saved", "rebuilt"


# --- the plan -----------------------------------------------------------------------------------------


def make_plan(ctx: LinkContext, back: LinkContext, stopped: MirrorInfo, start: bool) -> dict:
    """Per partition of the old source: continue or rebuild, and what a rebuild would drop (counted)."""
    ctx.check_source()
    back.check_source()
    old, new_source = stopped.source_topic, stopped.mirror_topic
    a_alias, b_alias = back.dest.alias, back.source.alias
    b_parts = kc.topic_partitions(back.source_admin, new_source, b_alias)
    if b_parts is None:
        raise MirrorRefused(f"'{new_source}' no longer exists on cluster '{b_alias}': there is nothing to follow")
    a_parts = kc.topic_partitions(back.dest_admin, old, a_alias) or 0
    a_tps = [(old, p) for p in range(a_parts)]
    b_tps = [(new_source, p) for p in range(b_parts)]
    a_start = kc.list_offsets(back.dest_admin, a_tps, "earliest", a_alias)
    a_end = kc.list_offsets(back.dest_admin, a_tps, "latest", a_alias, read_committed=False)
    a_stable = kc.list_offsets(back.dest_admin, a_tps, "latest", a_alias)
    open_txn = sorted(p for (_, p), end in a_end.items() if a_stable[(old, p)] < end)
    if open_txn:
        raise MirrorRefused(
            f"'{old}' on cluster '{a_alias}' has a transaction still open in partitions "
            f"{', '.join(map(str, open_txn))}: its records cannot be told apart yet; retry once it "
            f"ends (a dead producer's transaction is aborted after its timeout)"
        )
    b_start = kc.list_offsets(back.source_admin, b_tps, "earliest", b_alias, read_committed=False)
    b_end = kc.list_offsets(back.source_admin, b_tps, "latest", b_alias, read_committed=False)
    segments = ctx.store.read_segments([new_source]).segments
    partitions: list[PartitionReverse] = []
    for p in range(a_parts):
        omap = None
        if p < b_parts:
            res = resolve_keyed(segments.get((new_source, p), []), b_end[(new_source, p)])
            if res.in_doubt:
                raise MirrorRefused(
                    f"mirror '{new_source}' partition {p}: its offset map was not settled when it "
                    f"stopped; run failover on it again, then reverse"
                )
            omap = res.offset_map
        facts = PartitionFacts(
            p,
            a_start[(old, p)],
            a_end[(old, p)],
            stopped.last_source_offsets.get(p),
            b_start.get((new_source, p)),
            b_end.get((new_source, p)),
        )
        partitions.append(decide_partition(facts, omap))
    partitions += [new_source_partition(p) for p in range(a_parts, b_parts)]
    action = topic_action(partitions) if a_parts else REBUILD
    reader = back.dest_conf("reader")
    counts = {str(p.partition): _count(reader, old, p) for p in partitions if p.saved_ranges}
    saved = divergence.saved_topic_name(old) if any(c["records"] for c in counts.values()) else ""
    if saved and kc.topic_partitions(back.dest_admin, saved, a_alias) is not None:
        raise MirrorRefused(
            f"a topic named '{saved}' already exists on cluster '{a_alias}', where this reverse "
            f"saves the records it would drop: rename or delete it, then run reverse again"
        )
    return {
        "link": ctx.link.name,
        "mirror": new_source,
        "action": action,
        "start": start,
        "phase": PLANNED,
        "planned_at": time.time(),
        "partitions": [p.to_dict() for p in partitions],
        "saved_topic": saved,
        "saved_counts": counts,
        "old_partitions": a_parts,
        "new_partitions": b_parts,
        "old_topic_id": topic_id(back, old) if a_parts and action == REBUILD else "",
    }


def _count(reader: dict, topic: str, part: PartitionReverse) -> dict:
    total = divergence.RangeCount()
    for start, end in part.saved_ranges:
        total = total.plus(divergence.count_records(reader, topic, part.partition, start, end))
    return {"records": total.records, "first_timestamp": total.first_timestamp, "last_timestamp": total.last_timestamp}


def topic_id(back: LinkContext, topic: str) -> str:
    fut = back.dest_admin.describe_topics(TopicCollection([topic]), request_timeout=kc.REQUEST_TIMEOUT_S)[topic]
    with kc.kafka_errors(f"cluster '{back.dest.alias}': describing '{topic}' failed", ignore=kc.UNKNOWN_TOPIC):
        return str(fut.result().topic_id)
    return ""


# --- what it says ----------------------------------------------------------------------------------------


def plan_sentence(plan: dict, back: LinkContext, dry_run: bool) -> str:
    new = f"'{plan['mirror']}' on link '{back.link.name}'"
    saved = sum(c["records"] for c in plan["saved_counts"].values())
    keep = f"; {saved} records it would drop saved to '{plan['saved_topic']}'" if saved else "; nothing to save"
    if plan["action"] == CONTINUE:
        what = f"old source follows {new} in place: same offsets, no data copied again"
    else:
        what = f"old source rebuilt as a mirror of {new}, copied from its log start{keep}"
    return ("would be: " if dry_run else "") + what


def report(plan: dict, back: LinkContext, new_mirror: str) -> dict:
    rows = []
    for part in plan["partitions"]:
        count = plan["saved_counts"].get(str(part["partition"]), {})
        rows.append(
            {
                **part,
                "saved_records": count.get("records", 0),
                "saved_first_timestamp": count.get("first_timestamp"),
                "saved_last_timestamp": count.get("last_timestamp"),
            }
        )
    return {
        "reverse_link": back.link.name,
        "new_mirror": new_mirror,
        "action": plan["action"],
        "saved_topic": plan["saved_topic"],
        "partitions": rows,
    }

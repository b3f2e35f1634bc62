"""One copy task that freezes itself (SIGSTOP) at a chosen point of its first chunk, as a process of its own.

`python -m tests.faults.stalled_task WORK_FILE POINT`: WORK_FILE holds the
pickled (WorkUnit, CopyContext) a cycle's driver planned, or (a list of
WorkUnit, CopyContext) for a task copying a group of small units together
(`group_copy`); POINT is

- `announced`: the chunk's segment is committed, none of its records produced;
- `produced`: its records are in the producer's queue, in no request yet;
- `group-announced` (a group): the first round's segments of a writer slot
  are committed, none of its records produced;
- `between-partitions` (a group): the first partition's records of the first
  round are in the producer's queue (in no request yet), the next partition's
  not yet produced.

At the two points after producing, the task's writers linger until just before
their records' delivery timeout, which every freeze outlasts (it spans a whole
cycle and its fence wait), so no ProduceRequest is built before it: on thaw
librdkafka's first timeout scan drops the records. A request librdkafka
built before a freeze is written on thaw however old its records are: that is
the limit of fencing by time, and the next cycle flags what lands that way as
records the link did not write (docs/how-it-works.md, "A fenced writer's
records land within the fence wait").

The process stops itself there, as a Spark worker descheduled or paused by
the kernel would stop, and goes on when sent SIGCONT. It prints its
`UnitResult` as JSON when the task ends.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
from dataclasses import asdict


def stop_after(function, stops: list):
    """`function`, that freezes the process after its first call returns."""

    def frozen_after_first_call(*args, **kwargs):
        out = function(*args, **kwargs)
        if not stops:
            stops.append(True)
            os.kill(os.getpid(), signal.SIGSTOP)
        return out

    return frozen_after_first_call


def main(work_file: str, point: str) -> int:
    from mirror_pipeline.kafka import client_settings
    from mirror_pipeline.link.state_store import SegmentWriter, SlotWriter
    from mirror_pipeline.replication import copier, group_copy, round_sending

    with open(work_file, "rb") as f:
        work, ctx = pickle.load(f)
    stops: list = []
    if point == "announced":
        SegmentWriter.write = stop_after(SegmentWriter.write, stops)
    elif point == "produced":
        copier.produce_chunk = stop_after(copier.produce_chunk, stops)
    elif point == "group-announced":
        SlotWriter.write_segments = stop_after(SlotWriter.write_segments, stops)
    elif point == "between-partitions":
        round_sending.produce_chunk = stop_after(round_sending.produce_chunk, stops)
    else:
        raise SystemExit(f"unknown stop point {point!r}")
    if point in ("produced", "between-partitions"):
        # librdkafka requires a linger below the delivery timeout.
        client_settings.ROLE_SETTINGS["writer"]["linger.ms"] = ctx.writer_delivery_timeout_ms - 1
    results = group_copy.copy_group(work, ctx) if isinstance(work, list) else [copier.copy_unit(work, ctx)]
    print(json.dumps([asdict(result) for result in results]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

"""One copy task that freezes itself (SIGSTOP) at a chosen point of its first chunk, as a process of its own.

`python -m tests.faults.stalled_task WORK_FILE POINT`: WORK_FILE holds the
pickled (WorkUnit, CopyContext) a cycle's driver planned; POINT is

- `announced`: the chunk's segment is committed, none of its records produced;
- `produced`: its records are in the producer's queue, some perhaps sent.

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
    from mirror_pipeline.link.state_store import SegmentWriter
    from mirror_pipeline.replication import copier

    with open(work_file, "rb") as f:
        unit, ctx = pickle.load(f)
    stops: list = []
    if point == "announced":
        SegmentWriter.write = stop_after(SegmentWriter.write, stops)
    elif point == "produced":
        copier.produce_chunk = stop_after(copier.produce_chunk, stops)
    else:
        raise SystemExit(f"unknown stop point {point!r}")
    result = copier.copy_unit(unit, ctx)
    print(json.dumps(asdict(result)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

"""How often a process that plans cycles runs Python's cyclic garbage collector.

Python's default thresholds (700, 10, 10) collect the young generation every
700 net allocations, the middle one every 10 of those, and the whole heap
every 10 middle ones once the objects new to the oldest generation are a
quarter of it. Planning a wide link allocates hundreds of
thousands of short- and long-lived objects that hold no reference cycles (the
client's futures for three ListOffsets of 10,000 partitions, the topics'
configurations, a PartitionPlan per partition): the collector walked them
again and again and found nothing. On a link of 10,000 partitions, 19 full
collections took 2.2-3.2 s of a one-record `run` (0.1-0.3 s each, every one
collecting 0 objects), and planning alone spent 0.95 s of its 2.3 s in them.

With the young threshold at 50,000, the same run's work spends 0.4-0.5 s in
the collector and makes no full collection; planning took 1.5-1.8 s. Garbage
cycles are still collected, only in larger batches: what waits is at most
one young generation of them (a few MB), and full collections still come
once the older generations fill. The copy tasks turn the collector off
around their copy loop instead (`copier.copy_unit`): they are one task per
process, with nothing else running there.
"""

from __future__ import annotations

import gc

# Net allocations between young collections; the older generations keep Python's ratios.
YOUNG_THRESHOLD = 50_000
MIDDLE_THRESHOLD = 10
OLD_THRESHOLD = 10


def apply() -> None:
    """Collect less often in this process (see the module); called once by each entry point."""
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)

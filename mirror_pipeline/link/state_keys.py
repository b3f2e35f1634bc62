"""Names inside a link's internal topics: record keys and writer identities.

Keys of the *state* topic: `mirror/<link>/<mirror topic>` (one per mirror),
`link/<link>` (the naming its mirrors were created under) and `acl/<link>`
(the ACL bindings it created); keys of the *offset-map* topic:
`<link>/<mirror topic>/<partition>/<mirror offset>` (one per segment).
Joined by `/`, which no link or topic name holds, so no two keys collide.
"""

from __future__ import annotations

import zlib

# A link's segments are written under a fixed number of writer identities (slots),
# each serving every mirror partition that maps to it (`writer_slot`): the link's
# `mirror.writer.slots`. A cycle then fences at most that many writers however
# wide the link, and a stop fences the slots of its mirror's partitions. The count
# never changes under a link with live mirrors: a zombie writer is only fenced by
# a writer of the same identity (`LinkContext.writer_slots` holds a link to the
# count its record keeps). Links whose record predates the setting had this many:
LEGACY_WRITER_SLOTS = 64


def segment_key(link: str, mirror: str, partition: int, dest_start: int) -> str:
    return f"{link}/{mirror}/{partition}/{dest_start:020d}"


def mirror_key(link: str, mirror: str) -> str:
    return f"mirror/{link}/{mirror}"


def link_key(link: str) -> str:
    return f"link/{link}"


def acl_key(link: str) -> str:
    return f"acl/{link}"


def writer_slot(mirror: str, partition: int, slots: int) -> int:
    """The writer slot of a mirror partition on a link of `slots` slots: a mirror's partitions
    take consecutive slots (so up to `slots` of them never share one), from a start its name decides."""
    return (zlib.crc32(mirror.encode()) + partition) % slots


def slot_transactional_id(link: str, slot: int) -> str:
    """The writer identity of one writer slot: a new writer fences the previous one.

    Joined by `/`, which no link or topic name holds; `writer` keeps it apart
    from the link's state writer (`state_writer_id`).
    """
    return f"mirror-pipeline/{link}/writer/{slot}"


def transactional_id(link: str, mirror: str, partition: int, slots: int) -> str:
    """The writer identity that announces a mirror partition's chunks (its slot's)."""
    return slot_transactional_id(link, writer_slot(mirror, partition, slots))


def state_writer_id(link: str) -> str:
    """One writer identity per link for its mirror records (a `/` never appears in a topic name)."""
    return f"mirror-pipeline/{link}/state"

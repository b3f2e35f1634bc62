"""Names inside a link's internal topics: record keys and writer identities.

Keys of the *state* topic: `mirror/<link>/<mirror topic>` (one per mirror),
`link/<link>` (the naming its mirrors were created under) and `acl/<link>`
(the ACL bindings it created); keys of the *offset-map* topic:
`<link>/<mirror topic>/<partition>/<mirror offset>` (one per segment).
Joined by `/`, which no link or topic name holds, so no two keys collide.
"""

from __future__ import annotations


def segment_key(link: str, mirror: str, partition: int, dest_start: int) -> str:
    return f"{link}/{mirror}/{partition}/{dest_start:020d}"


def mirror_key(link: str, mirror: str) -> str:
    return f"mirror/{link}/{mirror}"


def link_key(link: str) -> str:
    return f"link/{link}"


def acl_key(link: str) -> str:
    return f"acl/{link}"


def transactional_id(link: str, mirror: str, partition: int) -> str:
    """One writer identity per mirror partition: a new writer fences the previous one.

    Joined by `/`, which no link or topic name holds, so no two partitions share
    an identity (with `.`, link `a` + topic `b.c` was link `a.b` + topic `c`).
    """
    return f"mirror-pipeline/{link}/{mirror}/{partition}"


def state_writer_id(link: str) -> str:
    """One writer identity per link for its mirror records (a `/` never appears in a topic name)."""
    return f"mirror-pipeline/{link}/state"

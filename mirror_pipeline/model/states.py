"""The mirror lifecycle's vocabulary: states, flags and the moves allowed between them (R-LC-1).

A leaf: it imports nothing of the project but the result objects, so every
module can use the words without importing the verbs that drive them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from mirror_pipeline.model.errors import MirrorRefused
from mirror_pipeline.model.results import MirrorInfo

ACTIVE = "ACTIVE"
PAUSED = "PAUSED"
PENDING_STOPPED = "PENDING_STOPPED"
STOPPED = "STOPPED"
SOURCE_UNAVAILABLE = "SOURCE_UNAVAILABLE"
LINK_FAILED = "LINK_FAILED"
FAILED = "FAILED"
STATES = (ACTIVE, PAUSED, PENDING_STOPPED, STOPPED, SOURCE_UNAVAILABLE, LINK_FAILED, FAILED)

# Flags, not states: why copying is refused although the state allows it.
# The mirror holds records the link did not write (R-MT-9).
FOREIGN_WRITE = "FOREIGN_WRITE"
# A promote or failover is stopping the mirror: set before it fences the
# writers, so no copy task that starts afterwards writes another record (R-LC-8).
STOPPING = "STOPPING"
# A reverse is turning the old source topic into this mirror (R-LC-7): its
# data is being saved or rebuilt, nothing may be copied into it until that is done.
REVERSING = "REVERSING"
# A delete is removing the mirror: set before it fences the writers, for the same
# reason as STOPPING; a delete that dies halfway leaves it, and running it again finishes.
DELETING = "DELETING"
NO_COPY_FLAGS = frozenset({FOREIGN_WRITE, STOPPING, REVERSING, DELETING})

# States a replication cycle copies in (a SOURCE_UNAVAILABLE mirror is retried).
COPYING = frozenset({ACTIVE, PENDING_STOPPED, SOURCE_UNAVAILABLE})
# States whose source cycles and the health sensor watch, to move them on.
WATCHED = COPYING | {LINK_FAILED}

# States config sync follows: not SOURCE_UNAVAILABLE, whose source configs cannot be read
# (PENDING_STOPPED is synced: promote waits for its config lag to be zero).
CONFIG_SYNCED_STATES = frozenset({ACTIVE, PAUSED, PENDING_STOPPED})
# States offset sync follows: also SOURCE_UNAVAILABLE, as groups are translated through the
# mirror's own offset map, exact up to where copying stopped (a STOPPED topic's groups are
# its new consumers'; LINK_FAILED answers from the wrong cluster; FAILED has no source left).
OFFSET_SYNCED_STATES = CONFIG_SYNCED_STATES | {SOURCE_UNAVAILABLE}

ALLOWED: dict[str, frozenset[str]] = {
    ACTIVE: frozenset({PAUSED, PENDING_STOPPED, STOPPED, SOURCE_UNAVAILABLE, LINK_FAILED, FAILED}),
    PAUSED: frozenset({ACTIVE, PENDING_STOPPED, STOPPED}),
    PENDING_STOPPED: frozenset({STOPPED, SOURCE_UNAVAILABLE}),
    SOURCE_UNAVAILABLE: frozenset({ACTIVE, PAUSED, PENDING_STOPPED, STOPPED, FAILED, LINK_FAILED}),
    LINK_FAILED: frozenset({ACTIVE, STOPPED}),
    FAILED: frozenset({STOPPED}),
    STOPPED: frozenset(),  # promote and failover are irreversible
}
HISTORY_KEPT = 20


def may_copy(info: MirrorInfo | None) -> bool:
    """Whether a copy task may write into this mirror now."""
    return info is not None and info.state in COPYING and not (NO_COPY_FLAGS & set(info.flags))


def transition(info: MirrorInfo, to: str, reason: str, **changes: Any) -> MirrorInfo:
    """The mirror in state `to`; refuses a move the lifecycle does not allow."""
    if to not in ALLOWED[info.state]:
        raise MirrorRefused(f"mirror '{info.mirror_topic}' is {info.state}; it cannot become {to}")
    now = time.time()
    history = (info.history + ((now, info.state, to, reason),))[-HISTORY_KEPT:]
    return replace(info, state=to, state_time=now, reason=reason, history=history, **changes)


def with_flag(info: MirrorInfo, flag: str, present: bool = True) -> MirrorInfo:
    flags = set(info.flags) | {flag} if present else set(info.flags) - {flag}
    return replace(info, flags=tuple(sorted(flags)))


def count_per_state(states: Iterable[str]) -> dict[str, int]:
    """How many of `states` (state names) are in each state: every state listed, in `STATES` order."""
    counts = dict.fromkeys(STATES, 0)
    for state in states:
        counts[state] = counts.get(state, 0) + 1
    return counts


def state_summary(counts: dict[str, int]) -> str:
    """ "ACTIVE 3, PAUSED 1": the states held by at least one mirror, most common first."""
    held = sorted(((s, n) for s, n in counts.items() if n), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{s} {n}" for s, n in held) or "no mirror"

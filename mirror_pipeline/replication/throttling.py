"""What a task's mirror writers learn of the destination throttling them (a produce quota).

A broker over a client's produce quota answers at once and then reads
nothing more from that connection for the throttle time: a request the
writer already sent waits there and is appended when the time is over, even
after the writer gave its records up (they missed their deadline) or died.
A chunk held that way past `mirror.writer.fence.wait.ms` lands after the
repair settled without it, and the next cycle flags the mirror
`FOREIGN_WRITE`: the link's own records counted as another writer's.
Nothing is lost, but the mirror stops, so a chunk that failed under a
throttle says so, naming the quota's client id and what to change.
"""

from __future__ import annotations

from typing import Any


class ThrottleWatch:
    """The longest throttle the destination's brokers reported to a task's writers
    (librdkafka's `throttle_cb`, served by the writers' `poll` and `flush`)."""

    def __init__(self) -> None:
        self.longest_ms = 0
        self.client_id = ""

    def __call__(self, event: Any) -> None:
        self.longest_ms = max(self.longest_ms, int(event.throttle_time * 1000))

    def watching(self, settings: dict[str, Any]) -> dict[str, Any]:
        """`settings` of a writer, with this watch as their throttle callback."""
        self.client_id = str(settings.get("client.id", ""))
        return {**settings, "throttle_cb": self}

    def why_late(self) -> str:
        """What to add to a write failure: '' when no broker throttled the writers."""
        if not self.longest_ms:
            return ""
        return (
            f"; the destination throttled this link's writers for up to {self.longest_ms} ms (a produce quota on "
            f"client id '{self.client_id}'), and records a broker holds back can land after "
            f"mirror.writer.fence.wait.ms, to be flagged FOREIGN_WRITE: raise the quota, or the fence wait above "
            f"the throttle"
        )

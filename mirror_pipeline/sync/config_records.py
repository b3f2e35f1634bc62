"""What config sync remembers per mirror, in the destination's state topic.

To tell an operator's override from a value the link set, the link remembers
what it last applied to each mirror, under `configsync/<link>/<mirror>`:

    {"applied": {name: value}, "synced_at": ts, "source": {name: value},
     "held_back": {name: value}, "pending": {name: value}, "checked_at": ts}

`synced_at` is the last time the mirror was found in sync with its source (the
config-sync lag is measured from it, R-CS-4); `pending` holds the values of an
alter in progress, written before the alter, so that a sync that dies between
altering and recording does not later mistake its own values for overrides.
Before a mirror's first sync there is no record: every value the mirror has
then counts as the link's (it got them from the source at creation), so an
override made before the first sync is overwritten once.
"""

from __future__ import annotations

import json

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext


def config_sync_key(link: str, mirror: str) -> str:
    """State-topic key of what the link last applied to `mirror`."""
    return f"configsync/{link}/{mirror}"


def read_sync_records(ctx: LinkContext) -> dict[str, dict]:
    """What the link last recorded per mirror (`configsync/<link>/<mirror>`; latest record wins)."""
    prefix = config_sync_key(ctx.link.name, "")
    state = ctx.store.read_latest(ctx.store.state_topic)  # read incrementally, like the registry
    latest = {} if state is None else {k[len(prefix) :]: v for k, v in state[0].items() if k.startswith(prefix)}
    out: dict[str, dict] = {}
    for mirror, value in latest.items():
        try:
            record = json.loads(value)
        except ValueError:
            continue  # unreadable: as if never synced
        if isinstance(record, dict):
            out[mirror] = record
    return out


def write_sync_records(ctx: LinkContext, records: dict[str, dict]) -> None:
    """All records with one producer (one `_write_plain` each would start a producer per mirror)."""
    kc.produce_all(
        ctx.store.conf("state-writer"),
        ctx.store.state_topic,
        [
            (config_sync_key(ctx.link.name, m).encode(), json.dumps(r, sort_keys=True).encode())
            for m, r in sorted(records.items())
        ],
        f"cluster '{ctx.dest.alias}': writing config-sync state to '{ctx.store.state_topic}' failed",
    )


def str_map(value) -> dict[str, str]:
    """A record's name -> value map ({} when the record holds none, or something else)."""
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

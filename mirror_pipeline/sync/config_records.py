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

A sync of every mirror of the link rewrites only the records whose content
changed, and says when it found the others in sync in one record of the
link, `configsync-checked/<link>`: {"at": ts, "in_sync": [mirror, ...]}.
Rewriting every record at every sync (every 5 s in follow mode by default)
wrote 1,000 records, 1.5 MB, per sync of a link of 1,000 mirrors to the
state topic every command reads.
"""

from __future__ import annotations

import json

from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext


def config_sync_key(link: str, mirror: str) -> str:
    """State-topic key of what the link last applied to `mirror`."""
    return f"configsync/{link}/{mirror}"


def checked_key(link: str) -> str:
    """State-topic key of when the link's last sync of every mirror found which of them in sync."""
    return f"configsync-checked/{link}"


# The in-sync list a link's checked record holds at most (names of up to 249 characters, under the
# state topic's 1 MB records); a wider link's syncs rewrite every record, as before the checked record.
MAX_CHECKED_MIRRORS = 3000


def read_sync_records(ctx: LinkContext) -> dict[str, dict]:
    """What the link last recorded per mirror (`configsync/<link>/<mirror>`; latest record wins), its
    `synced_at` and `checked_at` the checked record's time where that is later and names the mirror."""
    prefix = config_sync_key(ctx.link.name, "")
    state = ctx.store.read_latest(ctx.store.state_topic)  # read incrementally, like the registry
    latest = {} if state is None else {k[len(prefix) :]: v for k, v in state[0].items() if k.startswith(prefix)}
    out: dict[str, dict] = {}
    for mirror, value in latest.items():
        record = _json_dict(value)
        if record is not None:  # unreadable: as if never synced
            out[mirror] = record
    checked = (_json_dict(state[0].get(checked_key(ctx.link.name))) if state is not None else None) or {}
    at, in_sync = checked.get("at"), checked.get("in_sync")
    if isinstance(at, (int, float)) and isinstance(in_sync, list):
        for mirror in in_sync:
            record = out.get(mirror)
            if record is not None and not record.get("pending"):
                for stamp in ("synced_at", "checked_at"):
                    mine = record.get(stamp)
                    record[stamp] = max(at, mine) if isinstance(mine, (int, float)) else at
    return out


def write_sync_records(
    ctx: LinkContext, records: dict[str, dict], checked: tuple[float, list[str]] | None = None
) -> None:
    """All records with one producer (one `_write_plain` each would start a producer per mirror), then
    `checked` (when, the mirrors found in sync) as the link's checked record."""
    out = [
        (config_sync_key(ctx.link.name, m).encode(), json.dumps(r, sort_keys=True).encode())
        for m, r in sorted(records.items())
    ]
    if checked is not None:
        at, in_sync = checked
        out.append((checked_key(ctx.link.name).encode(), json.dumps({"at": at, "in_sync": sorted(in_sync)}).encode()))
    kc.produce_all(
        ctx.store.conf("state-writer"),
        ctx.store.state_topic,
        out,
        f"cluster '{ctx.dest.alias}': writing config-sync state to '{ctx.store.state_topic}' failed",
    )


def unchanged_but_times(old: dict, new: dict) -> bool:
    """Whether `new` says what `old` says but for its times (and `old` holds no alter in progress)."""
    return not old.get("pending") and all(
        old.get(k) == v for k, v in new.items() if k not in ("synced_at", "checked_at")
    )


def _json_dict(value: bytes | str | None) -> dict | None:
    if value is None:
        return None
    try:
        record = json.loads(value)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def str_map(value) -> dict[str, str]:
    """A record's name -> value map ({} when the record holds none, or something else)."""
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

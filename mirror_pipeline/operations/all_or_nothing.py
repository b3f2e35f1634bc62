"""Lifecycle verbs given several mirrors are all or nothing (issue #31, R-LC-8).

Checks first (`check_request`): before anything changes, every named mirror
must be a mirror of the link whose state and flags allow the verb
(`why_not`: it reads nothing but the link's registry, so the CLI and the
Dagster jobs ask it too before they launch anything). One that cannot go
refuses the whole request, naming each mirror that cannot and why.

Then mirror by mirror (`one_by_one`): a cluster can still stop answering
between two mirrors. The verb stops at the first failure and undoes nothing
that succeeded (a state change is never undone silently, R-LC-8); `Incomplete`
says which mirrors changed, which did not and why, and which were not
attempted, and carries the result for the CLI and the Dagster run to show.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from mirror_pipeline.config.link_settings import LinkConfig
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError, MirrorRefused
from mirror_pipeline.model.results import MirrorInfo
from mirror_pipeline.model.states import (
    ACTIVE,
    FAILED,
    FOREIGN_WRITE,
    PAUSED,
    PENDING_STOPPED,
    REVERSING,
    SOURCE_UNAVAILABLE,
    STOPPED,
    STOPPING,
)
from mirror_pipeline.model.text import some_of

DONE = {
    "pause": "paused",
    "resume": "resumed",
    "promote": "promoted",
    "failover": "failed over",
    "delete": "deleted",
    "reverse": "reversed",
}
NOT_ATTEMPTED = "not attempted"
# The states a verb takes a mirror in (the ones it is already done with included), and why others cannot go.
_STATES = {
    "pause": ((ACTIVE, SOURCE_UNAVAILABLE, PAUSED), "only an ACTIVE mirror can be paused"),
    "resume": ((PAUSED, ACTIVE, SOURCE_UNAVAILABLE, PENDING_STOPPED), "only a PAUSED mirror can be resumed"),
    "promote": (
        (ACTIVE, PAUSED, PENDING_STOPPED, SOURCE_UNAVAILABLE, STOPPED),
        "it cannot be promoted; failover can stop it",
    ),
}
# A mirror a reverse is still setting up may hold the only copy of records it has yet to save:
# nothing but the reverse may stop or delete it until the reverse finished.
_AFTER_REVERSE = {"promote": "promote or fail it over", "failover": "promote or fail it over", "delete": "delete it"}
_RECREATED = "would be created again by auto-create"
# Said once, however many mirrors auto-create would make again.
_WAYS_OUT = (
    "to delete such a mirror, delete the source topic first (and wait for the mirror to be FAILED), "
    "exclude it with an EXCLUDE filter, or turn auto.create.mirror.topics.enable off"
)


@dataclass
class LifecycleResult:
    """What a verb did, per mirror: the state before and after and a sentence; `not_done`: when it did
    not finish, every mirror it did not carry out, with the state it was checked in and why."""

    verb: str
    link: str
    mirrors: dict[str, dict] = field(default_factory=dict)
    not_done: dict[str, dict] = field(default_factory=dict)

    def add(self, before: MirrorInfo, after: MirrorInfo, said: str, **extra) -> None:
        self.mirrors[before.mirror_topic] = {"before": before.state, "after": after.state, "said": said, **extra}

    def to_dict(self) -> dict:
        done = {"verb": self.verb, "link": self.link, "mirrors": self.mirrors}
        return {**done, "not_done": self.not_done} if self.not_done else done


class Incomplete(MirrorError):
    """A verb failed part-way, after every check passed: `result` holds what it did and did not do."""

    def __init__(self, result: LifecycleResult):
        super().__init__(summary(result))
        self.result = result


def why_not(verb: str, info: MirrorInfo, link: LinkConfig, every: bool = False) -> str | None:
    """Why `verb` cannot take this mirror now, or None. `every`: the request is every mirror of the
    link, which leaves the STOPPED ones (normal topics by now) out of a pause or resume."""
    name = f"mirror '{info.mirror_topic}'"
    if verb == "reverse":
        return (
            None
            if info.state == STOPPED
            else (
                f"{name} is {info.state} on link '{link.name}': promote or fail it over first (reverse makes its old "
                f"source follow it)"
            )
        )
    if info.state == STOPPED and (every or verb in ("promote", "failover")):
        return None  # already stopped, or no longer a mirror to pause or resume
    if REVERSING in info.flags and verb in _AFTER_REVERSE:
        return (
            f"{name} is being set up by a reverse that did not finish (run reverse again to finish it, then "
            f"{_AFTER_REVERSE[verb]})"
        )
    allowed, refusal = _STATES.get(verb, ((info.state,), ""))
    if info.state not in allowed:
        return f"{name} is {info.state} ({refusal})"
    if verb == "promote" and STOPPING in info.flags:
        return f"{name} is being stopped by a failover that did not finish (run failover again to finish it)"
    if verb == "promote" and FOREIGN_WRITE in info.flags:
        return f"{name} holds records the link did not write (promote cannot verify it; failover can stop it)"
    if (
        verb == "delete"
        and link.auto_create_enable
        and info.state not in (FAILED, STOPPED)
        and link.auto_create_filters.selects(info.source_topic)
    ):
        # Auto-create would make the mirror again at once (R-AC-4); a FAILED or STOPPED one may go.
        return (
            f"{name} {_RECREATED}: the link's auto.create.mirror.topics.filters still select its source topic "
            f"'{info.source_topic}'"
        )
    return None


def check_request(
    verb: str, link: LinkConfig, registry: Mapping[str, MirrorInfo], topics: Sequence[str] | None
) -> list[MirrorInfo]:
    """The mirrors `topics` names (every mirror of the link when None), once every one of them can go.

    Otherwise `MirrorRefused` names each that cannot (unknown names first)
    and why; nothing was changed. `registry` is the link's, as just read.
    """
    every = topics is None
    chosen = sorted(registry) if topics is None else list(dict.fromkeys(topics))
    clauses = []
    unknown = [t for t in chosen if t not in registry]
    if unknown:
        clauses.append(
            f"no mirror {', '.join(repr(t) for t in unknown)} on link '{link.name}' "
            f"(its mirrors: {some_of(sorted(registry))})"
        )
    clauses += [why for t in chosen if t in registry and (why := why_not(verb, registry[t], link, every))]
    clauses += [_WAYS_OUT] if any(_RECREATED in c for c in clauses) else []
    if clauses:
        raise MirrorRefused(f"{verb} refused: {'; '.join(clauses)}; nothing was changed")
    return [registry[t] for t in chosen]


def checked(ctx: LinkContext, verb: str, topics: Sequence[str] | None) -> list[MirrorInfo]:
    """`check_request` against the link's registry as it is now."""
    return check_request(verb, ctx.link, ctx.registry(), topics)


def one_by_one(
    result: LifecycleResult, infos: list[MirrorInfo], act: Callable[[MirrorInfo, list[str]], None]
) -> LifecycleResult:
    """`act(info, changed)` for each mirror in turn; at the first failure `Incomplete`, the rest not attempted.

    `act` adds its mirror to `result` once the verb's change is made, and
    appends to `changed` what it changed before that (a mark, a flag): a
    failure then reports it with the mirror, since it is not undone.
    """
    for i, info in enumerate(infos):
        changed: list[str] = []
        try:
            act(info, changed)
        except Exception as exc:
            record_failure(result, info, exc, changed)
            for later in infos[i + 1 :]:
                result.not_done.setdefault(later.mirror_topic, {"state": later.state, "why": NOT_ATTEMPTED})
            raise Incomplete(result) from exc
    return result


def record_failure(result: LifecycleResult, info: MirrorInfo, exc: Exception, changed: Sequence[str] = ()) -> None:
    """Note in `result` that `info`'s turn failed with `exc`, after what `changed` says it changed."""
    reason = str(exc) if isinstance(exc, MirrorError) else f"{type(exc).__name__}: {exc}"
    why = "; ".join([" ".join(reason.split()), *changed])
    entry = result.mirrors.get(info.mirror_topic)
    if entry is not None:  # the verb's change was made; only what came after it failed
        entry["failed_after"] = why
    else:
        result.not_done[info.mirror_topic] = {"state": info.state, "why": why}


def summary(result: LifecycleResult) -> str:
    """`pause did not finish on link 'L': paused: a; not paused: b (why), c (not attempted)`."""
    done = DONE.get(result.verb.split(" ")[0], "done")
    changed, unchanged = [], []
    for name, m in result.mirrors.items():
        if m["before"] == m["after"]:
            unchanged.append(f"{name} ({m['said']})")
        else:
            changed.append(name + (f" (then: {m['failed_after']})" if m.get("failed_after") else ""))
    parts = [f"{done}: {', '.join(changed)}"] if changed else []
    parts += [f"unchanged: {', '.join(unchanged)}"] if unchanged else []
    if result.not_done:
        parts.append(f"not {done}: " + ", ".join(f"{n} ({m['why']})" for n, m in result.not_done.items()))
    return f"{result.verb} did not finish on link '{result.link}': {'; '.join(parts)}"

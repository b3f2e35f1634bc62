"""Names of mirror topics and of this project's internal topics (R-MT-2, R-TP-4).

Every naming question is answered here, from a small policy object, so that the
copy engine never builds a topic name by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from mirror_pipeline.errors import ConfigError

INTERNAL_PREFIX = "_mirror-pipeline"
INTERNAL_KINDS = ("state", "offset-map", "checkpoints", "heartbeats")


@dataclass(frozen=True)
class LinkNaming:
    """Cluster Linking naming: names kept, with the link's optional prefix."""

    prefix: str = ""
    separator: str = "."

    def mirror_topic(self, source_topic: str) -> str:
        return f"{self.prefix}{source_topic}"

    def check_mirror_name(self, source_topic: str, mirror_topic: str) -> None:
        """A hand-picked mirror name on a prefixed link must carry the prefix (R-MT-2)."""
        if self.prefix and not mirror_topic.startswith(self.prefix):
            raise ConfigError(
                f"mirror topic '{mirror_topic}' must start with the link prefix '{self.prefix}'"
            )

    def would_loop(self, source_topic: str) -> bool:
        """True when copying `source_topic` would send it back to a cluster it came from (R-TP-2)."""
        return False

    def internal_topic(self, kind: str) -> str:
        if kind not in INTERNAL_KINDS:
            raise ValueError(f"unknown internal topic kind {kind!r}")
        return f"{INTERNAL_PREFIX}{self.separator}{kind}"


def is_internal_topic(name: str) -> bool:
    """Topics that are never mirrored: Kafka's, schema storage, ours, MirrorMaker's (R-AC-2)."""
    return (
        name.startswith("__")
        or name == "_schemas"
        or name.startswith(INTERNAL_PREFIX)
        or name.endswith(".internal")
        or name in ("heartbeats", "mm2-configs", "mm2-offsets", "mm2-status")
        or name.startswith(("mm2-", "connect-"))
    )


def naming_for(link) -> LinkNaming:
    return LinkNaming(prefix=link.prefix or "", separator=link.policy_separator)


def state_topic(link) -> str:
    return link.state_topic or naming_for(link).internal_topic("state")


def offset_map_topic(link) -> str:
    return link.offset_map_topic or naming_for(link).internal_topic("offset-map")


def checkpoints_topic(link) -> str:
    return naming_for(link).internal_topic("checkpoints")


def heartbeats_topic(link) -> str:
    return naming_for(link).internal_topic("heartbeats")

"""A user replication policy, loaded by dotted path in the config tests."""

from mirror_pipeline.config.replication_policy import ReplicationPolicy


class UpperCaseAliasPolicy(ReplicationPolicy):
    """Names mirrors `<SOURCE ALIAS>_<topic>` and keeps internal topics under `ops.`."""

    name = "UpperCaseAliasPolicy"
    allows_renaming = False

    def mirror_topic(self, source_topic: str) -> str:
        return f"{self.source_alias.upper()}_{source_topic}"

    def internal_topic(self, kind: str) -> str:
        return f"ops.mirror-{kind}"


class NotAPolicy:
    pass

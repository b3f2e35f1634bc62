"""One error hierarchy for the engine.

Kafka errors are mapped into it in `mirror_pipeline.kafka.clients`; the CLI and
the Dagster layer turn it into failures at their edge. Messages never carry
secrets: they name clusters by alias and keys by name, never by value.
"""


class MirrorError(Exception):
    """Base of every error the engine raises on purpose."""


class ConfigError(MirrorError):
    """The configuration file or a command-line value is invalid."""


class ClusterUnreachable(MirrorError):
    """A cluster did not answer within the timeout."""


class TopicNotFound(MirrorError):
    """A topic that must exist does not."""


class MirrorRefused(MirrorError):
    """A mirror operation was refused; the message says why and nothing changed."""


class ConcurrentWriter(MirrorError):
    """Another writer touched a mirror partition this cycle planned to write."""


class StateChanged(MirrorError):
    """The mirror was paused, stopped or deleted while a cycle ran: its units stopped without writing."""


class MirrorDiverged(MirrorError):
    """A mirror partition holds records the link did not write (R-MT-9)."""


class LocalClusterError(MirrorError):
    """The embedded local Kafka clusters could not be installed, started or stopped."""

"""Embedded local Apache Kafka clusters (KRaft, one node each) for demos and tests.

`jars` fetches Kafka's jars through Maven into a per-user cache; `clusters`
formats, starts, watches and stops single-node clusters named like regions
(us-west, us-east, ...), each on its own ports, detached from the caller;
`layout` says where each cluster's ports and files are, `server_config`
renders its settings and `processes` owns the broker processes.
"""

from mirror_pipeline.local.clusters import DEFAULT_NAMES, ClusterInfo, LocalKafka, default_root
from mirror_pipeline.local.jars import KAFKA_VERSION, ensure_kafka_jars, java_command

__all__ = [
    "DEFAULT_NAMES",
    "KAFKA_VERSION",
    "ClusterInfo",
    "LocalKafka",
    "default_root",
    "ensure_kafka_jars",
    "java_command",
]

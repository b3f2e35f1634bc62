"""What a local cluster's broker is given: its `server.properties` and its storage's cluster id."""

from __future__ import annotations

import base64
import uuid

from mirror_pipeline.local.layout import ClusterLayout


def server_properties(cluster: ClusterLayout) -> str:
    """Broker+controller config for a one-node dev cluster (replication factor 1 everywhere)."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{cluster.controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{cluster.port},CONTROLLER://127.0.0.1:{cluster.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{cluster.port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "log.dirs": str(cluster.log_dirs),
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        # 50 partitions (the default) make a fresh cluster's first consumer group
        # wait seconds while they are created; a dev cluster needs few.
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        # The default 50 partitions make the first transaction on a fresh cluster wait seconds.
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.check.interval.ms": "5000",
        "log.cleaner.backoff.ms": "1000",
        # A writer killed mid-transaction holds readers of its topic back until
        # its transaction is aborted: check for timed-out ones every second.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    }
    header = f"# Written by mirror-pipeline `local up` for cluster {cluster.name}; rewritten on each start.\n"
    return header + "".join(f"{k}={v}\n" for k, v in settings.items())


def random_cluster_id() -> str:
    """A Kafka cluster id (16 random bytes, URL-safe base64) made without a JVM start.

    Same shape as `StorageTool random-uuid`, which avoids ids starting with '-'
    because they read as command-line flags.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid

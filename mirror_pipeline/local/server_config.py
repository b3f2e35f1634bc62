"""What a local cluster's broker is given: its `server.properties` and its storage's cluster id."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable

from mirror_pipeline.local.layout import ClusterLayout
from mirror_pipeline.local.security import (
    BROKER_USER,
    CONTROLLER_USER,
    PLAINTEXT,
    SCRAM_MECHANISM,
    SSL,
    Credentials,
    is_sasl,
    is_tls,
    protocol,
)
from mirror_pipeline.model.errors import LocalClusterError

_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
# A local broker's index file size (Kafka's default: 10 MiB); see `server_properties`.
LOCAL_INDEX_BYTES = 128 * 1024


def server_properties(
    cluster: ClusterLayout,
    security: str = PLAINTEXT,
    creds: Credentials | None = None,
    overrides: Iterable[tuple[str, str]] = (),
) -> str:
    """Broker+controller config for a one-node dev cluster (replication factor 1 everywhere).

    In plaintext mode the listeners are PLAINTEXT and there is no authorizer;
    any other mode needs the root's credentials (see `_secured`).
    """
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
        # Every partition's offset and time indexes are files of this size, sparse until written,
        # read through memory maps. A page fault there reads ahead as far as the disk's
        # read_ahead_kb (8 MiB on the virtual machines we test on): one consumer fetching 10,000
        # partitions once brought 12.7 GB of the source broker's index files (zeros) into the page
        # cache, and once it was full every fetch read them again (172 million pages in 20
        # minutes; that consumer's read went from 0.55 to 13.4 s). Kafka's 10 MiB suits a few large
        # partitions; 128 KiB still indexes a segment of 43-64 MiB before it rolls.
        "log.index.size.max.bytes": str(LOCAL_INDEX_BYTES),
        # A writer killed mid-transaction holds readers of its topic back until
        # its transaction is aborted: check for timed-out ones every second.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    }
    if security != PLAINTEXT:
        if creds is None:
            raise LocalClusterError(f"security mode {security} needs the root's credentials")
        settings.update(_secured(cluster, security, creds))
    settings.update(overrides)
    header = f"# Written by mirror-pipeline `local up` for cluster {cluster.name}; rewritten on each start.\n"
    return header + "".join(f"{k}={v}\n" for k, v in settings.items())


def _secured(cluster: ClusterLayout, security: str, creds: Credentials) -> dict[str, str]:
    """Listeners, authentication and authorization of a secured cluster.

    The client listener (also the inter-broker one) speaks the mode's protocol.
    The controller listener speaks it too, so nothing on the node is
    unauthenticated: with mutual TLS in ssl mode (the broker shows its own
    certificate), else with SASL/PLAIN as user `controller`, since SCRAM
    credentials live in the metadata log the controller serves. Only the
    broker's identities and `admin` are super users; everyone else needs ACLs.
    """
    name = protocol(security)
    settings = {
        "listeners": f"{name}://127.0.0.1:{cluster.port},CONTROLLER://127.0.0.1:{cluster.controller_port}",
        "advertised.listeners": f"{name}://127.0.0.1:{cluster.port}",
        "listener.security.protocol.map": f"{name}:{name},CONTROLLER:{name}",
        "inter.broker.listener.name": name,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": ";".join(creds.super_users),
    }
    if is_tls(security):
        settings.update(
            {
                # Unencrypted PKCS#8 key and certificate chain in one file: no key password.
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(creds.broker_keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(creds.ca_file),
            }
        )
    if security == SSL:
        settings["ssl.client.auth"] = "required"  # the principal is the certificate's subject, User:CN=<name>
    if is_sasl(security):
        controller = creds.password(CONTROLLER_USER)
        settings.update(
            {
                "sasl.enabled.mechanisms": SCRAM_MECHANISM,
                "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
                f"listener.name.{name.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
                    f'{_SCRAM_LOGIN} required username="{BROKER_USER}" password="{creds.password(BROKER_USER)}";'
                ),
                "sasl.mechanism.controller.protocol": "PLAIN",
                "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
                # The broker's login (username/password) and the controller's one user (user_<name>).
                "listener.name.controller.plain.sasl.jaas.config": (
                    f'{_PLAIN_LOGIN} required username="{CONTROLLER_USER}" password="{controller}" '
                    f'user_{CONTROLLER_USER}="{controller}";'
                ),
            }
        )
    return settings


def random_cluster_id() -> str:
    """A Kafka cluster id (16 random bytes, URL-safe base64) made without a JVM start.

    Same shape as `StorageTool random-uuid`, which avoids ids starting with '-'
    because they read as command-line flags.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cid.startswith("-"):
            return cid

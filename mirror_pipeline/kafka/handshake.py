"""Why a client could not connect, in one sentence: a refused login or a failed TLS handshake.

librdkafka reports these only to the client's error callback (and its log),
while the request that needed the connection just times out as a transport
failure. So every admin client keeps the last such failure it saw
(`HandshakeFailures`), and `check_reachable` turns it into the error the
operator reads, instead of "did not answer" after the whole timeout.

Sentences name the cluster, the mechanism and the user name, never a
password; librdkafka's own text is not quoted beyond the TLS reason it gives.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from confluent_kafka import KafkaError

# Failures of the handshake itself: retrying with the same settings cannot mend them.
HANDSHAKE_CODES = frozenset({KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED})

# What librdkafka logs about those failures; the error raised says it once, in plain words.
_LOGGED_AS_ERROR = ("SASL authentication error", "SSL handshake failed", "SSL routines", "Authentication failed")


# librdkafka's local errors for a cluster it cannot reach, in words (their names are kept beside).
UNREACHABLE_WORDS = {
    KafkaError._TRANSPORT: "no connection to its brokers (refused, closed or unreachable)",
    KafkaError._ALL_BROKERS_DOWN: "all its brokers are down",
    KafkaError._RESOLVE: "its host name does not resolve",
    KafkaError._TIMED_OUT: "no answer in time",
}


class HandshakeFailures:
    """An error callback that remembers the client's last handshake failure."""

    def __init__(self) -> None:
        self.last: KafkaError | None = None

    def __call__(self, error: KafkaError) -> None:
        if error.code() in HANDSHAKE_CODES:
            self.last = error

    def clear(self) -> None:
        self.last = None


def explain(error: KafkaError, conf: Mapping[str, object]) -> str:
    """The failure as an operator reads it: what was refused, with which settings (no secret)."""
    text = error.str()
    if error.code() == KafkaError._SSL:
        if "certificate verify failed" in text:
            return (
                "TLS handshake failed: the broker's certificate is not signed by a CA the client trusts "
                "(check ssl.ca.location)"
            )
        if "alert" in text or "certificate required" in text:
            return (
                "TLS handshake failed: the broker refused the client's certificate "
                "(check ssl.certificate.location and ssl.key.location)"
            )
        return "TLS handshake failed (check security.protocol and the ssl.* settings)"
    mechanism = str(conf.get("sasl.mechanism") or conf.get("sasl.mechanisms") or "GSSAPI")
    user = conf.get("sasl.username")
    who = f" of user '{user}'" if user else ""
    return (
        f"authentication failed: the broker refused the SASL {mechanism} login{who} "
        f"(check sasl.username and sasl.password)"
    )


class DropConnectionFailureLogs(logging.Filter):
    """Keeps librdkafka's connection-failure lines out of the output: the error raised says it once.

    librdkafka logs every failed attempt to reach a broker (its FAIL facility:
    a refused connection, a failed TLS or SASL handshake) and retries by
    itself; a client that cannot reach its cluster logged dozens of them
    before the one-line error that names the cluster and what went wrong.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not message.startswith("FAIL ") and not any(marker in message for marker in _LOGGED_AS_ERROR)

"""Keeping secrets out of everything the pipeline prints (R-CFG-5).

Two defences: `redact` for structured settings (the key tells us the value is a
secret), and `scrub` for free text we did not write, such as a librdkafka error
that may quote a JAAS line back at us.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

REDACTED = "***"

# Named explicitly because their names do not contain a telltale word.
_SECRET_KEYS = frozenset({"ssl_key", "sasl.oauthbearer.config"})
_SECRET_WORDS = ("password", "passphrase", "secret", "jaas")
_SECRET_SUFFIXES = (".key.pem", "private.key", "user.info")


def is_secret_key(key: str) -> bool:
    """True when the value of client/Spark property `key` must never be shown."""
    k = key.lower()
    return (
        k in _SECRET_KEYS
        or any(word in k for word in _SECRET_WORDS)
        or k.endswith(_SECRET_SUFFIXES)
    )


def redact(props: Mapping[str, Any]) -> dict:
    """A copy of `props` with every secret value replaced by `REDACTED`."""
    out: dict = {}
    for key, value in props.items():
        if is_secret_key(str(key)):
            out[key] = REDACTED
        elif isinstance(value, Mapping):
            out[key] = redact(value)
        else:
            out[key] = value
    return out


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of any of `secrets` replaced by `REDACTED`.

    Longest first, so that a secret containing another one (a JAAS line and the
    password inside it) is hidden whole rather than leaving its remainder.
    Even one-character secrets are replaced: a garbled message beats a leak.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text

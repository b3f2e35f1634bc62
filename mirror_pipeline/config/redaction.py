"""Keeping secrets out of everything the pipeline prints (R-CFG-5).

Two defences: `redact` for structured settings (the key tells us the value is a
secret), and `scrub` for free text we did not write, such as a librdkafka error
that may quote a JAAS line back at us. `secret_leaves` finds the values to
scrub in a parsed configuration, wherever a secret key sits.
"""

from __future__ import annotations

import re
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


def scrub_words(text: str, values: Iterable[str]) -> str:
    """`text` with every occurrence of any of `values` that stands as a word of its own
    (not inside a longer run of letters and digits) replaced by `REDACTED`.

    For values that are probably not secret but came from outside the file (the
    environment): hidden wherever a message quotes them, while a short one such
    as a port `9` does not garble every number of the message.
    """
    for value in sorted({v for v in values if v}, key=len, reverse=True):
        text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(value)}(?![A-Za-z0-9])", REDACTED, text)
    return text


def secret_leaves(data: Any, max_depth: int = 64, max_nodes: int = 200_000) -> list[str]:
    """The text of every string or number held under a secret key of `data` (a parsed
    configuration), down to `max_depth` levels and over at most `max_nodes` values."""
    found: list[str] = []
    stack: list[tuple[Any, bool, int]] = [(data, False, 1)]
    nodes = 0
    while stack and nodes < max_nodes:
        item, secret, depth = stack.pop()
        nodes += 1
        if depth > max_depth:
            continue
        if isinstance(item, Mapping):
            stack.extend((value, secret or (isinstance(key, str) and is_secret_key(key)), depth + 1)
                         for key, value in item.items())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend((value, secret, depth + 1) for value in item)
        elif secret and isinstance(item, (str, int, float)) and not isinstance(item, bool):
            found.append(item if isinstance(item, str) else repr(item) if isinstance(item, float) else
                         str(item) if abs(item) < 10**100 else "")
    return [text for text in dict.fromkeys(found) if text]

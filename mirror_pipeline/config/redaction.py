"""Keeping secrets out of everything the pipeline prints (R-CFG-5).

Two defences: `redact` for structured settings (the key tells us the value is a
secret), and `scrub` for free text we did not write, such as a librdkafka error
that may quote a JAAS line back at us. `config.secret_use` finds the values to
scrub in a parsed configuration, wherever a secret key sits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "***"

# Named explicitly because their names do not contain a telltale word.
_SECRET_KEYS = frozenset({"ssl_key", "sasl.oauthbearer.config"})
_SECRET_WORDS = ("password", "passphrase", "secret", "jaas")
_SECRET_SUFFIXES = (".key.pem", "private.key", "user.info")
# Shorter secrets are scrubbed only where they stand quoted or assigned (see `scrub`).
SHORT_SECRET = 4
# A letter or digit of any script (`\w` without `_`).
_ALNUM = r"[^\W_]"


def is_secret_key(key: str) -> bool:
    """True when the value of client/Spark property `key` must never be shown."""
    k = key.lower()
    return k in _SECRET_KEYS or any(word in k for word in _SECRET_WORDS) or k.endswith(_SECRET_SUFFIXES)


def redact(props: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `props` with every secret value replaced by `REDACTED`."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if is_secret_key(str(key)):
            out[key] = REDACTED
        elif isinstance(value, Mapping):
            out[key] = redact(value)
        else:
            out[key] = value
    return out


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of any of `secrets` that stands as a token of its own
    replaced by `REDACTED`.

    A token of its own: not glued to a letter or digit on a side where the secret
    itself begins or ends with one, so that a secret `park` is hidden in
    `password=park;` but leaves the word `spark` whole. Longest first, so that a
    secret containing another one (a JAAS line and the password inside it) is
    hidden whole rather than leaving its remainder.

    A secret shorter than `SHORT_SECRET` characters is hidden only where a value
    stands quoted whole (`'a'`, `"a"`: how messages quote a value) or after `=`
    (a JAAS line, a property listing): anywhere else such a string is most
    likely an ordinary word (`a`, `to`) that replacing would garble
    (`expected *** single v***lue`), and a secret that short falls to the first
    few thousand guesses anyway.
    """
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = re.sub(_secret_pattern(secret), REDACTED, text)
    return text


def _secret_pattern(secret: str) -> str:
    core = re.escape(secret)
    left = rf"(?<!{_ALNUM})" if re.match(_ALNUM, secret[0]) else ""
    right = rf"(?!{_ALNUM})" if re.match(_ALNUM, secret[-1]) else ""
    if len(secret) >= SHORT_SECRET:
        return left + core + right
    return rf"(?<='){core}(?=')|(?<=\"){core}(?=\")|(?<==){core}{right}"


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

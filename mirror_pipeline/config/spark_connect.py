"""Spark Connect URLs (`spark.remote`): their shape, and the token some of them carry.

`sc://host:port/;token=...;use_ssl=true` authenticates with its `token`, a
credential like a password: it is kept out of everything the pipeline shows
(R-CFG-5).
"""

from __future__ import annotations

import re

from mirror_pipeline.config.redaction import REDACTED

_URL = re.compile(r"sc://[^/:;\s]+(:\d{1,5})?/?(;\S*)?")
_TOKEN = re.compile(r"(?i)(;token=)([^;]*)")


def check_connect_url(url: str | None) -> str | None:
    """`url` when it is a Spark Connect URL (or None); a ValueError that never quotes it otherwise."""
    if url is not None and not _URL.fullmatch(url):
        raise ValueError("must be a Spark Connect URL: sc://host:port, optionally followed by /;name=value...")
    return url


def connect_url_token(url: str) -> str | None:
    """The token a Spark Connect URL carries, if any."""
    match = _TOKEN.search(url)
    return match.group(2) if match and match.group(2) else None


def redact_connect_url(url: str) -> str:
    """A Spark Connect URL with its token replaced by `REDACTED`."""
    return _TOKEN.sub(lambda m: m.group(1) + REDACTED if m.group(2) else m.group(0), url)

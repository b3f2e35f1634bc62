"""What a user types, checked before a command runs, and shown safely in messages.

A bad name or number is refused by click as a usage error (exit code 2) whose
message names the argument and says what is allowed; nothing has run yet.
Whatever a message echoes is escaped: a control character in a name shows as
`\\x07`, never raw.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import click

from mirror_pipeline.model.text import printable as model_printable

# Kafka's rule for topic names (org.apache.kafka.common.internals.Topic.validate).
TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]")
MAX_TOPIC_LENGTH = 249
MAX_PARTITION = 2**31 - 1  # a Java int
MAX_OFFSET = 2**63 - 1  # a Java long
MAX_TIMEOUT_S = 7 * 24 * 3600  # one week
SHOWN_CHARS = 80  # longer values are cut in messages


def printable(text: str, keep: str = "\n") -> str:
    """`text` escaped for a message; newlines kept unless `keep` says otherwise (multi-line messages exist)."""
    return model_printable(text, keep)


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`value` quoted for a message: non-printables escaped, a long value cut and its length said."""
    text = str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit] + '...'!r} ({len(text)} characters)"


class SafePath(click.Path):
    """click's Path, refusing a NUL or a character the file system cannot encode as a usage
    error (click's own check would end in ValueError or UnicodeEncodeError)."""

    def convert(self, value, param, ctx):
        text = str(value)
        try:
            os.fsencode(text)
        except UnicodeEncodeError:
            self.fail(f"{shown(text)} holds a character no file name can hold", param, ctx)
        if "\x00" in text:
            self.fail(f"{shown(text)} holds a NUL character, which no file name can hold", param, ctx)
        return super().convert(value, param, ctx)


class KafkaName(click.ParamType):
    """A topic name (Kafka's rule), or a link name (the config file's rule: the same characters, any length)."""

    name = "name"

    def __init__(self, what: str, max_length: int | None = MAX_TOPIC_LENGTH, dots_allowed: bool = False):
        self.what, self.max_length, self.dots_allowed = what, max_length, dots_allowed

    @property
    def rule(self) -> str:
        size = f"1 to {self.max_length}" if self.max_length else "1 or more"
        dots = "" if self.dots_allowed else ", other than '.' and '..'"
        return f"a {self.what} is {size} of the characters a-z A-Z 0-9 . _ -{dots}"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return value
        bad = sorted({c for c in value if not TOPIC_CHARS.fullmatch(c)})
        if not value:
            problem = "an empty name"
        elif bad:
            problem = f"{shown(value)} contains {', '.join(repr(c) for c in bad[:5])}"
        elif self.max_length and len(value) > self.max_length:
            problem = f"{shown(value, 40)} is too long"
        elif value in (".", "..") and not self.dots_allowed:
            problem = f"{shown(value)} is not allowed"
        else:
            return value
        self.fail(f"{problem}: {self.rule}", param, ctx)


class GroupName(click.ParamType):
    """A consumer group: Kafka takes any non-empty string (echoed escaped)."""

    name = "group"

    def convert(self, value, param, ctx):
        if value == "":
            self.fail("an empty name: a consumer group name has at least one character", param, ctx)
        return value


class WholeNumber(click.ParamType):
    """An integer from `low` to `high`, both included."""

    name = "integer"

    def __init__(self, low: int, high: int):
        self.low, self.high = low, high

    def convert(self, value, param, ctx):
        allowed = f"give a whole number from {self.low} to {self.high}"
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            text = str(value).strip()
            if not re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII):
                self.fail(f"{shown(value, 40)} is not a whole number; {allowed}", param, ctx)
            if len(text) > 100:  # no need to parse it (and Python refuses over 4300 digits)
                self.fail(f"{shown(value, 40)} is out of range; {allowed}", param, ctx)
            number = int(text)
        if not self.low <= number <= self.high:
            self.fail(f"{number} is out of range; {allowed}", param, ctx)
        return number


class Seconds(click.ParamType):
    """A finite number of seconds from `low` to `high` (nan, inf and negatives are refused)."""

    name = "seconds"

    def __init__(self, low: float = 1, high: float = MAX_TIMEOUT_S):
        self.low, self.high = low, high

    def convert(self, value, param, ctx):
        allowed = f"give a number of seconds from {self.low:g} to {self.high:g}"
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{shown(value, 40)} is not a number; {allowed}", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{shown(value, 40)} is not a finite number; {allowed}", param, ctx)
        if not self.low <= number <= self.high:
            self.fail(f"{number:g} is out of range; {allowed}", param, ctx)
        return number


def writable_file(ctx, param, value):
    """Option callback: a file to be written must have an existing, writable folder (checked before anything runs)."""
    if value is None:
        return value
    folder = Path(value).parent
    if not folder.is_dir():
        raise click.BadParameter(
            f"the folder {shown(str(folder))} does not exist; create it, or give a path in an existing folder",
            ctx,
            param,
        )
    if not Path(value).exists() and not os.access(folder, os.W_OK):
        raise click.BadParameter(
            f"the folder {shown(str(folder))} is not writable; give a path in a folder you can write to", ctx, param
        )
    return value


class NamePattern(click.ParamType):
    """A name (`orders`), a prefix (`pay.*`) or every name (`*`), the name checked by `inner`."""

    name = "pattern"

    def __init__(self, inner: click.ParamType):
        self.inner = inner

    def convert(self, value, param, ctx):
        if not isinstance(value, str) or value == "*":
            return value
        name = value[:-1] if value.endswith("*") else value
        return self.inner.convert(name, param, ctx) + ("*" if value.endswith("*") else "")


TOPIC = KafkaName("topic name")
LINK = KafkaName("link name", max_length=None, dots_allowed=True)
GROUP = GroupName()
PARTITION = WholeNumber(0, MAX_PARTITION)
OFFSET = WholeNumber(0, MAX_OFFSET)

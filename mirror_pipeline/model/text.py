"""Text as a message shows it: one line, no raw control character."""

from __future__ import annotations


def printable(text: str, keep: str = "") -> str:
    """`text` with every non-printable character but those in `keep` escaped as `repr` does (`\\x1b`)."""
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def first_few(texts: list[str], sep: str, shown: int = 5) -> tuple[str, int]:
    """The first `shown` texts joined by `sep`, and how many were left out: a line a person reads
    names a few of thousands and counts the rest."""
    return sep.join(texts[:shown]), max(0, len(texts) - shown)

"""Text as a message shows it: one line, no raw control character."""

from __future__ import annotations


def printable(text: str, keep: str = "") -> str:
    """`text` with every non-printable character but those in `keep` escaped as `repr` does (`\\x1b`)."""
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def first_few(texts: list[str], sep: str, shown: int = 5) -> tuple[str, int]:
    """The first `shown` texts joined by `sep`, and how many were left out: a line a person reads
    names a few of thousands and counts the rest."""
    return sep.join(texts[:shown]), max(0, len(texts) - shown)


# Names a message lists in full; past this it names the first ones and counts the rest.
NAMES_SHOWN = 10


def some_of(names: list[str], none: str = "none", shown: int = NAMES_SHOWN) -> str:
    """`names` joined by ", ", or the first `shown` of them and how many more (a wide link's 1,000
    mirrors in a refusal would bury it); `none` when there are none."""
    said, more = first_few(names, ", ", shown)
    return (said + (f" and {more:,} more" if more else "")) or none

"""The shell commands the documentation shows, read as a reader reads them: fenced blocks, in page order.

A ```sh block holds commands a reader can type, one a line (a `\\` at a
line's end continues it; `#` starts a comment). An HTML comment on the line
just before the fence says how a test treats the block:

- `<!-- runbook: skip (why) -->`: not run against the clusters (it serves
  until stopped, starts daemons, or is another tool's command); its
  `mirror-pipeline` lines are still checked against the command tree;
- `<!-- runbook: exit N (why) -->`: every command of the block must exit
  with N (a refusal the page shows on purpose).

Placeholders are `<name>` words from `PLACEHOLDERS`; a test fills them from
its own link. Other fenced blocks (```text synopses, ```yaml) are kept with
their language so that synopsis lines can be checked too.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The pages a reader follows: the README and everything under docs/ (benchmarks/README.md
# documents scripts, not the CLI).
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
RUNBOOKS = sorted((REPO / "docs" / "runbooks").glob("*.md"))
PROGRAM = "mirror-pipeline"
# What each placeholder stands for; a test fills every one.
PLACEHOLDERS = {
    "link": "the link's name",
    "reverse-link": "the link declared the other way",
    "topic": "the mirror topic (the source topic for `mirror create`)",
    "group": "a consumer group",
}
PLACEHOLDER = re.compile(r"<([a-z][a-z-]*)>")
_FENCE = re.compile(r"^```(\S*)\s*$")
_MARKER = re.compile(r"^<!--\s*runbook:\s*(.*?)\s*-->$")
_MARKER_VALUE = re.compile(r"^(skip|exit (\d+))\s+\((.+)\)$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    lines: tuple[str, ...]
    skip: str = ""  # why the block is not run, when it is not
    exit_code: int = 0

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    def commands(self) -> list[list[str]]:
        """The block's commands as argument lists (continuations joined, comments dropped)."""
        out, pending = [], ""
        for raw in self.lines:
            text = pending + raw.strip()
            if text.endswith("\\"):
                pending = text[:-1] + " "
                continue
            pending = ""
            words = shlex.split(text, comments=True)
            if words:
                out.append(words)
        return out


def blocks(page: Path) -> list[Block]:
    """Every fenced block of `page`, in order; a marker that says nothing known is an error."""
    found, lines = [], page.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        start, body = i, []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        skip, exit_code = "", 0
        before = lines[start - 1].strip() if start > 0 else ""
        marker = _MARKER.match(before)
        if marker:
            value = _MARKER_VALUE.match(marker.group(1))
            if not value:
                raise ValueError(
                    f"{page.relative_to(REPO)}:{start}: runbook marker {marker.group(1)!r} is neither "
                    "'skip (why)' nor 'exit N (why)'"
                )
            if value.group(1) == "skip":
                skip = value.group(3)
            else:
                exit_code = int(value.group(2))
        found.append(Block(page, start + 1, fence.group(1), tuple(body), skip, exit_code))
        i += 1
    return found


def program_args(words: list[str]) -> list[str] | None:
    """The arguments after `mirror-pipeline` (or a path ending in it); None for another program."""
    if words and Path(words[0]).name == PROGRAM:
        return words[1:]
    return None


def fill(words: list[str], values: dict[str, str]) -> list[str]:
    """`words` with each `<name>` replaced by `values[name]`; an unknown name is a KeyError naming it."""

    def one(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"placeholder <{name}> has no value (known: {', '.join(sorted(values))})")
        return values[name]

    return [PLACEHOLDER.sub(one, w) for w in words]

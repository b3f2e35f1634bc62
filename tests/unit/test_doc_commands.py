"""Every command the README and docs/ show is one the CLI accepts, and every page is reachable (no Kafka).

Each `mirror-pipeline` line of a ```sh block is parsed by the real command
tree (`mirror_pipeline.cli.cli`), placeholders filled with legal names, so a
renamed command or flag, a missing required option or a value out of range
fails here first; the runbooks' blocks also run against real clusters in
`tests/integration/test_runbooks.py`. Synopsis lines (```text) name their
flags with placeholders of their own, so only the command path and the flag
names are checked there. Lines of other programs may only stand in a block
marked skip. Relative links must name a file that exists and, with `#`, a
heading on it.
"""

from __future__ import annotations

import re

import click
import pytest

from mirror_pipeline.cli import cli
from tests.doc_blocks import PAGES, PLACEHOLDERS, REPO, RUNBOOKS, blocks, fill, program_args

# Legal stand-ins for the placeholders: link names, topics and groups pass the CLI's own value checks.
DUMMIES = {"link": "west-to-east", "reverse-link": "east-to-west", "topic": "orders", "group": "billing"}
SH_BLOCKS = [b for page in PAGES for b in blocks(page) if b.language == "sh"]
SYNOPSIS_BLOCKS = [b for page in PAGES for b in blocks(page) if b.language == "text"]


def resolve(args: list[str]) -> tuple[click.Command, click.Context, list[str]]:
    """The command `args` name (groups walked by name), its parent context and the arguments left for it."""
    command, ctx, rest = cli, click.Context(cli, info_name="mirror-pipeline"), list(args)
    while isinstance(command, click.Group):
        while rest and rest[0] in ("--debug",):  # the root's own flags come before the command
            rest.pop(0)
        if not rest:
            raise click.UsageError(f"'{ctx.command_path}' needs a command: {', '.join(command.list_commands(ctx))}")
        name = rest.pop(0)
        sub = command.get_command(ctx, name)
        if sub is None:
            raise click.UsageError(f"no command '{name}' under '{ctx.command_path}'")
        ctx, command = click.Context(sub, info_name=name, parent=ctx), sub
    return command, ctx.parent, rest


def parse(args: list[str]) -> None:
    """Parse `args` as the CLI would, values converted and checked, without running the command."""
    command, parent, rest = resolve(args)
    command.make_context(command.name, rest, parent=parent)


def option_names(command: click.Command) -> set[str]:
    return {name for p in command.params if isinstance(p, click.Option) for name in (*p.opts, *p.secondary_opts)} | {
        "--help",
        "-h",
    }


@pytest.mark.parametrize("block", SH_BLOCKS, ids=lambda b: b.where)
def test_every_sh_command_parses_with_the_cli(block):
    for words in block.commands():
        args = program_args(words)
        if args is None:
            assert block.skip, (
                f"{block.where}: `{' '.join(words)}` is not a mirror-pipeline command; a block "
                "of other programs needs <!-- runbook: skip (why) --> before it"
            )
            continue
        try:
            parse(fill(args, DUMMIES))
        except (click.UsageError, click.BadParameter) as exc:
            pytest.fail(f"{block.where}: `{' '.join(words)}`: {exc.format_message()}")


def synopsis_flags(args: list[str]) -> tuple[list[list[str]], list[str]]:
    """The command paths a synopsis line names (`pause|resume` is two) and the flags it shows for them."""
    words = [w.strip("[]") for w in args]
    words = [w for w in words if w]
    paths, command, i = [[]], cli, 0
    while isinstance(command, click.Group) and i < len(words):
        names = words[i].split("|")
        paths = [p + [n] for p in paths for n in names]
        command = command.get_command(click.Context(command), names[0])
        if command is None:
            break
        i += 1
    flags = []
    for j, word in enumerate(words[i:], start=i):
        nxt = words[j + 1] if j + 1 < len(words) else ""
        if word == "|" and nxt and not nxt.startswith("-"):
            break  # `| status | down`: sibling commands, named without their flags
        if word.startswith("--"):
            flags.append(word.split("=")[0])
    return paths, flags


@pytest.mark.parametrize("block", SYNOPSIS_BLOCKS, ids=lambda b: b.where)
def test_every_synopsis_names_real_commands_and_flags(block):
    for line in block.lines:  # not shell: split on spaces, a `#` ends the line
        words = line.split("#")[0].split()
        args = program_args(words)
        if args is None:
            continue
        paths, flags = synopsis_flags(args)
        for path in paths:
            try:
                command, _, _ = resolve(path)
            except click.UsageError as exc:
                pytest.fail(f"{block.where}: `{' '.join(words)}`: {exc.format_message()}")
            unknown = [f for f in flags if f not in option_names(command)]
            assert not unknown, f"{block.where}: `mirror-pipeline {' '.join(path)}` has no option {', '.join(unknown)}"


def test_placeholders_are_the_ones_tests_can_fill():
    assert set(DUMMIES) == set(PLACEHOLDERS)
    for block in SH_BLOCKS:
        for words in block.commands():
            if program_args(words) is not None:
                fill(words, DUMMIES)  # KeyError names an unknown placeholder


def test_each_runbook_has_commands_to_run():
    assert RUNBOOKS, "docs/runbooks/ has no pages"
    for page in RUNBOOKS:
        runnable = [b for b in blocks(page) if b.language == "sh" and not b.skip]
        assert runnable, f"{page.relative_to(REPO)}: a runbook with no command the test runs"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces as dashes."""
    out = set()
    for line in page.read_text().splitlines():
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            out.add(text.replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_reach_a_file_and_heading(page):
    in_code = False
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        for target in _LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # another site
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)}:{number}"
            assert linked.exists(), f"{where}: {target} names no file"
            if anchor and linked.suffix == ".md":
                assert anchor in _anchors(linked), f"{where}: {target}: no heading '{anchor}' on {linked.name}"


def test_every_docs_page_is_linked_from_the_readme():
    readme = (REPO / "README.md").read_text()
    for page in PAGES:
        if page.name != "README.md" or page.parent != REPO:
            relative = str(page.relative_to(REPO))
            assert f"]({relative})" in readme or f"]({relative}#" in readme, f"README.md does not link {relative}"

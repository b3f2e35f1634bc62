"""Reading the configuration file: a small regular file, parsed as plain YAML (R-CFG-1, R-CFG-4).

What the file may be, checked before a byte of it is parsed:

- a regular file (never a FIFO, a device such as /dev/zero, a socket or a
  directory), of at most `MAX_FILE_BYTES`, in UTF-8;
- YAML nested at most `MAX_DEPTH` levels (deeper nesting would exhaust the
  parser's stack), of at most `MAX_NODES` values, where an alias counts as
  every value it stands for: anchors and aliases (`<<: *common`) stay usable,
  but an alias bomb is refused as soon as the values it stands for (counted,
  never expanded) pass the limit, instead of being expanded later into
  gigabytes; an alias to a node that contains it is refused outright.

Every problem is one `ConfigError` naming the file and, for YAML, the line and
column; PyYAML's own message is never shown, as it quotes the offending line,
which may be `sasl.password: ...`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

import yaml

from mirror_pipeline.model.errors import ConfigError

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32
MAX_NODES = 100_000
_SURROGATE = re.compile("[\ud800-\udfff]")
# A number written with more digits than this stays the text it was written as.
_MAX_NUMBER_CHARS = 100

_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_config_text(path: Path, name: str, not_found_hint: str = "") -> str:
    """The text of the configuration file at `path`; `name` starts every error."""
    try:
        before = os.stat(path)
        _check_file(before, name)
        # Non-blocking: should the path be swapped for a FIFO after the check, open does not hang.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ConfigError(f"{name}: configuration file not found{not_found_hint}") from None
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        _check_file(info, name)
        if (info.st_dev, info.st_ino) != (before.st_dev, before.st_ino):
            raise ConfigError(f"{name}: changed while it was being read; try again")
        chunks, size = [], 0
        while size <= MAX_FILE_BYTES and (chunk := os.read(fd, MAX_FILE_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > MAX_FILE_BYTES:
        raise ConfigError(
            f"{name}: grew past {MAX_FILE_BYTES} bytes while it was being read; "
            f"a configuration file may be at most {MAX_FILE_BYTES} bytes (1 MiB)"
        )
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: is not UTF-8 text; a configuration file must be UTF-8") from None
    # Universal newlines, as text-mode reading gives.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _check_file(info: os.stat_result, name: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{name}: is a directory, not a configuration file")
    if not stat.S_ISREG(info.st_mode):
        kind = next((what for test, what in _FILE_KINDS if test(info.st_mode)), "not a regular file")
        raise ConfigError(f"{name}: is {kind}, not a configuration file; it must be a regular file")
    if info.st_size > MAX_FILE_BYTES:
        raise ConfigError(
            f"{name}: is {info.st_size} bytes; a configuration file may be at most {MAX_FILE_BYTES} bytes (1 MiB)"
        )


class _Loader(yaml.SafeLoader):
    """YAML as a config author means it, within the limits above.

    Only true/false are booleans (`on`/`yes` stay strings), numbers keep the
    text they were written with unless it reads back identically (a password
    `0123` must not become 83), and a repeated key is an error rather than a
    silent override.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._deepest = 0
        self._nodes = 0
        # anchor -> (values it stands for, levels it spans); `_open`: anchors still being composed.
        self._anchored: dict[str, tuple[int, int]] = {}
        self._open: set[str] = set()

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        # types-PyYAML leaves Parser.peek_event unannotated; it returns the next event.
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"alias '{_short(event.anchor)}' refers to a node that contains it; "
                    "an alias may only repeat a complete node",
                    # types-PyYAML types an event's mark as either Mark class, the error's as the pure one only.
                    event.start_mark,  # type: ignore[arg-type]
                )
            nodes, height = self._anchored.get(event.anchor, (1, 1)) if event.anchor is not None else (1, 1)
            self._grow(nodes, self._depth + height, event.start_mark)
            return super().compose_node(parent, index)
        self._depth += 1
        self._grow(1, self._depth, event.start_mark)
        first, outer_deepest, self._deepest = self._nodes, self._deepest, self._depth
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open.add(anchor)
        node = super().compose_node(parent, index)
        if anchor is not None:
            self._open.discard(anchor)
            self._anchored[anchor] = (self._nodes - first + 1, self._deepest - self._depth + 1)
        self._deepest = max(outer_deepest, self._deepest)
        self._depth -= 1
        return node

    def _grow(self, nodes: int, depth: int, mark: Any) -> None:
        self._nodes += nodes
        self._deepest = max(self._deepest, depth)
        if depth > MAX_DEPTH:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"nested more than {MAX_DEPTH} levels deep (aliases included); a configuration needs far fewer",
                mark,
            )
        if self._nodes > MAX_NODES:
            raise yaml.composer.ComposerError(
                None,
                None,
                f"more than {MAX_NODES} values, counting every alias as the values it "
                "repeats; a configuration needs far fewer (an alias bomb?)",
                mark,
            )

    def construct_scalar(self, node: yaml.ScalarNode | yaml.MappingNode) -> str:
        value = super().construct_scalar(node)
        if _SURROGATE.search(value):
            # `"\\ud83d\\ude00"` (JSON-style escapes of one character) reads as two halves: join them.
            try:
                value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
            except UnicodeDecodeError:
                pass  # a lone half stays, and is refused with its key (`shape_problem`)
        return value

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{_short(key_node.value)}'", key_node.start_mark
                )
            seen.add(key_node.value)
        return super().construct_mapping(node, deep)


def _short(text: str) -> str:
    return text if len(text) <= 60 else f"{text[:57]}..."


def _bool_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    text = node.value
    return text.lower() == "true" if text.lower() in ("true", "false") else text


def _number_or_text(construct: Callable[[yaml.SafeLoader, yaml.ScalarNode], Any]) -> Callable[..., Any]:
    def build(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        if len(node.value) > _MAX_NUMBER_CHARS:
            return node.value
        try:
            value = construct(loader, node)
        except (ValueError, OverflowError):
            return node.value
        return value if str(value) == node.value else node.value

    return build


_Loader.add_constructor("tag:yaml.org,2002:bool", _bool_or_text)
_Loader.add_constructor("tag:yaml.org,2002:int", _number_or_text(yaml.SafeLoader.construct_yaml_int))
_Loader.add_constructor("tag:yaml.org,2002:float", _number_or_text(yaml.SafeLoader.construct_yaml_float))


def _timestamp_as_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    # SafeLoader's own construct_scalar, as registered before: not _Loader's override.
    return yaml.SafeLoader.construct_scalar(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)


def parse_yaml(text: str, name: str) -> Any:
    """The one document in `text`, or a `ConfigError` naming the problem and its position."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(f"{name}: {at}invalid YAML: {exc.problem or 'cannot be parsed'}") from None
    except yaml.YAMLError:
        raise ConfigError(f"{name}: invalid YAML") from None


def shape_problem(value: Any) -> str | None:
    """Why already-parsed data cannot be a configuration (`<key path>: <reason>`), or None.

    Too deep or too big: for data that did not come through `parse_yaml` (JSON
    strings in settings, callers of `parse_config`), shared or cyclic references
    count every time they are reached, so they meet the same limits as aliases.
    Not text: a string (key or value) holding a lone surrogate, which YAML and
    JSON `\\uD800`-style escapes can produce and which no client can encode.
    """
    stack: list[tuple[Any, int, str]] = [(value, 1, "")]
    nodes = 0
    while stack:
        item, depth, path = stack.pop()
        nodes += 1
        where = f"{path}: " if path else ""
        if depth > MAX_DEPTH:
            return f"{where}nested more than {MAX_DEPTH} levels deep; a configuration needs far fewer"
        if nodes > MAX_NODES:
            return f"more than {MAX_NODES} values; a configuration needs far fewer"
        if isinstance(item, str) and _SURROGATE.search(item):
            return (
                f"{where}a string holds an escaped lone surrogate (\\uD800 to \\uDFFF), which is "
                "not text; allowed: any Unicode character (beyond U+FFFF as \\U0001F600 or a pair)"
            )
        if isinstance(item, dict):
            for key, part in item.items():
                if isinstance(key, int) and abs(key) >= 10**_MAX_NUMBER_CHARS:
                    return f"{where}a key is a number of more than {_MAX_NUMBER_CHARS} digits; allowed: names"
                if isinstance(key, str) and _SURROGATE.search(key):
                    return (
                        f"{where}a key holds an escaped lone surrogate (\\uD800 to \\uDFFF), which "
                        "is not text; allowed: any Unicode character (beyond U+FFFF as \\U0001F600 or a pair)"
                    )
                stack.append((part, depth + 1, _join(path, key)))
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend((part, depth + 1, f"{path}[{i}]") for i, part in enumerate(item))
    return None


def _join(path: str, key: Any) -> str:
    text = key if isinstance(key, str) and len(key) <= 100 else "<key>"
    text = text if text.isprintable() else repr(text)[1:-1]
    return f"{path}.{text}" if path else text

"""Cluster-Linking style name filters for topics and consumer groups (R-AC-1).

A name is selected when some INCLUDE filter matches it and no EXCLUDE filter
does, so filter order never matters and an empty filter set selects nothing.
The input format is Cluster Linking's, so operators can paste their existing
`auto.create.mirror.topics.filters` / `consumer.offset.group.filters` values.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from mirror_pipeline.config.safe_yaml import shape_problem
from mirror_pipeline.model.errors import ConfigError

WILDCARD = "*"


class PatternType(StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class FilterType(StrEnum):
    INCLUDE = "INCLUDE"
    EXCLUDE = "EXCLUDE"


@dataclass(frozen=True)
class NameFilter:
    name: str
    pattern_type: PatternType
    filter_type: FilterType = FilterType.INCLUDE

    def matches(self, name: str) -> bool:
        if self.name == WILDCARD:
            return True
        if self.pattern_type is PatternType.PREFIXED:
            return name.startswith(self.name)
        return name == self.name

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "patternType": self.pattern_type.value,
            "filterType": self.filter_type.value,
        }


class Selecting(Protocol):
    """A filter of a list: topic, group (`NameFilter`) or ACL (`acl_filters.AclFilter`)."""

    @property
    def filter_type(self) -> FilterType: ...
    def matches(self, item: Any) -> bool: ...


def include_exclude(filters: Iterable[Selecting], item: Any) -> bool:
    """The one selection rule of every filter list: some INCLUDE matches and no EXCLUDE does, in any order."""
    included = False
    for f in filters:
        if f.matches(item):
            if f.filter_type is FilterType.EXCLUDE:
                return False
            included = True
    return included


@dataclass(frozen=True)
class NameFilters:
    filters: tuple[NameFilter, ...] = ()

    def __post_init__(self) -> None:
        # Accept any iterable (a list is the natural thing to write) but stay hashable.
        object.__setattr__(self, "filters", tuple(self.filters))

    @property
    def is_empty(self) -> bool:
        return not self.filters

    def selects(self, name: str) -> bool:
        return include_exclude(self.filters, name)

    def to_json(self, list_key: str = "topicFilters") -> dict[str, Any]:
        """The Cluster-Linking shape, e.g. `{"topicFilters": [{...}]}` (JSON-able)."""
        return {list_key: [f.to_json() for f in self.filters]}

    @classmethod
    def parse(cls, value: Any, *, list_key: str = "topicFilters", where: str) -> NameFilters:
        """Filters from a JSON string, the same structure parsed from YAML, or None.

        `where` (file and key path) starts the message of the `ConfigError`
        raised for malformed input.
        """
        try:
            return cls(tuple(_parse_items(value, list_key)))
        except _Invalid as exc:
            raise ConfigError(f"{where}: {exc}") from None


class _Invalid(ValueError):
    """What is wrong, without where: `NameFilters.parse` adds the location."""


_ITEM_KEYS = ("name", "patternType", "filterType")


def kind_of(value: Any) -> str:
    """A value's type in the words of a config file, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def show_key(key: Any) -> str:
    """A key for a message: quoted whole when short, else by its length (never cut: see `scrub`)."""
    text = str(key) if isinstance(key, (str, int, float, bool)) or key is None else kind_of(key)
    if len(text) > 100:
        return f"of {len(text)} characters"
    # Control characters escaped, so that a message stays one line.
    return "'" + (text if text.isprintable() else repr(text)[1:-1]) + "'"


def unknown_key_hint(key: Any, known: Any) -> str:
    """`unknown key 'x'` plus the closest known key, if one is close."""
    text = str(key) if isinstance(key, str) else ""
    close = difflib.get_close_matches(text, list(known), n=1) if 0 < len(text) <= 100 else []
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"unknown key {show_key(key)}{hint}"


def parse_json(text: str) -> Any:
    """JSON from a setting's string; a ValueError whose message quotes none of the input."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        # exc.msg carries no input text, only the problem and position.
        raise ValueError(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ValueError("malformed JSON: nested far too deeply") from None
    except ValueError:
        raise ValueError("malformed JSON: a number has too many digits") from None
    problem = shape_problem(value)
    if problem:
        raise ValueError(f"in the JSON, {problem}")
    return value


def _parse_items(value: Any, list_key: str) -> Iterator[NameFilter]:
    if isinstance(value, NameFilters):
        yield from value.filters
        return
    if value is None:
        return
    if isinstance(value, str):
        if not value.strip():
            return
        try:
            value = parse_json(value)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None
    if not isinstance(value, dict):
        raise _Invalid(f"expected a mapping with key '{list_key}' (or the same as a JSON string), got {kind_of(value)}")
    for key in value:
        if key != list_key:
            raise _Invalid(unknown_key_hint(key, [list_key]) + f"; expected only '{list_key}'")
    items = value.get(list_key)
    if items is None:
        return
    if not isinstance(items, list):
        raise _Invalid(f"{list_key}: expected a list of filters, got {kind_of(items)}")
    for i, item in enumerate(items):
        yield _parse_item(item, f"{list_key}[{i}]")


def _parse_item(item: Any, at: str) -> NameFilter:
    if not isinstance(item, dict):
        raise _Invalid(f"{at}: expected a mapping with name, patternType and filterType, got {kind_of(item)}")
    for key in item:
        if key not in _ITEM_KEYS:
            raise _Invalid(f"{at}: {unknown_key_hint(key, _ITEM_KEYS)}")
    name = item.get("name")
    if name is None:
        raise _Invalid(f"{at}: name is required")
    if not isinstance(name, str) or not name:
        raise _Invalid(f"{at}.name: expected a non-empty string, got {kind_of(name)}")
    if item.get("patternType") is None:
        raise _Invalid(f"{at}: patternType is required (LITERAL or PREFIXED)")
    pattern = _enum(PatternType, item["patternType"], f"{at}.patternType", "pattern type")
    filter_type = FilterType.INCLUDE
    if item.get("filterType") is not None:
        filter_type = _enum(FilterType, item["filterType"], f"{at}.filterType", "filter type")
    return NameFilter(name, pattern, filter_type)


def _enum(cls: type[StrEnum], raw: Any, at: str, what: str) -> Any:
    choices = " or ".join(m.value for m in cls)
    if not isinstance(raw, str):
        raise _Invalid(f"{at}: expected {choices}, got {kind_of(raw)}")
    try:
        return cls(raw.upper())
    except ValueError:
        raise _Invalid(f"{at}: unknown {what} {show_key(raw)} (expected {choices})") from None

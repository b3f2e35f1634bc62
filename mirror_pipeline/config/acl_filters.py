"""Which ACL bindings a link syncs: `acl.filters`, in Cluster Linking's format (R-ACL-1).

```json
{"aclFilters": [{"resourceFilter": {"resourceType": "topic", "name": "orders", "patternType": "literal"},
                 "accessFilter": {"principal": "User:app", "host": "*", "operation": "read",
                                  "permissionType": "allow"},
                 "filterType": "INCLUDE"}]}
```

Each entry matches bindings the way Kafka's own `AclBindingFilter` does
(DescribeAcls and DeleteAcls use it), so a filter means on the source what it
would mean to `kafka-acls --list`. An absent (or null) key matches anything;
`any` does too. A binding is selected when some INCLUDE entry matches it and
no EXCLUDE entry does, whatever their order (as for topic filters).

Bindings are matched in their JSON form, a `BindingKey` of lower-case enum
names, so this module needs no Kafka client (`kafka.acls` converts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from mirror_pipeline.config.filters import FilterType, include_exclude, kind_of, parse_json, show_key, unknown_key_hint
from mirror_pipeline.model.errors import ConfigError

ANY = "any"
LIST_KEY = "aclFilters"
# Kafka's names, as librdkafka knows them (`cluster` is the CLUSTER resource).
RESOURCE_TYPES = (ANY, "topic", "group", "cluster", "transactional_id")
# `match`: every binding that applies to the named resource (its literal name,
# the `*` wildcard and every prefix of it), as in Kafka.
PATTERN_TYPES = (ANY, "match", "literal", "prefixed")
OPERATIONS = (
    ANY,
    "all",
    "read",
    "write",
    "create",
    "delete",
    "alter",
    "describe",
    "cluster_action",
    "describe_configs",
    "alter_configs",
    "idempotent_write",
)
PERMISSION_TYPES = (ANY, "allow", "deny")
WILDCARD = "*"

_ENTRY_KEYS = ("resourceFilter", "accessFilter", "filterType")
_RESOURCE_KEYS = ("resourceType", "name", "patternType")
_ACCESS_KEYS = ("principal", "host", "operation", "permissionType")


class BindingKey(NamedTuple):
    """One ACL binding in its JSON form (the fields of Cluster Linking's ACL JSON), lower-case enums."""

    resource_type: str
    name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission_type: str


@dataclass(frozen=True)
class AclFilter:
    """One `aclFilters` entry; None and `any` match anything."""

    resource_type: str = ANY
    name: str | None = None
    pattern_type: str = ANY
    principal: str | None = None
    host: str | None = None
    operation: str = ANY
    permission_type: str = ANY
    filter_type: FilterType = FilterType.INCLUDE

    def matches(self, binding: BindingKey) -> bool:
        return self._matches_resource(binding) and self._matches_access(binding)

    def _matches_resource(self, b: BindingKey) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type != ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (ANY, "match") and self.pattern_type != b.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type != "match":
            return self.name == b.name
        if b.pattern_type == "literal":
            return self.name == b.name or b.name == WILDCARD
        return b.pattern_type == "prefixed" and self.name.startswith(b.name)

    def _matches_access(self, b: BindingKey) -> bool:
        """Kafka's AccessControlEntryFilter.matches."""
        return (
            (self.principal is None or self.principal == b.principal)
            and (self.host is None or self.host == b.host)
            and self.operation in (ANY, b.operation)
            and self.permission_type in (ANY, b.permission_type)
        )

    def to_json(self) -> dict[str, Any]:
        resource = {"resourceType": self.resource_type, "patternType": self.pattern_type}
        if self.name is not None:
            resource["name"] = self.name
        access = {k: v for k, v in (("principal", self.principal), ("host", self.host)) if v is not None}
        access.update(operation=self.operation, permissionType=self.permission_type)
        return {"resourceFilter": resource, "accessFilter": access, "filterType": self.filter_type.value}


@dataclass(frozen=True)
class AclFilters:
    filters: tuple[AclFilter, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "filters", tuple(self.filters))

    @property
    def is_empty(self) -> bool:
        return not self.filters

    def selects(self, binding: BindingKey) -> bool:
        return include_exclude(self.filters, binding)

    def to_json(self) -> dict[str, Any]:
        return {LIST_KEY: [f.to_json() for f in self.filters]}

    @classmethod
    def parse(cls, value: Any, *, where: str) -> AclFilters:
        """Filters from a JSON string, the same structure parsed from YAML, or None (no filters).

        `where` (file and key path) starts the `ConfigError`'s message.
        """
        try:
            return cls(tuple(_parse_entries(value)))
        except _Invalid as exc:
            raise ConfigError(f"{where}: {exc}") from None


class _Invalid(ValueError):
    """What is wrong, without where: `AclFilters.parse` adds the location."""


def _parse_entries(value: Any) -> Iterator[AclFilter]:
    if isinstance(value, AclFilters):
        yield from value.filters
        return
    if value is None or isinstance(value, str) and not value.strip():
        return
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except ValueError as exc:
            raise _Invalid(str(exc)) from None
    if not isinstance(value, dict):
        raise _Invalid(f"expected a mapping or a JSON object string, got {kind_of(value)}")
    for key in value:
        if key != LIST_KEY:
            raise _Invalid(unknown_key_hint(key, [LIST_KEY]) + f"; expected only '{LIST_KEY}'")
    entries = value.get(LIST_KEY)
    if entries is None:
        return
    if not isinstance(entries, list):
        raise _Invalid(f"{LIST_KEY}: expected a list of filters, got {kind_of(entries)}")
    for i, entry in enumerate(entries):
        yield _parse_entry(entry, f"{LIST_KEY}[{i}]")


def _parse_entry(entry: Any, at: str) -> AclFilter:
    _check_mapping(entry, at, _ENTRY_KEYS, "resourceFilter, accessFilter and filterType")
    resource = {} if entry.get("resourceFilter") is None else entry["resourceFilter"]
    access = {} if entry.get("accessFilter") is None else entry["accessFilter"]
    _check_mapping(resource, f"{at}.resourceFilter", _RESOURCE_KEYS, "resourceType, name and patternType")
    _check_mapping(access, f"{at}.accessFilter", _ACCESS_KEYS, "principal, host, operation and permissionType")
    filter_type = FilterType.INCLUDE
    if entry.get("filterType") is not None:
        filter_type = FilterType(
            _choice(entry["filterType"], ("INCLUDE", "EXCLUDE"), f"{at}.filterType", "filter type", upper=True)
        )
    principal = _text(access.get("principal"), f"{at}.accessFilter.principal")
    if principal is not None and not _looks_like_principal(principal):
        raise _Invalid(
            f"{at}.accessFilter.principal: expected a principal such as User:alice, got {show_key(principal)}"
        )
    return AclFilter(
        resource_type=_choice(
            resource.get("resourceType"), RESOURCE_TYPES, f"{at}.resourceFilter.resourceType", "resource type"
        ),
        name=_text(resource.get("name"), f"{at}.resourceFilter.name"),
        pattern_type=_choice(
            resource.get("patternType"), PATTERN_TYPES, f"{at}.resourceFilter.patternType", "pattern type"
        ),
        principal=principal,
        host=_text(access.get("host"), f"{at}.accessFilter.host"),
        operation=_choice(access.get("operation"), OPERATIONS, f"{at}.accessFilter.operation", "operation"),
        permission_type=_choice(
            access.get("permissionType"), PERMISSION_TYPES, f"{at}.accessFilter.permissionType", "permission type"
        ),
        filter_type=filter_type,
    )


def _check_mapping(value: Any, at: str, keys: tuple[str, ...], described: str) -> None:
    if not isinstance(value, dict):
        raise _Invalid(f"{at}: expected a mapping with {described}, got {kind_of(value)}")
    for key in value:
        if key not in keys:
            raise _Invalid(f"{at}: {unknown_key_hint(key, keys)}")


def _choice(raw: Any, choices: tuple[str, ...], at: str, what: str, upper: bool = False) -> str:
    """One of `choices` (case-insensitive); absent or null is `any` (`choices[0]`)."""
    shown = " or ".join(", ".join(choices).rsplit(", ", 1))
    if raw is None:
        return choices[0]
    if not isinstance(raw, str):
        raise _Invalid(f"{at}: expected {shown}, got {kind_of(raw)}")
    value = raw.upper() if upper else raw.lower()
    if value not in choices:
        raise _Invalid(f"{at}: unknown {what} {show_key(raw)} (expected {shown})")
    return value


def _text(raw: Any, at: str) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise _Invalid(f"{at}: expected a non-empty string, got {kind_of(raw) if raw != '' else 'an empty string'}")
    return raw


def _looks_like_principal(text: str) -> bool:
    kind, sep, name = text.partition(":")
    return bool(sep and kind and name)

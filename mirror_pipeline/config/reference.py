"""The configuration reference (`docs/configuration.md`), written from the settings' own definitions.

Every link setting's name, default, allowed values and meaning come from its
field in `LinkSettings` (its alias, default, `Bounds` and description), so the
page cannot drift from what the loader accepts: a unit test renders it and
compares it with the committed page. Regenerate it with
`python -m mirror_pipeline.config.reference > docs/configuration.md`.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable

from pydantic.fields import FieldInfo

from mirror_pipeline.config.acl_filters import AclFilters
from mirror_pipeline.config.filters import NameFilters
from mirror_pipeline.config.link_settings import LinkSettings
from mirror_pipeline.config.loader import SparkSettings
from mirror_pipeline.config.setting_values import Bounds

_HEADER = """# Configuration reference

Generated from the code (`python -m mirror_pipeline.config.reference`); a test
fails when this page and the settings disagree. How the file is found, how
secrets get in and how a bad file is reported: see
[Configuring links](configuring-links.md#the-file).

```yaml
clusters:          # alias -> librdkafka client properties; bootstrap.servers is required
  us-west: {bootstrap.servers: "127.0.0.1:19092"}
  us-east: {bootstrap.servers: "127.0.0.1:29092"}
defaults: {}       # link settings for every link
links:             # name -> source, destination and link settings
  west-to-east: {source: us-west, destination: us-east}
spark: {}          # optional: where the copies run
```

Clusters take any librdkafka client property, checked against librdkafka
when the file loads. `${NAME}` takes the value of an environment variable.
"""

_SIZES = ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"))
# What the fields cannot say themselves: defaults computed at run time, and the
# rules of free-form strings (their checks live in `setting_values`).
_SHOWN_DEFAULT = {
    "mirror.state.topic": "`_mirror-pipeline<sep>state`",
    "mirror.offset.map.topic": "`_mirror-pipeline<sep><link><sep>offset-map`",
    "mirror.checkpoints.topic": "`_mirror-pipeline<sep><link><sep>checkpoints`",
    "mirror.heartbeats.topic": "`_mirror-pipeline<sep>heartbeats`",
    "mirror.link.principal": "from the client settings",
    "master": "`local[N]`, N two per core",
}
_ALLOWED = {
    "cluster.link.prefix": "topic-name characters",
    "replication.policy.class": "`DefaultReplicationPolicy`, `IdentityReplicationPolicy` (or their MirrorMaker 2 "
    "class names), `module.Class` of a ReplicationPolicy subclass",
    "replication.policy.separator": "1 to 8 topic-name characters",
    "mirror.link.principal": "a Kafka principal such as `User:mirror` (not a wildcard)",
}


def render() -> str:
    """The whole page."""
    named = {f.alias for f in LinkSettings.model_fields.values()} | set(SparkSettings.model_fields)
    unknown = (set(_SHOWN_DEFAULT) | set(_ALLOWED)) - named
    if unknown:
        raise ValueError(f"the reference describes settings that do not exist: {sorted(unknown)}")
    parts = [
        _HEADER,
        "## Link settings\n",
        "Under `links.<name>` (with `source` and `destination`, the cluster aliases) or `defaults`.\n",
        _table(LinkSettings.model_fields.values(), with_allowed=True),
        "\n## `spark`\n",
        _table(SparkSettings.model_fields.items(), with_allowed=False),
    ]
    return "\n".join(parts)


def _table(fields: Iterable[tuple[str, FieldInfo] | FieldInfo], with_allowed: bool) -> str:
    rows = [
        "| setting | default | allowed | what it does |" if with_allowed else "| setting | default | what it does |",
        "| --- | --- | --- | --- |" if with_allowed else "| --- | --- | --- |",
    ]
    for item in fields:
        name, field = item if isinstance(item, tuple) else (item.alias or "", item)
        cells = [f"`{name}`", _SHOWN_DEFAULT.get(name) or _default(field)]
        cells += [_ALLOWED.get(name) or _allowed(field)] if with_allowed else []
        cells.append(_cell(field.description))
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.get_default(call_default_factory=True)
        return "none" if value in ({}, []) else f"`{value}`"
    value = field.default
    if value is None or value == "" or (isinstance(value, (NameFilters, AclFilters)) and value.is_empty):
        return "link naming" if field.alias == "replication.policy.class" else "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        size = next(
            (
                f" ({value // unit} {name})"
                for unit, name in _SIZES
                if (field.alias or "").endswith("bytes") and value >= unit and value % unit == 0
            ),
            "",
        )
        return f"{value}{size}"
    return f"`{value}`"


def _allowed(field: FieldInfo) -> str:
    bounds = next((m for m in field.metadata if isinstance(m, Bounds)), None)
    if bounds is not None:
        return _cell(f"{bounds.low} to {bounds.high} ({bounds.why})")
    if typing.get_origin(field.annotation) is typing.Literal:
        return ", ".join(f"`{v}`" for v in typing.get_args(field.annotation))
    if field.annotation is bool:
        return "true, false"
    if (field.alias or "").endswith(".topic"):
        return "a topic name"
    if isinstance(field.default, NameFilters):
        return "filters: INCLUDE or EXCLUDE, LITERAL or PREFIXED names (`*` for all)"
    if isinstance(field.default, AclFilters):
        return "filters: a resource filter and an access filter each"
    raise ValueError(f"the reference cannot say what {field.alias} allows: add it to _ALLOWED")


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    print(render(), end="")

"""The configuration file: clusters, links and Spark settings (R-CFG).

Read and validated once, here; the rest of the engine gets frozen, typed
objects. Every problem becomes one `ConfigError` line `<file>: <key path>:
<reason>`, all problems at once, and no message ever quotes a cluster
property's value: the file is where secrets come in (R-CFG-5).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Mapping

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from mirror_pipeline.config.filters import kind_of, unknown_key_hint
from mirror_pipeline.config.link_settings import LinkConfig, build_link, check_defaults, validation_problems
from mirror_pipeline.config.redaction import is_secret_key, redact
from mirror_pipeline.config.replication_policy import loop_warnings
from mirror_pipeline.model.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_CONFIG_FILE = "mirror.yaml"
CONFIG_ENV_VAR = "MIRROR_PIPELINE_CONFIG"

_TOP_KEYS = ("clusters", "defaults", "links", "spark")
_NAME = re.compile(r"[A-Za-z0-9._-]+")
_PROPERTY = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*")
# `$${NAME}` is the escape for a literal `${NAME}`.
_ENV_REF = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _stringify_conf(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        text = _scalar_text(item)
        if text is None:
            raise ValueError(f"{key}: expected a single value, got {kind_of(item)}")
        out[key] = text
    return out


@dataclass(frozen=True, repr=False)
class ClusterConfig:
    """A Kafka cluster: its alias and librdkafka client properties (strings)."""

    alias: str
    properties: dict[str, str]
    # Env values substituted into secret properties: a secret may be only part
    # of a property (a JAAS line), and error texts may quote just that part.
    secret_fragments: tuple[str, ...] = field(default=(), compare=False)

    @property
    def bootstrap_servers(self) -> str:
        return self.properties["bootstrap.servers"]

    def redacted(self) -> dict:
        return redact(self.properties)

    def secret_values(self) -> list[str]:
        values = [v for k, v in self.properties.items() if is_secret_key(k)]
        return [v for v in (*values, *self.secret_fragments) if v]

    def __repr__(self) -> str:
        return f"ClusterConfig(alias={self.alias!r}, properties={self.redacted()!r})"

    __str__ = __repr__


class SparkSettings(BaseModel):
    """Where the data plane runs; `local[*]` unless a master is configured (R-EX-2/3)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    master: Annotated[str, Field(min_length=1)] = "local[*]"
    conf: Annotated[dict[str, str], BeforeValidator(_stringify_conf)] = Field(default_factory=dict)

    def __repr_args__(self):
        yield "master", self.master
        yield "conf", redact(self.conf)


@dataclass(frozen=True)
class PipelineConfig:
    path: Path | None
    clusters: dict[str, ClusterConfig]
    links: dict[str, LinkConfig]
    spark: SparkSettings = field(default_factory=SparkSettings)
    secret_fragments: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def link(self, name: str) -> LinkConfig:
        if name not in self.links:
            raise ConfigError(f"unknown link '{name}'; known links: {_names(self.links)}")
        return self.links[name]

    def cluster(self, alias: str) -> ClusterConfig:
        if alias not in self.clusters:
            raise ConfigError(f"unknown cluster '{alias}'; known clusters: {_names(self.clusters)}")
        return self.clusters[alias]

    def secret_values(self) -> list[str]:
        """Every secret the file brought in, for `redaction.scrub` of foreign text."""
        values = [v for c in self.clusters.values() for v in c.secret_values()]
        values += [v for k, v in self.spark.conf.items() if is_secret_key(k)]
        values += self.secret_fragments
        return list(dict.fromkeys(v for v in values if v))

    def to_redacted_dict(self) -> dict:
        """The file's shape with defaults applied to every link and secrets masked."""
        return {
            "clusters": {alias: c.redacted() for alias, c in self.clusters.items()},
            "links": {name: link.to_dict() for name, link in self.links.items()},
            "spark": {"master": self.spark.master, "conf": redact(self.spark.conf)},
        }


def _names(items: Mapping[str, Any]) -> str:
    return ", ".join(sorted(items)) or "(none)"


def resolve_config_path(explicit: str | Path | None, env: Mapping[str, str] = os.environ) -> Path:
    """`--config`, else `$MIRROR_PIPELINE_CONFIG`, else `./mirror.yaml` (R-CFG-1)."""
    if explicit:
        return Path(explicit)
    if env.get(CONFIG_ENV_VAR):
        return Path(env[CONFIG_ENV_VAR])
    return Path(DEFAULT_CONFIG_FILE)


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None) -> PipelineConfig:
    env = os.environ if env is None else env
    resolved = resolve_config_path(path, env)
    name = str(resolved)
    try:
        text = resolved.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{name}: configuration file not found; pass --config PATH "
                          f"or set {CONFIG_ENV_VAR} to use another file") from None
    except IsADirectoryError:
        raise ConfigError(f"{name}: is a directory, not a configuration file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{name}: is not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{name}: cannot be read: {exc.strerror}") from None
    data = _parse_yaml(text, name)
    if data is None:
        raise ConfigError(f"{name}: the file is empty; it needs clusters: and links:")
    return parse_config(data, name, env, path=resolved)


def parse_config(data: Any, source_name: str = "<config>", env: Mapping[str, str] | None = None,
                 *, path: Path | None = None) -> PipelineConfig:
    """Validate an already-parsed config mapping; `source_name` starts every error."""
    env = os.environ if env is None else env
    if not isinstance(data, dict):
        raise ConfigError(f"{source_name}: expected a mapping with clusters: and links:, "
                          f"got {kind_of(data)}")
    problems = [unknown_key_hint(k, _TOP_KEYS) for k in data if k not in _TOP_KEYS]
    fragments: list[str] = []

    clusters: dict[str, ClusterConfig] = {}
    raw_clusters = data.get("clusters")
    if not raw_clusters:
        problems.append("clusters: at least one cluster is required")
    elif not isinstance(raw_clusters, dict):
        problems.append(f"clusters: expected a mapping of alias to client properties, "
                        f"got {kind_of(raw_clusters)}")
    else:
        for alias, raw in raw_clusters.items():
            cluster = _parse_cluster(alias, raw, env, problems)
            if cluster:
                clusters[alias] = cluster

    spark = _parse_spark(data.get("spark"), env, problems, fragments)

    raw_defaults = data.get("defaults") or {}
    bad_defaults: set[str] = set()
    if not isinstance(raw_defaults, dict):
        problems.append(f"defaults: expected a mapping of link settings, got {kind_of(raw_defaults)}")
        raw_defaults = {}
    else:
        found, bad_defaults = check_defaults(raw_defaults)
        problems += found
    usable_defaults = {k: v for k, v in raw_defaults.items() if k not in bad_defaults}

    links: dict[str, LinkConfig] = {}
    if "links" not in data:
        problems.append("links is required (it may be empty: links: {})")
    raw_links = data.get("links") or {}
    if not isinstance(raw_links, dict):
        problems.append(f"links: expected a mapping of link name to settings, got {kind_of(raw_links)}")
        raw_links = {}
    for name, raw in raw_links.items():
        at = f"links.{name}"
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            problems.append(f"links: link name {name!r} must match [A-Za-z0-9._-]+")
        elif not isinstance(raw, dict):
            problems.append(f"{at}: expected a mapping with source, destination and settings, "
                            f"got {kind_of(raw)}")
        else:
            link, found = build_link(name, {**usable_defaults, **raw}, at)
            problems += found + _check_aliases(raw, at, raw_clusters)
            if link:
                links[name] = link

    if problems:
        raise ConfigError("\n".join(f"{source_name}: {p}" for p in problems))
    for warning in loop_warnings(links.values()):
        log.warning("%s: %s", source_name, warning)
    return PipelineConfig(path=path, clusters=clusters, links=links, spark=spark,
                          secret_fragments=tuple(fragments))


def _check_aliases(raw_link: dict, at: str, raw_clusters: Any) -> list[str]:
    known = raw_clusters if isinstance(raw_clusters, dict) else {}
    return [f"{at}.{role}: unknown cluster '{raw_link[role]}'; known clusters: {_names(known)}"
            for role in ("source", "destination")
            if isinstance(raw_link.get(role), str) and raw_link[role] not in known]


def _parse_cluster(alias: Any, raw: Any, env: Mapping[str, str],
                   problems: list[str]) -> ClusterConfig | None:
    at = f"clusters.{alias}"
    if not isinstance(alias, str) or not _NAME.fullmatch(alias):
        problems.append(f"clusters: alias {alias!r} must match [A-Za-z0-9._-]+")
        return None
    if not isinstance(raw, dict):
        problems.append(f"{at}: expected a mapping of client properties, got {kind_of(raw)}")
        return None
    before = len(problems)
    properties: dict[str, str] = {}
    fragments: list[str] = []
    for key, value in raw.items():
        if not isinstance(key, str) or not _PROPERTY.fullmatch(key):
            problems.append(f"{at}: {key!r} is not a client property name "
                            "(librdkafka names are lowercase and dotted, e.g. bootstrap.servers)")
            continue
        text = _scalar_text(value)
        if text is None:
            hint = "; write a list as one comma-separated string" if isinstance(value, list) else ""
            problems.append(f"{at}.{key}: expected a single value (string, number or boolean), "
                            f"got {kind_of(value)}{hint}")
            continue
        properties[key] = _expand(text, env, f"{at}.{key}", problems,
                                  fragments if is_secret_key(key) else None)
    if "bootstrap.servers" not in raw:
        problems.append(f"{at}: bootstrap.servers is required")
    elif not properties.get("bootstrap.servers", "-").strip():
        problems.append(f"{at}.bootstrap.servers: must not be empty")
    if len(problems) > before:
        return None
    return ClusterConfig(alias, properties, tuple(fragments))


def _parse_spark(raw: Any, env: Mapping[str, str], problems: list[str],
                 fragments: list[str]) -> SparkSettings:
    if raw is None:
        return SparkSettings()
    if not isinstance(raw, dict):
        problems.append(f"spark: expected a mapping with master and conf, got {kind_of(raw)}")
        return SparkSettings()
    raw = dict(raw)
    if isinstance(raw.get("master"), str):
        raw["master"] = _expand(raw["master"], env, "spark.master", problems, None)
    if isinstance(raw.get("conf"), dict):
        raw["conf"] = {k: _expand(v, env, f"spark.conf.{k}", problems,
                                  fragments if is_secret_key(str(k)) else None)
                       if isinstance(v, str) else v for k, v in raw["conf"].items()}
    try:
        return SparkSettings.model_validate(raw)
    except ValidationError as exc:
        problems += validation_problems(exc, "spark", SparkSettings)
        return SparkSettings()


def _expand(text: str, env: Mapping[str, str], at: str, problems: list[str],
            secret_fragments: list[str] | None) -> str:
    """Substitute `${NAME}` from `env`; a missing variable is a problem, named but never guessed."""
    missing: list[str] = []

    def substitute(match: re.Match) -> str:
        escaped, name = match.groups()
        if escaped:
            return "${" + name + "}"
        if name not in env:
            missing.append(name)
            return ""
        if secret_fragments is not None:
            secret_fragments.append(env[name])
        return env[name]

    expanded = _ENV_REF.sub(substitute, text)
    if missing:
        names = ", ".join(dict.fromkeys(missing))
        verb = "is" if len(set(missing)) == 1 else "are"
        problems.append(f"{at}: environment variable {names} {verb} not set")
    return expanded


class _Loader(yaml.SafeLoader):
    """YAML as a config author means it.

    Only true/false are booleans (`on`/`yes` stay strings), numbers keep the
    text they were written with unless it reads back identically (a password
    `0123` must not become 83), and a repeated key is an error rather than a
    silent override.
    """

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                continue
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key_node.value}'", key_node.start_mark)
            seen.add(key_node.value)
        return super().construct_mapping(node, deep)


def _bool_or_text(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    text = node.value
    return text.lower() == "true" if text.lower() in ("true", "false") else text


def _number_or_text(construct):
    def build(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
        value = construct(loader, node)
        return value if str(value) == node.value else node.value
    return build


_Loader.add_constructor("tag:yaml.org,2002:bool", _bool_or_text)
_Loader.add_constructor("tag:yaml.org,2002:int", _number_or_text(yaml.SafeLoader.construct_yaml_int))
_Loader.add_constructor("tag:yaml.org,2002:float", _number_or_text(yaml.SafeLoader.construct_yaml_float))
_Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_scalar)


def _parse_yaml(text: str, name: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        # Only problem and position: PyYAML's own message quotes the offending
        # line, which may be `sasl.password: ...`.
        mark = exc.problem_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(f"{name}: {at}invalid YAML: {exc.problem or 'cannot be parsed'}") from None
    except yaml.YAMLError:
        raise ConfigError(f"{name}: invalid YAML") from None

"""The configuration file: clusters, links and Spark settings (R-CFG).

Read and validated once, here, in one pass; the rest of the engine gets
frozen, typed objects. Every problem becomes one `ConfigError` line `<file>:
<key path>: <what is wrong>; <what is allowed>`, all problems at once. No
message quotes a cluster property's value, and every message is scrubbed of
the values of secret keys (wherever in the file they sit, so that a YAML alias
cannot carry one into another key's message) and of every value substituted
from the environment: the file is where secrets come in (R-CFG-5). A secret's
value that is also a value shown (a YAML alias `prefix: *pw`) is refused, and
so is a control character in a client property (see `config.secret_use` and
`config.client_properties`).

`${NAME}` is replaced by environment variable NAME, `$${` is a literal `${`,
and any other `${` (unclosed, or not a NAME) is an error.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from mirror_pipeline.config.client_properties import client_property_problems
from mirror_pipeline.config.env_references import expand_references
from mirror_pipeline.config.filters import kind_of, show_key, unknown_key_hint
from mirror_pipeline.config.link_settings import LinkConfig, build_link, check_defaults
from mirror_pipeline.config.redaction import is_secret_key, redact
from mirror_pipeline.config.replication_policy import heartbeat_collisions, loop_warnings
from mirror_pipeline.config.safe_yaml import parse_yaml, read_config_text, shape_problem
from mirror_pipeline.config.secret_use import ConfigSecrets
from mirror_pipeline.config.spark_connect import check_connect_url, connect_url_token, redact_connect_url
from mirror_pipeline.config.spark_requirements import default_local_master
from mirror_pipeline.config.validation_messages import validation_problems
from mirror_pipeline.model.errors import ConfigError
from mirror_pipeline.model.text import printable

log = logging.getLogger(__name__)

DEFAULT_CONFIG_FILE = "mirror.yaml"
CONFIG_ENV_VAR = "MIRROR_PIPELINE_CONFIG"

_TOP_KEYS = ("clusters", "defaults", "links", "spark")
# Cluster aliases and link names become parts of topic names, client ids and transactional ids.
_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
_NAME_RULE = "must match [A-Za-z0-9._-]+ and have at most 249 characters"
_PROPERTY = re.compile(r"[a-z0-9_]+(\.[a-z0-9_]+)*")
_PROPERTY_MAX = 100
# `$${` is a literal `${`; any other `${` must be a whole `${NAME}`.
_MAX_DIGITS = 100


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and abs(value) >= 10**_MAX_DIGITS:
        return None  # more digits than any property takes (and than str() may print)
    if isinstance(value, (str, int, float)):
        return str(value)
    return None


def _key_text(key: Any) -> str:
    text = str(key) if isinstance(key, (str, int, float, bool)) else kind_of(key)
    if len(text) > _PROPERTY_MAX:
        return f"(a key of {len(text)} characters)"
    return repr(text) if not text or not text.isprintable() else text


def _stringify_conf(value: Any) -> Any:
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        text = _scalar_text(item)
        if text is None:  # never the value itself: the key may be a secret's (R-CFG-5)
            raise PydanticCustomError(
                "setting",
                "expected a single value (string, number or boolean), got {got}",
                {"key": _key_text(key), "got": kind_of(item)},
            )
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

    def redacted(self) -> dict[str, Any]:
        return redact(self.properties)

    def secret_values(self) -> list[str]:
        values = [v for k, v in self.properties.items() if is_secret_key(k)]
        return [v for v in (*values, *self.secret_fragments) if v]

    def __repr__(self) -> str:
        return f"ClusterConfig(alias={self.alias!r}, properties={self.redacted()!r})"

    __str__ = __repr__


class SparkSettings(BaseModel):
    """Where the data plane runs: in this process with two task slots per core
    (`default_local_master`) unless a master is configured, or a Spark Connect
    server when `remote` names one (R-EX-2/3)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    master: Annotated[str, Field(min_length=1)] = Field(
        default_factory=default_local_master,
        description="Spark master URL (`local[4]`, `spark://host:7077`); default `local[N]`, two task slots per core",
    )
    remote: Annotated[str | None, AfterValidator(check_connect_url)] = Field(
        None, description="a Spark Connect server (`sc://host:15002`) to run the copies on instead of a master"
    )
    conf: Annotated[dict[str, str], BeforeValidator(_stringify_conf)] = Field(
        default_factory=dict,
        description="Spark settings for the session (`spark.executor.memory: 2g`); secret "
        "values reach the session at run time only",
    )

    @model_validator(mode="after")
    def _master_or_remote(self) -> SparkSettings:
        if self.remote is not None and "master" in self.model_fields_set:
            raise ValueError("set master or remote, not both (a Spark Connect server has its own master)")
        return self

    def __repr_args__(self) -> Iterator[tuple[str, Any]]:
        yield "master", self.master
        if self.remote is not None:
            yield "remote", redact_connect_url(self.remote)
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

    def to_redacted_dict(self) -> dict[str, Any]:
        """The file's shape with defaults applied to every link and secrets masked."""
        return {
            "clusters": {alias: c.redacted() for alias, c in self.clusters.items()},
            "links": {name: link.to_dict() for name, link in self.links.items()},
            "spark": {
                "master": self.spark.master,
                "conf": redact(self.spark.conf),
                **({"remote": redact_connect_url(self.spark.remote)} if self.spark.remote else {}),
            },
        }


def _names(items: Mapping[Any, Any]) -> str:
    return ", ".join(sorted(_key_text(k) for k in items)) or "(none)"


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
    # The path as typed may hold control characters: shown escaped, a message stays one line per problem.
    name = printable(str(resolved))
    text = read_config_text(resolved, name, f"; pass --config PATH or set {CONFIG_ENV_VAR} to use another file")
    data = parse_yaml(text, name)
    if data is None:
        raise ConfigError(f"{name}: the file is empty; it needs clusters: and links:")
    return parse_config(data, name, env, path=resolved)


def parse_config(
    data: Any, source_name: str = "<config>", env: Mapping[str, str] | None = None, *, path: Path | None = None
) -> PipelineConfig:
    """Validate an already-parsed config mapping; `source_name` starts every error."""
    env = os.environ if env is None else env
    if not isinstance(data, dict):
        raise ConfigError(f"{source_name}: expected a mapping with clusters: and links:, got {kind_of(data)}")
    secrets = ConfigSecrets.of(data)
    if shape := shape_problem(data):
        raise ConfigError(f"{source_name}: {secrets.scrubbed(shape)}")
    problems = [unknown_key_hint(k, _TOP_KEYS) for k in data if k not in _TOP_KEYS]
    fragments: list[str] = []

    clusters: dict[str, ClusterConfig] = {}
    raw_clusters = data.get("clusters")
    if not raw_clusters:
        problems.append("clusters: at least one cluster is required")
    elif not isinstance(raw_clusters, dict):
        problems.append(f"clusters: expected a mapping of alias to client properties, got {kind_of(raw_clusters)}")
    else:
        for alias, raw in raw_clusters.items():
            cluster = _parse_cluster(alias, raw, env, problems, secrets)
            if cluster:
                clusters[alias] = cluster

    spark = _parse_spark(data.get("spark"), env, problems, fragments, secrets)

    raw_defaults = data.get("defaults") or {}
    bad_defaults: set[str] = set()
    if not isinstance(raw_defaults, dict):
        problems.append(f"defaults: expected a mapping of link settings, got {kind_of(raw_defaults)}")
        raw_defaults = {}
    else:
        found, bad_defaults = check_defaults(raw_defaults)
        problems += found
    usable_defaults = {k: v for k, v in raw_defaults.items() if str(k) not in bad_defaults}

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
            problems.append(f"links: link name {show_key(name)} {_NAME_RULE}")
        elif not isinstance(raw, dict):
            problems.append(f"{at}: expected a mapping with source, destination and settings, got {kind_of(raw)}")
        else:
            link, found = build_link(name, {**usable_defaults, **raw}, at)
            problems += found + _check_aliases(raw, at, raw_clusters)
            if link:
                links[name] = link

    problems += secrets.reuse_problems() + heartbeat_collisions(links.values())
    if problems:
        raise ConfigError("\n".join(f"{source_name}: {secrets.scrubbed(p)}" for p in problems))
    for warning in loop_warnings(links.values()):
        log.warning("%s: %s", source_name, warning)
    return PipelineConfig(path=path, clusters=clusters, links=links, spark=spark, secret_fragments=tuple(fragments))


def _check_aliases(raw_link: dict[str, Any], at: str, raw_clusters: Any) -> list[str]:
    known = raw_clusters if isinstance(raw_clusters, dict) else {}
    return [
        f"{at}.{role}: unknown cluster {show_key(raw_link[role])}; known clusters: {_names(known)}"
        for role in ("source", "destination")
        if isinstance(raw_link.get(role), str) and raw_link[role] not in known
    ]


def _parse_cluster(
    alias: Any, raw: Any, env: Mapping[str, str], problems: list[str], secrets: ConfigSecrets
) -> ClusterConfig | None:
    at = f"clusters.{alias}"
    if not isinstance(alias, str) or not _NAME.fullmatch(alias):
        problems.append(f"clusters: alias {show_key(alias)} {_NAME_RULE}")
        return None
    if not isinstance(raw, dict):
        problems.append(f"{at}: expected a mapping of client properties, got {kind_of(raw)}")
        return None
    before = len(problems)
    properties: dict[str, str] = {}
    fragments: list[str] = []
    for key, value in raw.items():
        if not isinstance(key, str) or len(key) > _PROPERTY_MAX or not _PROPERTY.fullmatch(key):
            problems.append(
                f"{at}: {show_key(key)} is not a client property name "
                "(librdkafka names are lowercase and dotted, e.g. bootstrap.servers)"
            )
            continue
        text = _scalar_text(value)
        secret = is_secret_key(key)
        if text is None:  # said by its kind only, and a list hint only where a list makes sense
            hint = "; write a list as one comma-separated string" if isinstance(value, list) and not secret else ""
            problems.append(
                f"{at}.{key}: expected a single value (string, number or boolean), got {kind_of(value)}{hint}"
            )
            continue
        parts: list[str] = []
        properties[key] = expand_references(text, env, f"{at}.{key}", problems, parts)
        if secret:
            fragments += parts
            secrets.secret(f"{at}.{key}", properties[key], parts)
        else:
            secrets.shown(f"{at}.{key}", properties[key], parts)
    if "bootstrap.servers" not in raw:
        problems.append(f"{at}: bootstrap.servers is required")
    elif not properties.get("bootstrap.servers", "-").strip():
        problems.append(f"{at}.bootstrap.servers: must not be empty")
    if len(problems) > before:
        return None
    # Only a cluster whose every property has its value is worth checking as a whole.
    problems += client_property_problems(at, properties)
    if len(problems) > before:
        return None
    return ClusterConfig(alias, properties, tuple(fragments))


def _parse_spark(
    raw: Any, env: Mapping[str, str], problems: list[str], fragments: list[str], secrets: ConfigSecrets
) -> SparkSettings:
    if raw is None:
        return SparkSettings()
    if not isinstance(raw, dict):
        problems.append(f"spark: expected a mapping with master and conf, got {kind_of(raw)}")
        return SparkSettings()
    raw = dict(raw)
    if isinstance(raw.get("conf"), dict) and "spark.remote" in raw["conf"]:
        # The same setting as `remote`, so it gets the same checks and its token the same secrecy.
        conf = dict(raw["conf"])
        if "remote" in raw:
            problems.append("spark.conf.spark.remote: spark.remote is already set; set it once")
        else:
            raw["remote"] = conf.pop("spark.remote")
        raw["conf"] = conf
    if isinstance(raw.get("master"), str):
        parts: list[str] = []
        raw["master"] = expand_references(raw["master"], env, "spark.master", problems, parts)
        secrets.shown("spark.master", raw["master"], parts)
    if isinstance(raw.get("remote"), str):  # a Connect URL may carry a token: what it takes in is secret
        parts = []
        raw["remote"] = expand_references(raw["remote"], env, "spark.remote", problems, parts)
        parts += [t for t in [connect_url_token(raw["remote"])] if t]
        fragments += parts
        secrets.secret("spark.remote", "", parts)
    if isinstance(raw.get("conf"), dict):
        conf = {}
        for key, value in raw["conf"].items():
            at, parts = f"spark.conf.{_key_text(key)}", []
            if isinstance(value, str):
                value = expand_references(value, env, at, problems, parts)
                if isinstance(key, str) and is_secret_key(key):
                    fragments += parts
                    secrets.secret(at, value, parts)
                else:
                    secrets.shown(at, value, parts)
            conf[key] = value
        raw["conf"] = conf
    try:
        return SparkSettings.model_validate(raw)
    except ValidationError as exc:
        problems += validation_problems(exc, "spark", SparkSettings)
        return SparkSettings()

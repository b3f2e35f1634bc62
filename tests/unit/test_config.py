import copy
import dataclasses
import re
from pathlib import Path

import pydantic
import pytest

from mirror_pipeline.config.acl_filters import AclFilters
from mirror_pipeline.config.filters import FilterType, NameFilter, PatternType
from mirror_pipeline.config.loader import (
    CONFIG_ENV_VAR,
    DEFAULT_CONFIG_FILE,
    ClusterConfig,
    LinkConfig,
    PipelineConfig,
    SparkSettings,
    load_config,
    parse_config,
    resolve_config_path,
)
from mirror_pipeline.config.redaction import REDACTED
from mirror_pipeline.config.spark_requirements import default_local_master
from mirror_pipeline.model.errors import ConfigError
from tests.config_files import config_problem

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t-Pa55word"
SRC = "mirror.yaml"

SPEC_EXAMPLE = """
clusters:
  us-west:
    bootstrap.servers: 127.0.0.1:19092
  us-east:
    bootstrap.servers: 127.0.0.1:29092
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: SCRAM-SHA-512
    sasl.username: mirror
    sasl.password: ${US_EAST_MIRROR_PASSWORD}
defaults:                       # link settings for every link
  consumer.offset.sync.ms: 30000
links:
  west-to-east:
    source: us-west
    destination: us-east
    cluster.link.prefix: west.
    auto.create.mirror.topics.enable: true
    auto.create.mirror.topics.filters:
      topicFilters:
        - {name: "*", patternType: LITERAL, filterType: INCLUDE}
spark:                          # optional
  master: local[*]
  conf: {}
"""
ENV = {"US_EAST_MIRROR_PASSWORD": SECRET}


def base(**link_settings) -> dict:
    return {
        "clusters": {"a": {"bootstrap.servers": "h1:9092"}, "b": {"bootstrap.servers": "h2:9092"}},
        "links": {"l": {"source": "a", "destination": "b", **link_settings}},
    }


def problem(data, env=None) -> str:
    return config_problem(data, env, SRC)


def write(tmp_path, text, name="mirror.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --- locating and reading the file -------------------------------------------------


def test_resolve_config_path_precedence():
    env = {CONFIG_ENV_VAR: "/etc/m.yaml"}
    assert resolve_config_path("x.yaml", env) == Path("x.yaml")
    assert resolve_config_path(None, env) == Path("/etc/m.yaml")
    assert resolve_config_path(None, {}) == Path(DEFAULT_CONFIG_FILE) == Path("mirror.yaml")
    assert resolve_config_path("", {CONFIG_ENV_VAR: ""}) == Path("mirror.yaml")


def test_load_spec_example(tmp_path):
    path = write(tmp_path, SPEC_EXAMPLE)
    cfg = load_config(path, ENV)
    assert cfg.path == path
    east = cfg.cluster("us-east")
    assert east.properties["sasl.password"] == SECRET
    assert east.bootstrap_servers == "127.0.0.1:29092"
    link = cfg.link("west-to-east")
    assert (link.name, link.source, link.destination, link.prefix) == ("west-to-east", "us-west", "us-east", "west.")
    assert link.auto_create_enable and link.auto_create_filters.selects("orders")
    assert cfg.spark == SparkSettings(master="local[*]")


def test_load_through_env_variable(tmp_path):
    path = write(tmp_path, SPEC_EXAMPLE, "other.yaml")
    cfg = load_config(env={**ENV, CONFIG_ENV_VAR: str(path)})
    assert cfg.path == path


def test_example_file_in_repo_is_valid():
    cfg = load_config(REPO / "mirror.example.yaml", {})
    assert set(cfg.clusters) == {"us-west", "us-east"}
    link = cfg.link("west-to-east")
    assert (link.source, link.destination) == ("us-west", "us-east")
    assert link.offset_sync_ms == 30000 and cfg.spark.master == default_local_master()


def test_missing_file_says_how_to_point_elsewhere(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as err:
        load_config(path, {})
    msg = str(err.value)
    assert msg.startswith(str(path)) and "not found" in msg
    assert "--config" in msg and CONFIG_ENV_VAR in msg


def test_directory_and_empty_file(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path, {})
    with pytest.raises(ConfigError, match="empty"):
        load_config(write(tmp_path, "# nothing\n"), {})


def test_invalid_yaml_names_position_but_never_quotes_the_line(tmp_path):
    path = write(tmp_path, f"clusters:\n  a:\n    sasl.password: {SECRET}\n   bad: [\n")
    with pytest.raises(ConfigError) as err:
        load_config(path, {})
    msg = str(err.value)
    assert msg.startswith(f"{path}: line ") and "invalid YAML" in msg
    assert SECRET not in msg
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_duplicate_key_is_an_error(tmp_path):
    path = write(tmp_path, "clusters:\n  a: {bootstrap.servers: x}\nlinks: {}\nlinks: {}\n")
    with pytest.raises(ConfigError, match=r"line 4, column 1: invalid YAML: duplicate key 'links'"):
        load_config(path, {})


def test_yaml_scalars_keep_their_text(tmp_path):
    # Cluster properties must be librdkafka's own, so the odd scalars sit in spark.conf,
    # which is read the same way.
    path = write(
        tmp_path,
        """
clusters:
  a:
    bootstrap.servers: h:1
    sasl.password: 0123
links: {}
spark:
  conf:
    x.sexagesimal: 1:30
    x.hex: 0x1F
    x.int: 42
    x.float: 1.50
    x.on: on
    x.yes: yes
    x.true: TRUE
    x.date: 2024-01-02
""",
    )
    cfg = load_config(path, {})
    assert cfg.cluster("a").properties == {"bootstrap.servers": "h:1", "sasl.password": "0123"}
    assert cfg.spark.conf == {
        "x.sexagesimal": "1:30",
        "x.hex": "0x1F",
        "x.int": "42",
        "x.float": "1.50",
        "x.on": "on",
        "x.yes": "yes",
        "x.true": "true",
        "x.date": "2024-01-02",
    }


# --- structure ----------------------------------------------------------------------


def test_top_level_must_be_mapping():
    assert problem([1]) == f"{SRC}: expected a mapping with clusters: and links:, got a list"


def test_unknown_top_level_key_suggests():
    data = base()
    data["link"] = {}
    assert f"{SRC}: unknown key 'link' (did you mean 'links'?)" in problem(data)


@pytest.mark.parametrize("clusters", [None, {}])
def test_at_least_one_cluster(clusters):
    data = base()
    data["clusters"] = clusters
    data["links"] = {}
    assert f"{SRC}: clusters: at least one cluster is required" in problem(data)


def test_links_required_but_may_be_empty():
    data = base()
    del data["links"]
    assert f"{SRC}: links is required" in problem(data)
    data["links"] = {}
    assert parse_config(data, SRC, {}).links == {}
    data["links"] = None
    assert parse_config(data, SRC, {}).links == {}


@pytest.mark.parametrize("name", ["a b", "x/y", "é"])
def test_bad_cluster_alias_and_link_name(name):
    data = base()
    data["clusters"][name] = {"bootstrap.servers": "h"}
    assert f"{SRC}: clusters: alias '{name}' must match [A-Za-z0-9._-]+" in problem(data)
    data = base()
    data["links"][name] = {"source": "a", "destination": "b"}
    assert f"{SRC}: links: link name '{name}' must match [A-Za-z0-9._-]+" in problem(data)


def test_all_problems_reported_at_once():
    data = base(**{"consumer.offset.sync.ms": "soon"})
    data["clusters"]["c"] = {}
    lines = problem(data).splitlines()
    assert len(lines) == 2
    assert all(line.startswith(f"{SRC}: ") for line in lines)


# --- clusters -----------------------------------------------------------------------


def test_cluster_values_stringified():
    data = base()
    data["clusters"]["a"].update(
        {"enable.idempotence": True, "retries": 5, "enable.ssl.certificate.verification": False}
    )
    data["spark"] = {"conf": {"x.f": 0.5}}  # librdkafka has no fractional property
    cfg = parse_config(data, SRC, {})
    props = cfg.cluster("a").properties
    assert props["enable.idempotence"] == "true" and props["retries"] == "5"
    assert cfg.spark.conf["x.f"] == "0.5" and props["enable.ssl.certificate.verification"] == "false"


def test_bootstrap_servers_required():
    data = base()
    data["clusters"]["a"] = {"client.id": "x"}
    assert f"{SRC}: clusters.a: bootstrap.servers is required" in problem(data)
    data["clusters"]["a"] = {"bootstrap.servers": ""}
    assert f"{SRC}: clusters.a.bootstrap.servers: must not be empty" in problem(data)


@pytest.mark.parametrize("value, kind", [([1, 2], "a list"), ({"x": 1}, "a mapping"), (None, "null")])
def test_cluster_property_must_be_scalar(value, kind):
    data = base()
    data["clusters"]["a"]["sasl.mechanism"] = value
    assert (
        f"{SRC}: clusters.a.sasl.mechanism: expected a single value (string, number or boolean), got {kind}"
        in problem(data)
    )


def test_cluster_property_names_are_lowercase_dotted():
    data = base()
    data["clusters"]["a"]["Bootstrap.Servers"] = "x"
    assert "clusters.a: 'Bootstrap.Servers' is not a client property name" in problem(data)


def test_cluster_must_be_mapping():
    data = base()
    data["clusters"]["a"] = "h:9092"
    assert f"{SRC}: clusters.a: expected a mapping of client properties, got a string" in problem(data)


def test_cluster_repr_and_str_hide_secrets():
    c = ClusterConfig("a", {"bootstrap.servers": "h", "sasl.password": SECRET})
    assert SECRET not in repr(c) and SECRET not in str(c)
    assert REDACTED in repr(c)
    assert c.redacted() == {"bootstrap.servers": "h", "sasl.password": REDACTED}
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.alias = "b"


# --- environment expansion ----------------------------------------------------------


def test_env_expansion_and_escape():
    data = base()
    data["clusters"]["a"].update(
        {"sasl.username": "${USER_NAME}-x", "client.rack": "$${USER_NAME}", "bootstrap.servers": "${HOST}:${PORT}"}
    )
    props = parse_config(data, SRC, {"USER_NAME": "u", "HOST": "h", "PORT": "9"}).cluster("a").properties
    assert props["sasl.username"] == "u-x"
    assert props["client.rack"] == "${USER_NAME}"
    assert props["bootstrap.servers"] == "h:9"


def test_missing_env_variable_names_file_key_and_variable():
    data = base()
    data["clusters"]["a"]["sasl.password"] = "${NOT_SET_PW}"
    assert problem(data, {"OTHER": SECRET}) == (
        f"{SRC}: clusters.a.sasl.password: environment variable NOT_SET_PW is not set"
    )


def test_env_is_not_expanded_in_link_settings():
    msg = problem(base(**{"mirror.state.topic": "${X}"}), {"X": "t"})
    assert "links.l.mirror.state.topic: expected up to 249 characters" in msg


# --- secrets (R-CFG-5) --------------------------------------------------------------


def secret_data() -> dict:
    data = base()
    # sasl.oauthbearer.config: a secret property that holds the secret as part of a line.
    data["clusters"]["a"].update(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.username": "u",
            "sasl.password": "${SECRET_PW}",
            "sasl.mechanism": ["PLAIN"],
            "sasl.oauthbearer.config": 'x required password="${SECRET_PW}";',
        }
    )
    return data


def test_secret_never_in_error_text():
    msg = problem(secret_data(), {"SECRET_PW": SECRET})
    assert "clusters.a.sasl.mechanism" in msg
    assert SECRET not in msg


def test_secret_never_in_repr_or_redacted_dict():
    data = secret_data()
    data["clusters"]["a"]["sasl.mechanism"] = "PLAIN"
    data["spark"] = {"conf": {"spark.ssl.keyPassword": "${SECRET_PW}", "spark.app.name": "m"}}
    cfg = parse_config(data, SRC, {"SECRET_PW": SECRET})
    for text in (repr(cfg), str(cfg), repr(cfg.clusters), repr(cfg.spark), str(cfg.to_redacted_dict())):
        assert SECRET not in text
    assert cfg.cluster("a").properties["sasl.password"] == SECRET
    assert cfg.spark.conf["spark.ssl.keyPassword"] == SECRET
    assert cfg.to_redacted_dict()["clusters"]["a"]["sasl.password"] == REDACTED
    assert cfg.to_redacted_dict()["spark"]["conf"] == {"spark.ssl.keyPassword": REDACTED, "spark.app.name": "m"}
    values = cfg.secret_values()
    assert SECRET in values and f'x required password="{SECRET}";' in values
    assert "PLAIN" not in values and "h1:9092" not in values


def test_secret_in_non_scalar_secret_key_not_echoed():
    data = base()
    data["clusters"]["a"]["sasl.password"] = [SECRET]
    msg = problem(data)
    assert "clusters.a.sasl.password" in msg and SECRET not in msg


# --- link settings: defaults, precedence, types -------------------------------------

DEFAULTS = {
    "prefix": None,
    "auto_create_enable": False,
    "offset_sync_enable": False,
    "offset_sync_ms": 30000,
    "group_prefix_enable": False,
    "acl_sync_enable": False,
    "acl_filters": AclFilters(),
    "acl_sync_ms": 60000,
    "config_sync_ms": 5000,
    "retry_timeout_ms": 300000,
    "policy_class": "",
    "policy_separator": ".",
    "offset_translation_mode": "exact",
    "unit_max_bytes": 1073741824,
    "chunk_max_records": 20000,
    "alignment_max_records": 1000000,
    "fence_wait_ms": 16000,
    "state_topic": None,
    "offset_map_topic": None,
    "lag_alert_records": 0,
}


def test_link_defaults():
    link = parse_config(base(), SRC, {}).link("l")
    for attr, value in DEFAULTS.items():
        assert getattr(link, attr) == value, attr
    assert link.auto_create_filters.is_empty and link.offset_group_filters.is_empty


def test_defaults_section_applies_and_link_wins():
    data = base(**{"consumer.offset.sync.ms": 1000})
    data["defaults"] = {"consumer.offset.sync.ms": 5, "topic.config.sync.ms": 7, "cluster.link.prefix": "dc1."}
    data["links"]["m"] = {"source": "b", "destination": "a", "cluster.link.prefix": None}
    cfg = parse_config(data, SRC, {})
    assert (cfg.link("l").offset_sync_ms, cfg.link("l").config_sync_ms, cfg.link("l").prefix) == (1000, 7, "dc1.")
    assert (cfg.link("m").offset_sync_ms, cfg.link("m").config_sync_ms, cfg.link("m").prefix) == (5, 7, None)


def test_bad_default_is_reported_once_under_defaults():
    data = base()
    data["defaults"] = {"consumer.offset.sync.ms": "30s", "cluster.link.prefx": "x."}
    lines = problem(data).splitlines()
    assert lines == [
        f"{SRC}: defaults.consumer.offset.sync.ms: expected a whole number, got '30s'",
        f"{SRC}: defaults: unknown key 'cluster.link.prefx' (did you mean 'cluster.link.prefix'?)",
    ]


def test_defaults_reject_source_and_non_mapping():
    data = base()
    data["defaults"] = {"source": "a"}
    assert f"{SRC}: defaults: unknown key 'source'" in problem(data)
    data["defaults"] = ["x"]
    assert f"{SRC}: defaults: expected a mapping of link settings, got a list" in problem(data)


@pytest.mark.parametrize(
    "raw, expected", [(True, True), (False, False), ("true", True), ("FALSE", False), ("True", True)]
)
def test_bool_values(raw, expected):
    assert parse_config(base(**{"consumer.offset.sync.enable": raw}), SRC, {}).link("l").offset_sync_enable is expected


@pytest.mark.parametrize("raw", ["yes", "on", 1, 0, None, "", [True]])
def test_bool_rejects(raw):
    msg = problem(base(**{"consumer.offset.sync.enable": raw}))
    assert msg.startswith(f"{SRC}: links.l.consumer.offset.sync.enable: expected true or false, got ")


@pytest.mark.parametrize("raw, expected", [(10, 10), ("250", 250)])
def test_int_values(raw, expected):
    assert parse_config(base(**{"topic.config.sync.ms": raw}), SRC, {}).link("l").config_sync_ms == expected


@pytest.mark.parametrize(
    "raw, reason",
    [
        ("30s", "expected a whole number, got '30s'"),
        (1.5, "expected a whole number, got a number"),
        (True, "expected a whole number, got a boolean"),
        (None, "expected a whole number, got null"),
        ("-5", "expected a whole number, got '-5'"),
        (0, "must be greater than 0"),
        (-1, "must be greater than 0"),
    ],
)
def test_int_rejects(raw, reason):
    assert problem(base(**{"topic.config.sync.ms": raw})) == f"{SRC}: links.l.topic.config.sync.ms: {reason}"


def test_zero_allowed_where_count():
    link = parse_config(
        base(
            **{
                "mirror.log.start.alignment.max.records": 0,
                "mirror.writer.fence.wait.ms": "0",
                "mirror.lag.alert.records": 10,
            }
        ),
        SRC,
        {},
    ).link("l")
    assert (link.alignment_max_records, link.fence_wait_ms, link.lag_alert_records) == (0, 0, 10)
    assert "greater than or equal to 0" in problem(base(**{"mirror.lag.alert.records": -1}))


def test_the_lag_sensor_never_looks_more_often_than_the_dagster_daemon_can():
    assert parse_config(base(), SRC, {}).link("l").lag_sensor_interval_s == 30
    assert "greater than or equal to 5" in problem(base(**{"dagster.lag.sensor.interval.seconds": 1}))
    assert "at most 3600" in problem(base(**{"dagster.lag.sensor.interval.seconds": 7200}))


def test_the_writer_slot_count_is_a_whole_number_from_1_to_1024():
    assert parse_config(base(), SRC, {}).link("l").writer_slots == 16
    assert "must be greater than 0" in problem(base(**{"mirror.writer.slots": 0}))
    assert "at most 1024" in problem(base(**{"mirror.writer.slots": 4096}))


def test_every_property_key_maps_to_its_attribute():
    settings = {
        "cluster.link.prefix": "p.",
        "consumer.offset.sync.enable": True,
        "consumer.offset.group.filters": {"groupFilters": [{"name": "g", "patternType": "LITERAL"}]},
        "consumer.offset.sync.ms": 1,
        "consumer.group.prefix.enable": True,
        "acl.filters": '{"aclFilters": []}',
        "acl.sync.ms": 9,
        "topic.config.sync.ms": 2,
        "cluster.link.retry.timeout.ms": 3,
        "replication.policy.class": "mirror_pipeline.config.replication_policy.LinkNaming",
        "replication.policy.separator": "_",
        "offset.translation.mode": "TIMESTAMP",
        "mirror.unit.max.bytes": 4,
        "mirror.chunk.max.records": 5,
        "mirror.log.start.alignment.max.records": 6,
        "mirror.writer.fence.wait.ms": 7,
        "mirror.writer.slots": 16,
        "mirror.state.topic": "_state",
        "mirror.offset.map.topic": "_omap",
        "mirror.lag.alert.records": 8,
        "mirror.checkpoints.topic": "_cp",
        "mirror.heartbeats.topic": "_hb",
        "mirror.link.principal": "User:m",
        "mirror.freshness.target.ms": 120000,
        "mirror.task.memory.bytes": 64 * 1024 * 1024,
        "emit.heartbeats.enabled": True,
        "emit.heartbeats.interval.seconds": 5,
        "dagster.lag.sensor.interval.seconds": 5,
        "dagster.run.max.runtime.seconds": 600,
    }
    link = parse_config(base(**settings), SRC, {}).link("l")
    assert (link.prefix, link.offset_sync_enable, link.offset_sync_ms, link.group_prefix_enable) == (
        "p.",
        True,
        1,
        True,
    )
    assert link.offset_group_filters.filters == (NameFilter("g", PatternType.LITERAL, FilterType.INCLUDE),)
    assert link.acl_filters == AclFilters() and link.acl_sync_ms == 9
    assert (link.config_sync_ms, link.retry_timeout_ms, link.policy_class, link.policy_separator) == (
        2,
        3,
        "mirror_pipeline.config.replication_policy.LinkNaming",
        "_",
    )
    assert link.offset_translation_mode == "timestamp"
    assert (link.unit_max_bytes, link.chunk_max_records, link.alignment_max_records, link.fence_wait_ms) == (4, 5, 6, 7)
    assert (link.state_topic, link.offset_map_topic, link.lag_alert_records) == ("_state", "_omap", 8)
    assert (link.checkpoints_topic, link.heartbeats_topic, link.link_principal) == ("_cp", "_hb", "User:m")
    assert link.freshness_ms == 120000 and link.task_memory_bytes == 64 * 1024 * 1024
    assert (link.heartbeats_enabled, link.heartbeats_interval_s, link.lag_sensor_interval_s) == (True, 5, 5)
    assert link.run_max_runtime_s == 600 and link.writer_slots == 16
    out = link.to_dict()
    assert out["source"] == "a" and out["destination"] == "b" and "name" not in out
    assert out["consumer.offset.group.filters"] == {
        "groupFilters": [{"name": "g", "patternType": "LITERAL", "filterType": "INCLUDE"}]
    }
    assert out["auto.create.mirror.topics.filters"] == {"topicFilters": []}
    assert set(out) == {
        *settings,
        "auto.create.mirror.topics.enable",
        "auto.create.mirror.topics.filters",
        "acl.sync.enable",
        "dagster.automation.running",
        "source",
        "destination",
    }


@pytest.mark.parametrize(
    "value",
    [
        "",
        "IdentityReplicationPolicy",
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "tests.unit.custom_policy.UpperCaseAliasPolicy",
    ],
)
def test_policy_class_values(value):
    assert parse_config(base(**{"replication.policy.class": value}), SRC, {}).link("l").policy_class == value


@pytest.mark.parametrize(
    "value, reason",
    [
        ("my_pkg.policies.Custom", "cannot import module 'my_pkg.policies' for policy 'my_pkg.policies.Custom'"),
        (
            "tests.unit.custom_policy.NotAPolicy",
            "is not a subclass of mirror_pipeline.config.replication_policy.ReplicationPolicy",
        ),
        ("tests.unit.custom_policy.Missing", "is not a subclass"),
        ("MyPolicy", "unknown policy 'MyPolicy'"),
    ],
)
def test_policy_class_must_load(value, reason):
    msg = problem(base(**{"replication.policy.class": value}))
    assert msg.startswith(f"{SRC}: links.l.replication.policy.class: ") and reason in msg


@pytest.mark.parametrize(
    "policy",
    [
        "DefaultReplicationPolicy",
        "IdentityReplicationPolicy",
        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
    ],
)
def test_prefix_refused_with_a_policy_that_names_mirrors_itself(policy):
    msg = problem(base(**{"replication.policy.class": policy, "cluster.link.prefix": "west."}))
    assert msg.startswith(f"{SRC}: links.l.cluster.link.prefix: cannot be combined with replication.policy.class")


def test_turning_auto_create_off_clears_the_filters():
    filters = {"topicFilters": [{"name": "*", "patternType": "LITERAL", "filterType": "INCLUDE"}]}
    on = parse_config(
        base(**{"auto.create.mirror.topics.enable": True, "auto.create.mirror.topics.filters": filters}), SRC, {}
    ).link("l")
    off = parse_config(
        base(**{"auto.create.mirror.topics.enable": False, "auto.create.mirror.topics.filters": filters}), SRC, {}
    ).link("l")
    assert on.auto_create_filters.selects("orders") and off.auto_create_filters.is_empty


@pytest.mark.parametrize(
    "key, value, reason",
    [
        (
            "replication.policy.class",
            "not a class!",
            "expected DefaultReplicationPolicy, IdentityReplicationPolicy or a dotted path",
        ),
        ("replication.policy.separator", "", "must have at least 1 character"),
        ("offset.translation.mode", "fuzzy", "must be 'exact' or 'timestamp'"),
        ("cluster.link.prefix", "bad prefix", "expected up to 249 characters from [A-Za-z0-9._-], got 'bad prefix'"),
        ("mirror.state.topic", "", "expected up to 249 characters"),
        ("acl.filters", "{nope", "malformed JSON"),
        ("acl.filters", "[1]", "expected a mapping or a JSON object string, got a list"),
        (
            "auto.create.mirror.topics.filters",
            '{"topicFilters": [{"name": "x", "patternType": "REGEX"}]}',
            "topicFilters[0].patternType: unknown pattern type 'REGEX' (expected LITERAL or PREFIXED)",
        ),
        ("consumer.offset.group.filters", {"topicFilters": []}, "unknown key 'topicFilters'"),
    ],
)
def test_link_setting_rejects(key, value, reason):
    msg = problem(base(**{key: value}))
    assert msg.startswith(f"{SRC}: links.l.{key}: ")
    assert reason in msg


def test_empty_prefix_means_none():
    assert parse_config(base(**{"cluster.link.prefix": ""}), SRC, {}).link("l").prefix is None


def test_unknown_link_key_suggests_closest():
    assert problem(base(**{"auto.create.mirror.topic.enable": True})) == (
        f"{SRC}: links.l: unknown key 'auto.create.mirror.topic.enable' "
        "(did you mean 'auto.create.mirror.topics.enable'?)"
    )
    assert "unknown key 'prefix'" in problem(base(prefix="x."))  # attribute names are not keys
    assert "unknown key 'name'" in problem(base(name="x"))


def test_link_must_be_mapping_with_source_and_destination():
    data = base()
    data["links"]["l"] = "a->b"
    assert f"{SRC}: links.l: expected a mapping" in problem(data)
    data["links"]["l"] = {"destination": "b"}
    assert problem(data) == f"{SRC}: links.l: source is required"


# --- link rules (R-CFG-4) -----------------------------------------------------------


def test_unknown_cluster_alias_lists_known():
    data = base()
    data["links"]["l"]["destination"] = "zz"
    assert problem(data) == f"{SRC}: links.l.destination: unknown cluster 'zz'; known clusters: a, b"


def test_source_equals_destination():
    data = base()
    data["links"]["l"]["destination"] = "a"
    assert problem(data) == f"{SRC}: links.l.destination: must differ from source (both are 'a')"


def test_acl_sync_with_prefix_refused_even_when_prefix_comes_from_defaults():
    msg = problem(base(**{"acl.sync.enable": True, "cluster.link.prefix": "w."}))
    assert msg.startswith(f"{SRC}: links.l.acl.sync.enable: cannot be true on a link with cluster.link.prefix")
    data = base(**{"acl.sync.enable": "true"})
    data["defaults"] = {"cluster.link.prefix": "w."}
    assert "links.l.acl.sync.enable: cannot be true" in problem(data)
    one = {"aclFilters": [{"resourceFilter": {"resourceType": "topic"}}]}
    assert parse_config(base(**{"acl.sync.enable": True, "acl.filters": one}), SRC, {}).link("l").acl_sync_enable


def test_auto_create_needs_a_filter():
    assert problem(base(**{"auto.create.mirror.topics.enable": True})) == (
        f"{SRC}: links.l.auto.create.mirror.topics.filters: at least one filter is required "
        "when auto.create.mirror.topics.enable is true"
    )


def test_filters_from_defaults_satisfy_auto_create():
    data = base(**{"auto.create.mirror.topics.enable": True})
    data["defaults"] = {
        "auto.create.mirror.topics.filters": '{"topicFilters": [{"name": "orders", "patternType": "PREFIXED"}]}'
    }
    assert parse_config(data, SRC, {}).link("l").auto_create_filters.selects("orders.eu")


def test_offset_sync_with_empty_group_filters_is_allowed():
    link = parse_config(base(**{"consumer.offset.sync.enable": True}), SRC, {}).link("l")
    assert link.offset_sync_enable and not link.offset_group_filters.selects("g")


def test_group_prefix_needs_a_prefix():
    assert problem(base(**{"consumer.group.prefix.enable": True})) == (
        f"{SRC}: links.l.consumer.group.prefix.enable: needs cluster.link.prefix to be set"
    )


# --- the PipelineConfig object ------------------------------------------------------


def test_unknown_link_and_cluster_lookup():
    data = base()
    data["links"]["k"] = {"source": "b", "destination": "a"}
    cfg = parse_config(data, SRC, {})
    with pytest.raises(ConfigError, match=r"^unknown link 'x'; known links: k, l$"):
        cfg.link("x")
    with pytest.raises(ConfigError, match=r"^unknown cluster 'x'; known clusters: a, b$"):
        cfg.cluster("x")


def test_redacted_dict_round_trips():
    data = base(
        **{
            "auto.create.mirror.topics.enable": True,
            "auto.create.mirror.topics.filters": {"topicFilters": [{"name": "*", "patternType": "literal"}]},
        }
    )
    data["spark"] = {"master": "spark://m:7077", "conf": {"spark.executor.cores": 2}}
    cfg = parse_config(data, SRC, {})
    again = parse_config(copy.deepcopy(cfg.to_redacted_dict()), SRC, {})
    assert again.links == cfg.links and again.clusters == cfg.clusters and again.spark == cfg.spark


def test_spark_settings():
    cfg = parse_config(base(), SRC, {})
    assert cfg.spark.master == default_local_master() and cfg.spark.conf == {}
    assert re.fullmatch(r"local\[\d+\]", cfg.spark.master) and int(cfg.spark.master[6:-1]) % 2 == 0
    data = base()
    data["spark"] = {"master": "spark://${SPARK_HOST}:7077", "conf": {"spark.executor.cores": 2, "x.flag": True}}
    spark = parse_config(data, SRC, {"SPARK_HOST": "m"}).spark
    assert spark.master == "spark://m:7077" and spark.conf == {"spark.executor.cores": "2", "x.flag": "true"}
    data["spark"] = {"mastr": "x"}
    assert f"{SRC}: spark: unknown key 'mastr' (did you mean 'master'?)" in problem(data)
    data["spark"] = {"conf": {"a": [1]}}
    assert f"{SRC}: spark.conf.a: expected a single value (string, number or boolean), got a list" in problem(data)


def test_config_objects_are_frozen():
    cfg = parse_config(base(), SRC, {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.links = {}
    with pytest.raises(pydantic.ValidationError):  # a frozen pydantic model
        cfg.link("l").prefix = "x."
    assert isinstance(cfg, PipelineConfig) and isinstance(cfg.link("l"), LinkConfig)


def test_link_config_can_be_built_directly():
    link = LinkConfig(name="l", source="a", destination="b", prefix="w.", offset_sync_ms=5)
    assert link.prefix == "w." and link.offset_sync_ms == 5 and link.auto_create_filters.is_empty

"""Every bad input gets one clear ConfigError: the holes measured in the loader, one test each.

1. safe YAML: only small regular files, bounded nesting, no alias bombs;
2. secrets: never in a message, whichever way they travel; malformed `${`;
3. numeric bounds: every number has a maximum that fits what it feeds;
4. names: separator and internal topic names are legal and distinct;
5. `replication.policy.class` never imports the standard library or a foreign package;
6. Kafka client properties are checked against librdkafka before any connection.
"""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest

from mirror_pipeline.config.link_settings import LinkSettings
from mirror_pipeline.config.loader import load_config, parse_config
from mirror_pipeline.config.safe_yaml import MAX_DEPTH, MAX_FILE_BYTES
from mirror_pipeline.model.errors import ConfigError
from tests.config_files import config_problem

SRC = "mirror.yaml"
SECRET = "s3cr3t-Pa55word"
VALID = """\
clusters:
  a: {bootstrap.servers: "h1:9092"}
  b: {bootstrap.servers: "h2:9092"}
links:
  l:
    source: a
    destination: b
"""


def base(**link_settings) -> dict:
    return {
        "clusters": {"a": {"bootstrap.servers": "h1:9092"}, "b": {"bootstrap.servers": "h2:9092"}},
        "links": {"l": {"source": "a", "destination": "b", **link_settings}},
    }


def with_cluster(**props) -> dict:
    data = base()
    data["clusters"]["a"].update(props)
    return data


def problem(data, env=None) -> str:
    return config_problem(data, env, SRC)


def load_problem(tmp_path, text, env=None) -> str:
    path = tmp_path / "mirror.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, env or {})
    message = str(err.value)
    assert all(line.startswith(f"{path}: ") for line in message.splitlines()), message
    return message.removeprefix(f"{path}: ")


# --- 1. safe YAML -----------------------------------------------------------------------


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(
        ConfigError,
        match=r"fifo\.yaml: is a FIFO \(named pipe\), not a configuration file; "
        r"it must be a regular file$",
    ):
        load_config(fifo, {})


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_a_device_is_refused_without_reading_it():
    with pytest.raises(ConfigError, match=r"^/dev/zero: is a character device, not a configuration file"):
        load_config("/dev/zero", {})


def test_a_directory_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r": is a directory, not a configuration file$"):
        load_config(tmp_path, {})


def test_size_is_capped_before_reading(tmp_path):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as f:
        f.truncate(8 * 1024**3)  # sparse: reading it would take long, stat does not
    started = time.monotonic()
    with pytest.raises(
        ConfigError,
        match=rf"huge\.yaml: is {8 * 1024**3} bytes; a configuration file may be "
        rf"at most {MAX_FILE_BYTES} bytes \(1 MiB\)$",
    ):
        load_config(path, {})
    assert time.monotonic() - started < 1
    path.write_text(VALID + "#" * MAX_FILE_BYTES)
    with pytest.raises(ConfigError, match="at most 1048576 bytes"):
        load_config(path, {})


@pytest.mark.parametrize(
    "nesting",
    [
        "[" * 50_000 + "]" * 50_000,
        "{a: " * 50_000 + "1" + "}" * 50_000,
        "\n" + "".join(" " * (2 * i) + "a:\n" for i in range(1, 200)) + " " * 400 + "1",
    ],
)
def test_deep_nesting_is_refused_not_a_recursion_error(tmp_path, nesting):
    msg = load_problem(tmp_path, VALID + "spark: " + nesting + "\n")
    assert f"invalid YAML: nested more than {MAX_DEPTH} levels deep" in msg


def test_nesting_within_the_limit_is_fine(tmp_path):
    # Read whole: the problem found is the setting's own (acl.filters takes only aclFilters).
    msg = load_problem(tmp_path, VALID + "    acl.filters: " + "{a: " * 20 + "1" + "}" * 20 + "\n")
    assert msg == "links.l.acl.filters: unknown key 'a'; expected only 'aclFilters'"


BOMB = (
    VALID
    + """\
    acl.filters:
      a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
      i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""
)


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    started = time.monotonic()
    msg = load_problem(tmp_path, BOMB)
    assert time.monotonic() - started < 2
    assert msg.startswith("line ") and "invalid YAML: more than 100000 values, counting every alias" in msg


def test_an_alias_to_its_own_container_is_refused(tmp_path):
    msg = load_problem(tmp_path, VALID + "    acl.filters: &loop {self: *loop}\n")
    assert "invalid YAML: alias 'loop' refers to a node that contains it" in msg


def test_anchors_aliases_and_merge_keys_still_work(tmp_path):
    path = tmp_path / "mirror.yaml"
    path.write_text("""\
clusters:
  a: &common {bootstrap.servers: "h1:9092", client.rack: r1}
  b: {<<: *common, bootstrap.servers: "h2:9092"}
defaults: &settings
  consumer.offset.sync.ms: 1000
links:
  l: {source: a, destination: b}
""")
    cfg = load_config(path, {})
    assert cfg.cluster("b").properties == {"bootstrap.servers": "h2:9092", "client.rack": "r1"}
    assert cfg.link("l").offset_sync_ms == 1000


@pytest.mark.parametrize(
    "text, reason",
    [
        ("[" * 100_000 + "]" * 100_000, "malformed JSON: nested far too deeply"),
        ('{"a":' * 500 + "1" + "}" * 500, f"in the JSON, {'a.' * 31}a: nested more than {MAX_DEPTH} levels deep"),
        ('{"a": ' + "9" * 5000 + "}", "malformed JSON: a number has too many digits"),
    ],
)
def test_json_strings_are_bounded_too(text, reason):
    assert problem(base(**{"acl.filters": text})).startswith(f"{SRC}: links.l.acl.filters: {reason}")
    msg = problem(base(**{"auto.create.mirror.topics.filters": text}))
    assert msg.startswith(f"{SRC}: links.l.auto.create.mirror.topics.filters: {reason}")


def test_huge_numbers_are_text_or_refused_never_a_traceback(tmp_path):
    msg = load_problem(tmp_path, VALID + "    mirror.chunk.max.records: " + "9" * 5000 + "\n")
    assert (
        msg == "links.l.mirror.chunk.max.records: must be at most 1000000 (a chunk is queued in the writer "
        "at once, whose queue holds 1000000 records)"
    )
    assert "clusters.a.linger.ms: expected a single value" in problem(with_cluster(**{"linger.ms": 10**5000}))


def test_lone_surrogates_are_refused(tmp_path):
    msg = load_problem(tmp_path, VALID + '    cluster.link.prefix: "\\ud800"\n')
    assert msg.startswith("links.l.cluster.link.prefix: a string holds an escaped lone surrogate")


# --- 2. secrets ----------------------------------------------------------------------


def test_an_alias_cannot_carry_a_secret_into_another_message(tmp_path):
    text = VALID.replace(
        'a: {bootstrap.servers: "h1:9092"}', f'a: {{bootstrap.servers: "h1:9092", ssl.key.password: &pw {SECRET}}}'
    )
    msg = load_problem(tmp_path, text + "    mirror.chunk.max.records: *pw\n    cluster.link.prefix: *pw\n")
    assert SECRET not in msg
    assert "links.l.mirror.chunk.max.records: expected a whole number, got '***'" in msg


def test_even_a_one_character_secret_is_scrubbed(tmp_path):
    text = VALID.replace(
        'a: {bootstrap.servers: "h1:9092"}', 'a: {bootstrap.servers: "h1:9092", ssl.key.password: &pw Q}'
    )
    msg = load_problem(tmp_path, text + "    mirror.chunk.max.records: *pw\n")
    assert "got '***'" in msg and "Q" not in msg


def test_secrets_from_the_environment_are_scrubbed_from_every_message():
    data = with_cluster(**{"sasl.password": "${PW}", "client.id": "${ID}"})
    data["links"]["l"]["cluster.link.prefix"] = SECRET
    data["links"]["l"]["mirror.state.topic"] = "not-secret-id!"
    msg = problem(data, {"PW": SECRET, "ID": "not-secret-id!"})
    assert SECRET not in msg and "not-secret-id!" not in msg
    assert "links.l.mirror.state.topic: expected up to 249 characters from [A-Za-z0-9._-], got '***'" in msg


def test_secrets_in_spark_conf_are_scrubbed_too():
    data = base(**{"mirror.unit.max.bytes": SECRET})
    data["spark"] = {"conf": {"spark.ssl.keyPassword": SECRET}}
    assert SECRET not in problem(data)


@pytest.mark.parametrize("value", ["${X", "${1BAD}", "a${}b", "pw${", "${X-Y}"])
def test_a_malformed_reference_is_refused_naming_the_key(value):
    assert problem(with_cluster(**{"sasl.password": value}), {"X": SECRET}) == (
        f"{SRC}: clusters.a.sasl.password: has a '${{' that does not start a complete reference; allowed: "
        "${NAME} (NAME: a letter or _, then letters, digits or _), or $${ for a literal ${"
    )


def test_double_dollar_is_a_literal_dollar_brace():
    props = (
        parse_config(with_cluster(**{"sasl.password": "a$${b", "client.rack": "$${X}"}), SRC, {})
        .cluster("a")
        .properties
    )
    assert props["sasl.password"] == "a${b" and props["client.rack"] == "${X}"


# --- 3. numeric bounds ---------------------------------------------------------------

LIMITS = {
    "consumer.offset.sync.ms": 86_400_000,
    "topic.config.sync.ms": 86_400_000,
    "cluster.link.retry.timeout.ms": 2**31 - 1,
    "mirror.unit.max.bytes": 2**40,
    "mirror.chunk.max.records": 1_000_000,
    "mirror.log.start.alignment.max.records": 1_000_000,
    "mirror.writer.fence.wait.ms": 3_600_000,
    "mirror.lag.alert.records": 2**63 - 1,
}


@pytest.mark.parametrize("key", sorted(LIMITS))
@pytest.mark.parametrize("value", [10**30, 2**63, str(10**30), "0" * 50 + "1"])
def test_every_number_has_an_upper_bound(key, value):
    limit = LIMITS[key]
    if isinstance(value, str) and int(value) <= limit:
        assert getattr(parse_config(base(**{key: value}), SRC, {}).link("l"), _attr(key)) == int(value)
        return
    msg = problem(base(**{key: value}))
    assert msg.startswith(f"{SRC}: links.l.{key}: must be at most {limit} (")


@pytest.mark.parametrize("key", sorted(LIMITS))
def test_the_maximum_itself_is_accepted(key):
    assert getattr(parse_config(base(**{key: LIMITS[key]}), SRC, {}).link("l"), _attr(key)) == LIMITS[key]


def test_a_bound_in_defaults_is_reported_under_defaults():
    data = base()
    data["defaults"] = {"mirror.writer.fence.wait.ms": 10**30}
    assert problem(data).startswith(f"{SRC}: defaults.mirror.writer.fence.wait.ms: must be at most 3600000")


def _attr(key: str) -> str:
    return next(name for name, f in LinkSettings.model_fields.items() if f.alias == key)


# --- 4. names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "separator, got",
    [("/", "'/'"), ("x" * 300, "a string of 300 characters"), ("\x00", "'\\x00'"), ("a b", "'a b'"), (5, "a number")],
)
def test_separator_is_a_short_string_of_topic_characters(separator, got):
    assert problem(base(**{"replication.policy.separator": separator})) == (
        f"{SRC}: links.l.replication.policy.separator: expected 1 to 8 characters from [A-Za-z0-9._-] "
        f"(it becomes part of topic names), got {got}"
    )


@pytest.mark.parametrize("separator", [".", "_", "-", "..", "__sep__"])
def test_legal_separators(separator):
    assert (
        parse_config(base(**{"replication.policy.separator": separator}), SRC, {}).link("l").policy_separator
        == separator
    )


@pytest.mark.parametrize(
    "key", ["mirror.state.topic", "mirror.offset.map.topic", "mirror.checkpoints.topic", "mirror.heartbeats.topic"]
)
@pytest.mark.parametrize("name", [".", "..", "a/b", "t" * 250, "", "\x00"])
def test_internal_topic_names_are_legal_kafka_names(key, name):
    assert problem(base(**{key: name})).startswith(f"{SRC}: links.l.{key}: expected ")


def test_internal_topics_differ_within_a_link():
    assert problem(base(**{"mirror.state.topic": "ops.t", "mirror.heartbeats.topic": "ops.t"})) == (
        f"{SRC}: links.l.mirror.heartbeats.topic: is the same name as mirror.state.topic ('ops.t'); "
        "every internal topic of a link needs a name of its own"
    )


def test_internal_topics_must_not_collide_on_dot_and_underscore():
    assert problem(base(**{"mirror.state.topic": "ops.state", "mirror.offset.map.topic": "ops_state"})) == (
        f"{SRC}: links.l.mirror.offset.map.topic: collides (Kafka treats '.' and '_' alike in topic names) "
        "with mirror.state.topic ('ops.state'); every internal topic of a link needs a name of its own"
    )


def test_a_configured_internal_topic_must_not_take_another_kinds_default():
    msg = problem(base(**{"mirror.checkpoints.topic": "_mirror-pipeline_state"}))
    assert msg.startswith(f"{SRC}: links.l.mirror.checkpoints.topic: collides")
    assert "mirror.state.topic ('_mirror-pipeline.state')" in msg


def test_distinct_internal_topics_and_two_links_sharing_defaults_are_fine():
    data = base(
        **{
            "mirror.state.topic": "ops.state",
            "mirror.offset.map.topic": "ops.omap",
            "mirror.checkpoints.topic": "ops.cp",
            "mirror.heartbeats.topic": "ops.hb",
        }
    )
    data["links"]["m"] = {"source": "b", "destination": "a"}
    cfg = parse_config(data, SRC, {})
    assert cfg.link("l").state_topic == "ops.state" and cfg.link("m").state_topic is None


@pytest.mark.parametrize("prefix", ["a/b", "p" * 250, "\x00", "é."])
def test_prefix_is_legal(prefix):
    assert problem(base(**{"cluster.link.prefix": prefix})).startswith(
        f"{SRC}: links.l.cluster.link.prefix: expected up to 249 characters from [A-Za-z0-9._-], got "
    )


def test_long_cluster_alias_is_refused_and_not_quoted_whole():
    data = base()
    data["clusters"]["c" * 300] = {"bootstrap.servers": "h:1"}
    assert (
        f"{SRC}: clusters: alias of 300 characters must match [A-Za-z0-9._-]+ and have at most 249 "
        "characters" in problem(data)
    )


# --- 5. replication.policy.class -----------------------------------------------------


def test_the_standard_library_is_never_imported(capfd):
    before = "this" in sys.modules
    msg = problem(base(**{"replication.policy.class": "this.X"}))
    assert msg == (
        f"{SRC}: links.l.replication.policy.class: 'this.X' names a module of Python's standard "
        "library, which holds no replication policy; use DefaultReplicationPolicy, "
        "IdentityReplicationPolicy or a dotted path to your own module.Class"
    )
    assert "Beautiful is better than ugly" not in capfd.readouterr().out
    assert ("this" in sys.modules) == before


@pytest.mark.parametrize(
    "spec",
    ["os.path.X", "antigravity.X", "subprocess.Popen", "builtins.object", "__main__.X", "json.decoder.JSONDecoder"],
)
def test_other_standard_library_paths_are_refused(spec):
    assert "names a module of Python's standard library" in problem(base(**{"replication.policy.class": spec}))


@pytest.mark.parametrize("spec", ["yaml.YAMLObject", "pydantic.BaseModel", "confluent_kafka.Producer"])
def test_installed_packages_that_are_not_plugins_are_refused(spec):
    msg = problem(base(**{"replication.policy.class": spec}))
    assert f"'{spec}' names a module of an installed package that is not a mirror-pipeline plugin" in msg


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "DefaultReplicationPolicy",
        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "mirror_pipeline.config.replication_policy.LinkNaming",
        "tests.unit.custom_policy.UpperCaseAliasPolicy",
    ],
)
def test_built_ins_and_the_users_own_module_still_load(spec):
    assert parse_config(base(**{"replication.policy.class": spec}), SRC, {}).link("l").policy_class == spec


def test_a_user_module_that_fails_on_import_is_a_config_error(tmp_path, monkeypatch):
    (tmp_path / "broken_policy_mod.py").write_text(f"raise RuntimeError('{SECRET}')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    msg = problem(base(**{"replication.policy.class": "broken_policy_mod.Policy"}))
    assert msg == (
        f"{SRC}: links.l.replication.policy.class: cannot import module 'broken_policy_mod' for "
        "policy 'broken_policy_mod.Policy': importing it raised RuntimeError"
    )


# --- 6. Kafka client properties ------------------------------------------------------


@pytest.mark.parametrize(
    "props, expected",
    [
        (
            {"security.protocol": "BOGUS"},
            "clusters.a.security.protocol: has a value librdkafka does not accept; "
            "allowed: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
        ),
        ({"no.such.property": "x"}, "clusters.a.no.such.property: is not a librdkafka client property"),
        ({"ssl.truststore.location": "/x"}, "clusters.a.ssl.truststore.location: Java TrustStores are not supported"),
        (
            {"ssl.truststore.password": SECRET},
            "clusters.a.ssl.truststore.password: is not a librdkafka client property",
        ),
        ({"sasl.jaas.config": SECRET}, "clusters.a.sasl.jaas.config: Java JAAS configuration is not supported"),
        ({"linger.ms": "99999999999"}, "clusters.a.linger.ms: is out of range; allowed: 0 to 900000"),
        ({"enable.idempotence": "maybe"}, "clusters.a.enable.idempotence: is not a boolean; allowed: true or false"),
        (
            {"ssl.keystore.location": "/nonexistent/ks.p12", "ssl.keystore.password": SECRET},
            "clusters.a.ssl.keystore.location: names a file that does not exist",
        ),
        ({"ssl.ca.location": "/nonexistent/ca.pem"}, "clusters.a.ssl.ca.location: names a file that does not exist"),
        ({"ssl.ca.location": "/dev/zero"}, "clusters.a.ssl.ca.location: names something that is not a regular file"),
        (
            {"sasl.mechanism": "PLAIN"},
            "clusters.a.sasl.mechanism: has no effect unless security.protocol is SASL_PLAINTEXT or SASL_SSL",
        ),
        ({"sasl.mechanisms": "SCRAM-SHA-512", "security.protocol": "SSL"}, "clusters.a.sasl.mechanisms: has no effect"),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": SECRET},
            "clusters.a.sasl.mechanism: is not a SASL mechanism",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512"},
            "clusters.a: SASL PLAIN and SCRAM need both sasl.username and sasl.password",
        ),
        (
            {"enable.idempotence": "true", "acks": "1"},
            "clusters.a: librdkafka refuses this combination of client "
            "properties (acks, enable.idempotence) (_INVALID_ARG)",
        ),
        ({"error_cb": "x"}, "clusters.a.error_cb: is a confluent-kafka Python callback or object"),
        (
            {"metadata.broker.list": "h:1"},
            "clusters.a.metadata.broker.list: is librdkafka's other name for bootstrap.servers",
        ),
        (
            {"sasl.oauthbearer.method": "oidc", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
            "clusters.a.sasl.oauthbearer.method: oidc needs sasl.oauthbearer.token.endpoint.url",
        ),
    ],
)
def test_client_properties_are_checked_at_load(props, expected):
    msg = problem(with_cluster(**props))
    assert msg.startswith(f"{SRC}: {expected}"), msg
    assert SECRET not in msg and "BOGUS" not in msg


def test_a_bad_certificate_file_is_named_by_its_key(tmp_path):
    junk = tmp_path / "ca.pem"
    junk.write_text("not a certificate\n")
    msg = problem(with_cluster(**{"security.protocol": "SSL", "ssl.ca.location": str(junk)}))
    assert (
        msg == f"{SRC}: clusters.a.ssl.ca.location: cannot be loaded: not a valid certificate, key or "
        "keystore, or a wrong password for it"
    )


def test_a_value_from_the_environment_is_never_quoted_from_librdkafka():
    msg = problem(with_cluster(**{"security.protocol": "${PROTO}"}), {"PROTO": SECRET})
    assert msg.startswith(f"{SRC}: clusters.a.security.protocol: has a value librdkafka does not accept")
    assert SECRET not in msg


@pytest.mark.parametrize(
    "servers, why",
    [
        (":::", "is not host:port (an IPv6 address needs brackets: [address]:port)"),
        ("h1", "has no port"),
        ("h1:", "has no port"),
        (":9092", "has no host"),
        ("h1:70000", "has a port that is not a number from 1 to 65535"),
        ("h1:0", "has a port that is not a number from 1 to 65535"),
        ("h1:x", "has a port that is not a number from 1 to 65535"),
        ("h/1:9092", "has a host name with characters other than [A-Za-z0-9._-]"),
        ("[::1", "has an unclosed ["),
        ("[zz]:1", "has no valid IPv6 address between [ and ]"),
        ("FOO://h:1", "has an unknown protocol prefix"),
        ("h1:9092,h2", "entry 2 of 2 has no port"),
        ("h1:9092,", "entry 2 of 2 is empty"),
    ],
)
def test_malformed_bootstrap_servers_are_refused(servers, why):
    assert problem(with_cluster(**{"bootstrap.servers": servers})) == (
        f"{SRC}: clusters.a.bootstrap.servers: {why}; allowed: a comma-separated list of host:port "
        "(an IPv6 address as [address]:port), each port 1-65535"
    )


@pytest.mark.parametrize(
    "servers",
    [
        "h1:9092",
        "h1:9092, h2:9093",
        "[::1]:9092",
        "10.0.0.1:1",
        "PLAINTEXT://h:1,SASL_SSL://k_1.example.com:65535",
        "[fe80::1%eth0]:9092",
    ],
)
def test_wellformed_bootstrap_servers_are_accepted(servers):
    assert (
        parse_config(with_cluster(**{"bootstrap.servers": servers}), SRC, {}).cluster("a").bootstrap_servers == servers
    )


def test_valid_security_settings_pass_without_connecting(tmp_path):
    ca = tmp_path / "ca"
    ca.mkdir()
    props = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "${PW}",
        "ssl.ca.location": str(ca),
        "client.rack": "r1",
        "linger.ms": 5,
        "isolation.level": "read_committed",
        "debug": "all",
    }
    started = time.monotonic()
    cfg = parse_config(with_cluster(**props), SRC, {"PW": SECRET})
    assert time.monotonic() - started < 5
    assert cfg.cluster("a").properties["sasl.password"] == SECRET


def test_loading_opens_no_connection_not_even_for_an_oidc_token():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.5)
        port = server.getsockname()[1]
        props = {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": f"http://127.0.0.1:{port}/token",
            "sasl.oauthbearer.client.id": "c",
            "sasl.oauthbearer.client.secret": SECRET,
        }
        assert parse_config(with_cluster(**props), SRC, {}).cluster("a").properties == props
        with pytest.raises(socket.timeout):
            server.accept()

"""Where a secret's value may go when the file is loaded (R-CFG-5, issue #31), one test per hole:

1. a secret key whose value is not a single value is refused by its kind, and
   a short secret never garbles the words of a message (`sp***rk.conf`);
2. a secret's value that a YAML alias, a copy or one environment variable
   also puts where values are shown is refused, naming both keys, never the value;
3. a control character in a client property is refused, naming the key (and the
   character, unless the value is a secret).

The last tests run the CLI in process: the exact refusal line, and `link list`
never printing an aliased secret.
"""

from __future__ import annotations

import datetime

import pytest
from click.testing import CliRunner
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from mirror_pipeline.cli import cli
from mirror_pipeline.config.loader import load_config, parse_config
from mirror_pipeline.model.errors import ConfigError
from tests.config_files import config_problem

SRC = "mirror.yaml"
SECRET = "s3cr3t-Pa55word"
REUSED = (
    "has the same value as the secret {at} (a YAML alias, a copy or the same environment variable?); "
    "what is not secret is shown (link list and describe, topic and client names, logs), so it must not "
    "hold a secret: give it a value of its own"
)
CONTROL_ALLOWED = "allowed: printable text (line breaks and tabs only in PEM text, a property ending in .pem)"
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "mirror"}


def base(**link_settings) -> dict:
    return {
        "clusters": {"west": {"bootstrap.servers": "h1:9092"}, "east": {"bootstrap.servers": "h2:9092"}},
        "links": {"w2e": {"source": "west", "destination": "east", **link_settings}},
    }


def with_west(data: dict | None = None, **props) -> dict:
    data = data or base()
    data["clusters"]["west"].update(props)
    return data


def problem(data, env=None) -> str:
    return config_problem(data, env, SRC)


def load_problem(tmp_path, text, env=None) -> str:
    path = tmp_path / SRC
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path, env or {})
    return str(err.value).replace(f"{path}: ", f"{SRC}: ")


# --- 1. a secret that is not a single value; short secrets ---------------------------------


@pytest.mark.parametrize("value, kind", [(["a", "b"], "a list"), ({"a": "b"}, "a mapping"), (None, "null")])
def test_a_spark_secret_that_is_not_a_single_value_is_refused_by_its_kind(value, kind):
    data = base()
    data["spark"] = {"conf": {"spark.ssl.keyPassword": value}}
    assert problem(data) == (
        f"{SRC}: spark.conf.spark.ssl.keyPassword: expected a single value (string, number or boolean), got {kind}"
    )


def test_a_client_secret_that_is_a_list_gets_no_hint_to_join_it():
    assert problem(with_west(**{"sasl.password": ["a", "b"]})) == (
        f"{SRC}: clusters.west.sasl.password: expected a single value (string, number or boolean), got a list"
    )
    # A property that takes a list still gets the hint.
    assert problem(with_west(**{"bootstrap.servers": ["h1:9092", "h2:9092"]})).endswith(
        "got a list; write a list as one comma-separated string"
    )


def test_a_one_letter_secret_does_not_garble_other_messages():
    data = with_west(**SASL, **{"sasl.password": "e"})
    data["links"]["w2e"]["mirror.chunk.max.records"] = "ten"
    data["links"]["w2e"]["mirror.state.topic"] = "a topic"
    assert problem(data) == (
        f"{SRC}: links.w2e.mirror.chunk.max.records: expected a whole number, got 'ten'\n"
        f"{SRC}: links.w2e.mirror.state.topic: expected up to 249 characters from [A-Za-z0-9._-], got 'a topic'"
    )


def test_a_short_secret_is_still_hidden_where_a_message_quotes_it_whole(tmp_path):
    text = (
        "clusters:\n  west: {bootstrap.servers: 'h1:9092', ssl.key.password: &pw 'ok'}\n"
        "  east: {bootstrap.servers: 'h2:9092'}\n"
        "links:\n  w2e: {source: west, destination: east, mirror.chunk.max.records: *pw}\n"
    )
    msg = load_problem(tmp_path, text)
    assert f"{SRC}: links.w2e.mirror.chunk.max.records: expected a whole number, got '***'" in msg
    assert "'ok'" not in msg


# --- 2. a secret's value where values are shown -------------------------------------------------

ALIASED = """\
clusters:
  west:
    bootstrap.servers: h1:9092
    security.protocol: SASL_PLAINTEXT
    sasl.mechanism: PLAIN
    sasl.username: mirror
    sasl.password: &p hunter2secret
  east:
    bootstrap.servers: h2:9092
links:
  w2e:
    source: west
    destination: east
"""


def test_an_aliased_secret_as_a_prefix_is_refused_naming_both_keys(tmp_path):
    msg = load_problem(tmp_path, ALIASED + "    cluster.link.prefix: *p\n")
    assert msg == f"{SRC}: links.w2e.cluster.link.prefix: " + REUSED.format(at="clusters.west.sasl.password")


@pytest.mark.parametrize(
    "where, yaml_text",
    [
        ("defaults.cluster.link.prefix", "defaults: {cluster.link.prefix: *p}\n"),
        ("clusters.east.client.id", None),
        ("spark.conf.spark.app.name", "spark: {conf: {spark.app.name: *p}}\n"),
        (
            "links.w2e.auto.create.mirror.topics.filters.topicFilters[0].name",
            "    auto.create.mirror.topics.filters: {topicFilters: [{name: *p, patternType: LITERAL}]}\n",
        ),
    ],
)
def test_an_aliased_secret_is_refused_wherever_it_would_be_shown(tmp_path, where, yaml_text):
    text = (
        ALIASED.replace("    bootstrap.servers: h2:9092\n", "    bootstrap.servers: h2:9092\n    client.id: *p\n")
        if yaml_text is None
        else ALIASED + yaml_text
    )
    msg = load_problem(tmp_path, text)
    assert f"{SRC}: {where}: " + REUSED.format(at="clusters.west.sasl.password") in msg.splitlines()
    assert "hunter2secret" not in msg


def test_a_shown_value_aliased_into_a_secret_key_is_refused_too(tmp_path):
    text = ALIASED.replace("    sasl.password: &p hunter2secret", "    client.id: &c app-7\n    sasl.password: *c")
    assert load_problem(tmp_path, text) == (
        f"{SRC}: clusters.west.client.id: " + REUSED.format(at="clusters.west.sasl.password")
    )


def test_a_secret_as_a_name_is_refused_without_the_name():
    data = with_west(**SASL, **{"sasl.password": SECRET})
    data["links"][SECRET] = {"source": "west", "destination": "east", "cluster.link.prefix": "x."}
    msg = problem(data)
    assert msg == f"{SRC}: links: a key " + REUSED.format(at="clusters.west.sasl.password")


def test_one_environment_variable_for_a_secret_and_a_shown_value_is_refused():
    data = with_west(**SASL, **{"sasl.password": "${PW}", "client.id": "${PW}"})
    assert problem(data, {"PW": SECRET}) == (
        f"{SRC}: clusters.west.client.id: " + REUSED.format(at="clusters.west.sasl.password")
    )


def test_two_environment_variables_with_one_value_are_refused_as_expanded():
    data = with_west(**SASL, **{"sasl.password": "${PW}", "client.id": "${ID}"})
    msg = problem(data, {"PW": SECRET, "ID": SECRET})
    assert msg == f"{SRC}: clusters.west.client.id: " + REUSED.format(at="clusters.west.sasl.password")


def test_a_secret_inside_a_jaas_like_line_counts_as_a_secret():
    data = with_west(**{"sasl.oauthbearer.config": "principal=p scope=${TOKEN}", "client.rack": "${RACK}"})
    msg = problem(data, {"TOKEN": SECRET, "RACK": SECRET})
    assert msg == f"{SRC}: clusters.west.client.rack: " + REUSED.format(at="clusters.west.sasl.oauthbearer.config")


def test_distinct_values_load_and_link_list_data_hold_no_secret():
    data = with_west(base(**{"cluster.link.prefix": "west."}), **SASL, **{"sasl.password": SECRET})
    cfg = parse_config(data, SRC, {})
    assert cfg.link("w2e").prefix == "west." and cfg.cluster("west").properties["sasl.password"] == SECRET


# --- 3. control characters in client properties -------------------------------------------


@pytest.mark.parametrize(
    "key, value, said",
    [
        ("client.rack", "r\x1b[31m", "a control character (U+001B)"),
        ("client.id", "a\tb\x7f", "control characters (U+0009, U+007F)"),
        ("sasl.username", "mir\x00ror", "a control character (U+0000)"),
        ("client.id", "a\x85b", "a control character (U+0085)"),
    ],
)
def test_a_control_character_is_refused_naming_key_and_character(key, value, said):
    assert problem(with_west(**{**SASL, "sasl.password": SECRET, key: value})) == (
        f"{SRC}: clusters.west.{key}: holds {said}; {CONTROL_ALLOWED}"
    )


@pytest.mark.parametrize("value", ["pw\x00x", "p\nw", "\x1b[2Jpw", "pw\x9b"])
def test_a_control_character_in_a_secret_is_refused_without_saying_which(value):
    # One line only: the password is probed without it, so it does not read as missing.
    assert problem(with_west(**SASL, **{"sasl.password": value})) == (
        f"{SRC}: clusters.west.sasl.password: holds a control character; {CONTROL_ALLOWED}"
    )


def test_a_control_character_from_the_environment_is_refused_too():
    msg = problem(with_west(**SASL, **{"sasl.password": "${PW}"}), {"PW": f"{SECRET}\x00"})
    assert msg == f"{SRC}: clusters.west.sasl.password: holds a control character; {CONTROL_ALLOWED}"


def test_a_block_scalars_last_newline_is_named(tmp_path):
    text = ALIASED.replace("sasl.password: &p hunter2secret", "sasl.password: |\n      hunter2secret")
    assert load_problem(tmp_path, text) == (
        f"{SRC}: clusters.west.sasl.password: holds a control character; it ends with a line break, as a "
        "YAML block scalar (| or >) or a value read from a file keeps one: write |- or >-, or strip it; "
        f"{CONTROL_ALLOWED}"
    )


def test_a_bootstrap_list_with_a_newline_gets_one_problem():
    assert problem(with_west(**{"bootstrap.servers": "h1:9092\n"})) == (
        f"{SRC}: clusters.west.bootstrap.servers: holds a control character (U+000A); it ends with a line break, "
        "as a YAML block scalar (| or >) or a value read from a file keeps one: write |- or >-, or strip it; "
        f"{CONTROL_ALLOWED}"
    )


def test_pem_text_may_span_lines():
    pem = _ca_certificate_pem()
    assert "\n" in pem
    cfg = parse_config(with_west(**{"security.protocol": "SSL", "ssl.ca.pem": pem}), SRC, {})
    assert cfg.cluster("west").properties["ssl.ca.pem"] == pem
    assert problem(with_west(**{"security.protocol": "SSL", "ssl.ca.pem": pem + "\x00"})) == (
        f"{SRC}: clusters.west.ssl.ca.pem: holds a control character (U+0000); {CONTROL_ALLOWED}"
    )


def _ca_certificate_pem() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()


# --- the CLI ---------------------------------------------------------------------------------


def test_cli_refuses_a_list_secret_with_one_exact_line(tmp_path, monkeypatch):
    monkeypatch.delenv("MIRROR_PIPELINE_DEBUG", raising=False)
    path = tmp_path / SRC
    path.write_text(
        "clusters:\n  west: {bootstrap.servers: 'h1:9092'}\nlinks: {}\n"
        "spark:\n  conf:\n    spark.ssl.keyPassword: [a, b]\n"
    )
    result = CliRunner().invoke(cli, ["link", "list", "--config", str(path)])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {path}: spark.conf.spark.ssl.keyPassword: expected a single value "
        "(string, number or boolean), got a list\n"
    )
    assert result.stdout == ""


def test_cli_link_list_never_shows_an_aliased_secret(tmp_path, monkeypatch):
    monkeypatch.delenv("MIRROR_PIPELINE_DEBUG", raising=False)
    path = tmp_path / SRC
    path.write_text(ALIASED + "    cluster.link.prefix: *p\n")
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(cli, ["link", "list", "--config", str(path), *extra])
        assert result.exit_code == 1
        assert "hunter2secret" not in result.stdout + result.stderr
        assert (
            "links.w2e.cluster.link.prefix: has the same value as the secret clusters.west.sasl.password"
            in result.stderr
        )
    # The same file with a prefix of its own lists it.
    path.write_text(ALIASED + "    cluster.link.prefix: west.\n")
    result = CliRunner().invoke(cli, ["link", "list", "--config", str(path)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == ["LINK  SOURCE  DESTINATION  PREFIX", "w2e   west    east         west."]
    assert "hunter2secret" not in result.stdout

"""Fuzzing the configuration loader: every input is either a valid config or one clear ConfigError.

Each case mutates a valid two-cluster, one-link file: random keys (SPEC §2 link
settings, librdkafka and made-up client properties, unknown top-level keys)
with random typed values (JSON-quoted) or raw YAML text, deep nesting, huge
numbers, odd strings, `${VAR}` references, and secrets planted in secret keys
(literally and through `${VAR}`) that YAML aliases then carry elsewhere.

Asserted for every case: `load_config` returns a config or raises ConfigError,
and nothing else; it returns within `CASE_SECONDS`; every line of the message
starts with the file name and is of bounded length; no planted secret appears
in any message. A few hundred cases by default; set MIRROR_PIPELINE_FUZZ_CASES
for a longer run (e.g. 2000). With `-s`, a summary of outcomes is printed.
"""

from __future__ import annotations

import collections
import json
import os
import re
import string
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirror_pipeline.config.link_settings import LinkSettings
from mirror_pipeline.config.loader import PipelineConfig, load_config, parse_config
from mirror_pipeline.model.errors import ConfigError
from tests.fuzzing import described, forget_case, note_case, time_limit

CASES = int(os.environ.get("MIRROR_PIPELINE_FUZZ_CASES", "300"))
CASE_SECONDS = 10
MAX_LINE = 2000
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
OUTCOMES: collections.Counter = collections.Counter()

LINK_KEYS = sorted(f.alias for f in LinkSettings.model_fields.values()) + [
    "source",
    "destination",
    "name",
    "cluster.link.prefx",
    "mirror.unknown.setting",
]
CLUSTER_KEYS = [
    "bootstrap.servers",
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.keystore.location",
    "ssl.key.password",
    "ssl.key.pem",
    "ssl.certificate.location",
    "client.id",
    "linger.ms",
    "acks",
    "enable.idempotence",
    "fetch.max.bytes",
    "message.max.bytes",
    "metadata.broker.list",
    "error_cb",
    "logger",
    "sasl.oauthbearer.method",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.jaas.config",
    "socket.timeout.ms",
    "debug",
    "group.id",
    "isolation.level",
    "ssl.endpoint.identification.algorithm",
    "foo.bar",
    "Bad.Key",
    "ssl.truststore.location",
    "interceptors",
    "x" * 120,
]
SPARK_KEYS = ["spark.executor.cores", "spark.ssl.keyPassword", "spark.app.name", "master", "conf", "x"]
TOP_KEYS = ["clusters", "defaults", "links", "spark", "link", "extra"]
ODD_STRINGS = [
    "",
    " ",
    ".",
    "..",
    "/",
    "a/b",
    "\x00",
    "é",
    "💥",
    "${X",
    "${1BAD}",
    "$${LITERAL}",
    "${UNSET_VAR}",
    "${HOST}:${PORT}",
    "${SECRET_VAR}",
    "$${",
    "${}",
    ":::",
    "h1",
    "h1:70000",
    "h1:0",
    "[::1]:9092",
    "[::1",
    "PLAINTEXT://h:1",
    "h:1,",
    "SASL_SSL",
    "BOGUS",
    "PLAIN",
    "oidc",
    "probe",
    "/nonexistent",
    "/etc/hostname",
    "/dev/zero",
    "/tmp",
    "this.X",
    "os.path.X",
    "yaml.YAMLObject",
    "tests.unit.custom_policy.UpperCaseAliasPolicy",
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "_mirror-pipeline.state",
    "_mirror-pipeline_state",
    "true",
    "false",
    "yes",
    "30s",
    "-5",
    "0x1F",
    "1:30",
    "a" * 300,
    "{nope",
    '{"aclFilters": []}',
    '{"topicFilters": [{"name": "*", "patternType": "LITERAL"}]}',
    "[" * 3000 + "]" * 3000,
    '{"a":' * 900 + "1" + "}" * 900,
    "9" * 5000,
]
NUMBERS = [0, 1, -1, 2**31 - 1, 2**31, 2**40, 2**63 - 1, 2**63, 10**30, -(10**30)]
ALIASES = ["*pw", "*pw2", "*pw3", "[*pw, *pw2]", "{k: *pw}", "*cluster"]
# Raw YAML text: printable characters (control characters only ever give "invalid YAML").
RAW_CHARS = st.characters(blacklist_categories=("Cc", "Cs"))
# Typed text: anything but lone surrogates (those are refused at once; ODD_STRINGS has one).
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
SECRET = st.text(string.ascii_letters + string.digits, min_size=6, max_size=12).map(lambda s: f"Sx{s}Qz")

scalars = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(-(2**70), 2**70),
    st.sampled_from(NUMBERS),
    st.floats(),
    TEXT,
    st.sampled_from(ODD_STRINGS + ["\ud800"]),
)
typed_values = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(TEXT, kids, max_size=4), max_leaves=12
)
SECTIONS = {
    "cluster_a": CLUSTER_KEYS,
    "cluster_b": CLUSTER_KEYS,
    "spark_conf": SPARK_KEYS,
    "defaults": LINK_KEYS,
    "link": LINK_KEYS,
    "top": TOP_KEYS,
}


@st.composite
def value_text(draw) -> str:
    """A value as YAML text: JSON-quoted (typed), raw (untyped), an alias, nesting or a huge number."""
    kind = draw(st.sampled_from(["typed"] * 6 + ["raw", "alias", "nested", "digits"]))
    if kind == "typed":
        return json.dumps(draw(typed_values))
    if kind == "raw":
        return draw(st.text(RAW_CHARS, max_size=30)) or "~"
    if kind == "alias":
        return draw(st.sampled_from(ALIASES))
    if kind == "nested":
        depth = draw(st.sampled_from([1, 2, 5, 20, 30, 33, 120]))
        return draw(st.sampled_from(["[" * depth + "]" * depth, "{a: " * depth + "1" + "}" * depth]))
    return draw(st.sampled_from(["", "-"])) + "9" * draw(st.sampled_from([20, 400, 4400, 6000]))


@st.composite
def mutation(draw) -> tuple[str, str, str]:
    section = draw(st.sampled_from(sorted(SECTIONS)))
    key = draw(st.sampled_from(SECTIONS[section]) | TEXT.map(lambda t: t[:12]))
    return section, key, draw(value_text())


@st.composite
def config_case(draw):
    """The valid base file with up to five keys set (added or replaced) to drawn values."""
    secrets = [draw(SECRET) for _ in range(3)]
    env = {"SECRET_VAR": secrets[1], "HOST": "h9", "PORT": "9092", "EMPTY": ""}
    sections = {
        "cluster_a": {
            "bootstrap.servers": '"h1:9092"',
            "sasl.password": f'&pw "{secrets[0]}"',
            "ssl.key.password": '&pw2 "${SECRET_VAR}"',
        },
        "cluster_b": {"bootstrap.servers": '"h2:9092"'},
        "spark_conf": {"spark.ssl.keyPassword": f'&pw3 "{secrets[2]}"'},
        "defaults": {},
        "link": {"source": "a", "destination": "b"},
        "top": {},
    }
    for section, key, value in draw(st.lists(mutation(), max_size=5)):
        sections[section][key] = value

    def block(section, indent):
        return "".join(f"{' ' * indent}{json.dumps(k)}: {v}\n" for k, v in sections[section].items())

    # A top-level key that names a section replaces the whole section.
    whole = {k: sections["top"].pop(k) for k in ("clusters", "spark", "defaults", "links") if k in sections["top"]}
    parts = {
        "clusters": "\n  a:\n" + block("cluster_a", 4) + "  b: &cluster\n" + block("cluster_b", 4),
        "spark": "\n  conf:\n" + block("spark_conf", 4),
        "defaults": "\n" + block("defaults", 2),
        "links": "\n  l:\n" + block("link", 4),
    }
    text = "".join(f"{name}:" + (f" {whole[name]}\n" if name in whole else part) for name, part in parts.items())
    text += block("top", 0)
    return text, env, secrets


def outcome(run, source: str, secrets: list[str]) -> str:
    """Runs one case and checks its outcome; the kind of outcome, for the summary."""
    with time_limit(CASE_SECONDS):
        try:
            result = run()
        except ConfigError as exc:
            error = exc
        else:
            assert isinstance(result, PipelineConfig)
            return "accepted"
    message = str(error)
    assert error.__cause__ is None
    for line in message.splitlines():
        assert line.startswith(f"{source}: "), line[:300]
        assert len(line) <= MAX_LINE, line[:300]
    for secret in secrets:
        assert secret not in message, f"secret leaked: {message[:2000]}"
    first = message.splitlines()[0].removeprefix(f"{source}: ")
    first = re.sub(r"line \d+, column \d+", "line L, column C", first)
    first = re.sub(r"'[^']*'|\d{3,}", "…", first.split(";")[0])
    return "refused: " + first.encode("ascii", "backslashreplace").decode()[:100]


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)
    if OUTCOMES:
        print(f"\nconfig fuzz: {sum(OUTCOMES.values())} cases")
        verdicts = collections.Counter(kind.split(":")[0] for kind in OUTCOMES.elements())
        print("  " + ", ".join(f"{kind}: {count}" for kind, count in verdicts.items()))
        for kind, count in OUTCOMES.most_common(40):
            print(f"  {count:6d}  {kind}")


@pytest.mark.timeout(max(600, CASES))
def test_every_mutated_file_is_valid_or_one_clear_error(workdir):
    path = workdir / "mirror.yaml"

    @FUZZ
    @given(config_case())
    def case(drawn):
        text, env, secrets = drawn
        path.write_text(text)
        note_case(f"{text}\n# environment: {env!r}")
        OUTCOMES[outcome(lambda: load_config(path, env), str(path), secrets)] += 1

    case()
    forget_case()
    # The generator is not degenerate: it produced accepted files and refused ones.
    kinds = {kind.split(":")[0] for kind in OUTCOMES if not kind.startswith("python")}
    assert {"accepted", "refused"} <= kinds, OUTCOMES
    assert not any(re.search(r"Traceback", kind) for kind in OUTCOMES)


HUGE = [10**5000, -(10**5000), 2**63, float("inf"), float("nan"), b"bytes", {1, 2}, ("t",), object()]


@pytest.mark.timeout(max(600, CASES))
def test_parsed_mappings_with_python_values_are_valid_or_one_clear_error(workdir):
    """`parse_config` callers can pass what YAML never yields: huge ints, bytes, sets, cycles."""
    keys = st.sampled_from(LINK_KEYS + CLUSTER_KEYS) | st.sampled_from([10**5000, 7, None, ("t",), 1.5, "\ud800"])
    values = st.one_of(st.sampled_from(HUGE), typed_values)

    @FUZZ
    @given(
        st.lists(st.tuples(st.sampled_from(["a", "defaults", "l", "spark"]), keys, values), max_size=5),
        st.integers(0, 30).map(lambda n: n == 7),
        SECRET,
    )
    def case(changes, cyclic, secret):
        data = {
            "clusters": {
                "a": {"bootstrap.servers": "h1:9092", "sasl.password": secret},
                "b": {"bootstrap.servers": "h2:9092"},
            },
            "defaults": {},
            "links": {"l": {"source": "a", "destination": "b"}},
            "spark": {"conf": {}},
        }
        where = {
            "a": data["clusters"]["a"],
            "defaults": data["defaults"],
            "l": data["links"]["l"],
            "spark": data["spark"]["conf"],
        }
        for section, key, value in changes:
            where[section][key] = value
        if cyclic:
            data["links"]["l"]["acl.filters"] = loop = {}
            loop["self"] = loop
        note_case(described(data))
        OUTCOMES["python: " + outcome(lambda: parse_config(data, "cfg", {}), "cfg", [secret])] += 1

    case()
    forget_case()

"""Fuzzing the command line: every argv ends as exit 0, 1 or 2 with one clear message, offline.

Each case draws one subcommand (every leaf of `mirror-pipeline --help`, plus
bare groups, unknown commands and root flags) and an argv for it: option
values that look valid (names Kafka takes, numbers in range, the link of the
config) or hostile ones (control characters, NUL, lone surrogates, bidi
overrides, 10,000-character strings, nan/inf/-1/10**25, option-looking
values), with options left out, repeated, given as `--opt=value`, unknown
options, stray tokens, `--`, a cut-off last token, and `--json` on or off.

Nothing can reach Kafka or start a process: the config's clusters sit on
127.0.0.1:1, and every engine verb the CLI calls (and Spark, the Dagster
launcher, the demo, local cluster start/stop and the jar download) is
replaced by a recorder that notes the call and raises
MirrorError("engine reached").

A third of the cases are "all-valid": every value is one the CLI documents as
valid, nothing is missing or extra; those must not be usage errors, so they
reach the engine (and its arguments get checked) for every verb.

Asserted for every case (see `check`): the exit code is 0, 1 or 2 (3 is an
internal error, 130 an interrupt: neither may happen); no exception escapes
the error boundary; no "Traceback"; a failure is ONE `error: ...` line on
stderr (one `{"error": "..."}` object with --json), nothing on stdout; no raw
control character (nor a bidi/format character, line separator or surrogate)
anywhere in the output; a usage error (2) reached nothing; an engine call
ends as exit 1 with its message; and the engine was only ever called with
arguments the CLI documents as valid (topic names `[A-Za-z0-9._-]{1,249}`
other than `.`/`..`, the config's link, partitions 0..2**31-1, offsets
0..2**63-1, finite timeouts 1..604800 s, ...), the very names and numbers
typed. An all-valid case is no usage error, and with --json a success prints
JSON. Each case has `CASE_SECONDS`.

Known CLI bugs are listed in `KNOWN_BUGS`: a case that shows exactly such a
bug is counted (and shown in the summary) rather than failed, and each bug
has its own reproducer test below, marked xfail(strict) so it turns red once
the bug is fixed and the entry can go.

A few hundred cases by default; set MIRROR_PIPELINE_FUZZ_CASES for a longer
run (e.g. 2000). With `-s`, a one-line summary is printed.
"""

from __future__ import annotations

import collections
import importlib
import inspect
import json
import math
import os
import re
import tempfile
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mirror_pipeline.cli.dagster_runs as dagster_runs
import mirror_pipeline.demo as demo_module
import mirror_pipeline.local.clusters as clusters
import mirror_pipeline.local.jars as jars
import mirror_pipeline.replication.spark_runner as spark_runner
from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.cli.values import MAX_OFFSET, MAX_PARTITION, MAX_TIMEOUT_S, TOPIC_CHARS
from mirror_pipeline.config.loader import PipelineConfig, SparkSettings
from mirror_pipeline.model.errors import MirrorError
from tests.config_files import write_pair_config
from tests.fuzzing import forget_case, note_case, time_limit

# `mirror_pipeline.cli` binds its commands over these module names (`cli.run` is the command): by module path.
cli_demo, cli_local, cli_run = (importlib.import_module(f"mirror_pipeline.cli.{m}") for m in ("demo", "local", "run"))

CASES = int(os.environ.get("MIRROR_PIPELINE_FUZZ_CASES", "300"))
CASE_SECONDS = 10
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.large_base_example,
    ],
)
LINK = "west-to-east"
ENGINE_MESSAGE = "engine reached"
STATS: dict[str, collections.Counter] = {
    "exit": collections.Counter(),
    "reached": collections.Counter(),
    "known": collections.Counter(),
    "tame": collections.Counter(),
}

# --- what is replaced: every way out of the process ------------------------------------------------

ENGINE_VERBS = [
    "list_mirrors",
    "describe_mirror",
    "create_mirror",
    "ensure_mirror",
    "mirror_lags",
    "pause",
    "resume",
    "promote",
    "failover",
    "preview_stop",
    "delete_mirrors",
    "run_cycle",
    "auto_create",
    "check_health",
    "health_changes",
    "sync_configs",
    "link_config_drift",
    "sync_offsets",
    "export_offsets",
    "translate_offset",
    "sync_acls",
    "acl_sync_status",
]
# (owner, attribute, name in the records): what the CLI modules imported by name, and the local clusters.
OTHER_EXITS = [
    (cli_run, "spark_session", "spark_session"),
    (spark_runner, "spark_session", "spark_session"),
    (demo_module, "spark_session", "spark_session"),
    (dagster_runs, "launch_stop_job", "launch_stop_job"),
    (cli_demo, "run_demo", "run_demo"),
    (demo_module, "run_demo", "run_demo"),
    (cli_demo, "describe_mirror", "describe_mirror"),
    (clusters.LocalKafka, "up", "LocalKafka.up"),
    (clusters.LocalKafka, "down", "LocalKafka.down"),
    (clusters.LocalKafka, "_start", "LocalKafka._start"),
    (clusters.LocalKafka, "_kill", "LocalKafka._kill"),
    (cli_local, "ensure_kafka_jars", "ensure_kafka_jars"),
    (clusters, "ensure_kafka_jars", "ensure_kafka_jars"),
    (jars, "ensure_kafka_jars", "ensure_kafka_jars"),
]
CALLS: list[tuple[str, dict | None]] = []  # (name, bound arguments, None when they did not fit the signature)


def recorder(name: str, original):
    signature = inspect.signature(original)

    def stub(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            CALLS.append((name, None))
        else:
            bound.apply_defaults()
            CALLS.append((name, dict(bound.arguments)))
        raise MirrorError(ENGINE_MESSAGE)

    return stub


# --- the commands --------------------------------------------------------------------------------

# option name -> (kind of value, required, repeatable); flags have kind None.
JSON = {"--json": (None, False, False)}
CONFIG = {"--config": ("config", False, False)}
NEEDS_LINK = {"--link": ("link", True, False)}
TOPICS = ("topic", -1)  # positional: kind, nargs (-1: any number)
COMMANDS: dict[tuple[str, ...], tuple[list, dict]] = {
    ("local", "install"): ([], {**JSON}),
    ("local", "up"): (
        [],
        {
            "--clusters": ("clusters", False, False),
            "--dir": ("dir", False, False),
            "--base-port": ("port", False, False),
            "--security": ("security", False, False),
            **JSON,
        },
    ),
    ("local", "status"): ([], {"--dir": ("dir", False, False), **JSON}),
    ("local", "down"): ([], {"--dir": ("dir", False, False), **JSON}),
    ("link", "list"): ([], {**CONFIG, **JSON}),
    ("link", "describe"): ([("link", 1)], {**CONFIG, **JSON}),
    ("link", "acls"): (
        [("link", 1)],
        {"--topic": ("topic", True, True), "--group": ("group", False, True), **CONFIG, **JSON},
    ),
    ("link", "sync-acls"): ([("link", 1)], {"--dry-run": (None, False, False), **CONFIG, **JSON}),
    ("mirror", "create"): ([("topic", 1)], {**NEEDS_LINK, "--mirror-topic": ("topic", False, False), **CONFIG, **JSON}),
    ("mirror", "list"): ([], {**NEEDS_LINK, **CONFIG, **JSON}),
    ("mirror", "describe"): ([("topic", 1)], {**NEEDS_LINK, **CONFIG, **JSON}),
    ("mirror", "pause"): ([TOPICS], {**NEEDS_LINK, "--all": (None, False, False), **CONFIG, **JSON}),
    ("mirror", "resume"): ([TOPICS], {**NEEDS_LINK, "--all": (None, False, False), **CONFIG, **JSON}),
    ("mirror", "promote"): (
        [TOPICS],
        {
            **NEEDS_LINK,
            "--all": (None, False, False),
            "--dry-run": (None, False, False),
            "--timeout": ("seconds", False, False),
            **CONFIG,
            **JSON,
        },
    ),
    ("mirror", "failover"): (
        [TOPICS],
        {**NEEDS_LINK, "--all": (None, False, False), "--dry-run": (None, False, False), **CONFIG, **JSON},
    ),
    ("mirror", "delete"): ([TOPICS], {**NEEDS_LINK, **CONFIG, **JSON}),
    ("run",): ([], {**NEEDS_LINK, "--mirror": ("topic", False, True), **CONFIG, **JSON}),
    ("offsets", "sync"): ([], {**NEEDS_LINK, "--mirror": ("topic", False, True), **CONFIG, **JSON}),
    ("offsets", "export"): (
        [],
        {**NEEDS_LINK, "--group": ("group", False, True), "--output": ("output", False, False), **CONFIG, **JSON},
    ),
    ("offsets", "translate"): (
        [],
        {
            **NEEDS_LINK,
            "--topic": ("topic", True, False),
            "--partition": ("partition", True, False),
            "--offset": ("offset", True, False),
            "--mode": ("mode", False, False),
            **CONFIG,
            **JSON,
        },
    ),
    ("demo",): ([], {"--records": ("records", False, False), "--config": ("demo_config", False, False)}),
}
GROUPS = sorted({path[0] for path in COMMANDS if len(path) > 1})

# --- values --------------------------------------------------------------------------------------

CONTROL = [
    "\x00",
    "\x07",
    "\x08",
    "\x1b",
    "\x1b[2J",
    "\x1b]0;pwned\x07",
    "\x1b[31mred",
    "\r",
    "\n",
    "\t",
    "\x7f",
    "\x85",
    "\x9b31m",
    "\u2028",
    "\u2029",
    "\u202e",
    "\u2066",
    "\u200b",
    "\ufeff",
    "\udcff",
    "\ud800",
]
ODD = [
    "",
    " ",
    "-",
    "--",
    "-1",
    "--link",
    "--json",
    "--help",
    "-h",
    "--all",
    ".",
    "..",
    "...",
    "/",
    "./x",
    "~",
    "~/x",
    "$HOME",
    "${X}",
    "%s",
    "{}",
    "'",
    '"',
    "\\",
    "a b",
    "a,b",
    "é",
    "Ω",
    "日本",
    "💥",
    "👨\u200d👩\u200d👧",
    "１２",
    "٣",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "Infinity",
    "1e309",
    "-0",
    "+0",
    "0x10",
    "0b1",
    "1_000",
    "1.5",
    "1e3",
    " 7",
    "7 ",
    "2147483647",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    str(10**25),
    "9" * 5000,
    "a" * 249,
    "a" * 250,
    "a" * 10_000,
    "é" * 300,
    "\x00" * 50,
    "orders\x00",
    "west-to-east\x1b[2J",
    "west-to-east\n",
]
NUMERIC = [
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "1e309",
    "-1e309",
    "-1",
    "-0",
    "+0",
    "0",
    "1",
    "+5",
    " 7",
    "7 ",
    "0x10",
    "0o7",
    "0b1",
    "1_000",
    "1.0",
    "1.5",
    "1e3",
    "1e-320",
    "١٢",
    "１２",
    "2147483647",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    str(10**25),
    str(-(10**25)),
    "9" * 101,
    "9" * 5000,
    "",
    " ",
]

hostile = st.one_of(
    st.sampled_from(CONTROL + ODD),
    st.text(st.characters(), max_size=30),
    st.builds(lambda a, c, b: a + c + b, st.text(max_size=8), st.sampled_from(CONTROL), st.text(max_size=8)),
    st.builds(lambda s, n: s * n, st.text(min_size=1, max_size=4), st.integers(50, 3000)),
)
valid_topic = st.one_of(
    st.sampled_from(
        [
            "orders",
            "payments.v1",
            "a",
            "A-b_c.d",
            "x" * 249,
            "_mirror-pipeline.state",
            "__consumer_offsets",
            "orders.mirror",
            "...",
            "-orders",
        ]
    ),
    st.from_regex(r"\A[A-Za-z0-9._-]{1,40}\Z").filter(lambda t: t not in (".", "..")),
)


def in_range(low, high):
    """Whole numbers from low to high, as a user may type them: plain, signed, padded, zero-filled."""
    plain = st.one_of(st.integers(low, high), st.sampled_from([low, high]))
    return st.one_of(
        plain.map(str), plain.map(lambda n: f"+{n}"), plain.map(lambda n: f" {n} "), plain.map(lambda n: f"00{n}")
    )


def number(low, high):
    edges = st.sampled_from([low - 1, low, high, high + 1]).map(str)
    return st.one_of(in_range(low, high), in_range(low, high), edges, st.sampled_from(NUMERIC), hostile)


def path_key(*keys: str):
    """A placeholder for a path in the work dir, filled in by `materialize`."""
    return st.sampled_from([("path", key) for key in keys])


# Values the CLI documents as valid: a case drawn only from these must not be a usage error.
VALID = {
    "topic": valid_topic,
    "link": st.just(LINK),
    "group": st.one_of(st.sampled_from(["orders-app", "g1", "a b", "é", "-g"]), st.text(min_size=1, max_size=20)),
    "mode": st.sampled_from(["exact", "timestamp"]),
    "partition": in_range(0, MAX_PARTITION),
    "offset": in_range(0, MAX_OFFSET),
    "records": in_range(1, 10_000_000),
    "clusters": in_range(1, clusters.MAX_CLUSTERS),
    "port": in_range(1024, 65535),
    "seconds": st.one_of(
        st.floats(1, MAX_TIMEOUT_S).map(repr),
        st.integers(1, MAX_TIMEOUT_S).map(str),
        st.sampled_from(["1", "604800", "1e2", " 5 ", "300.5", "+60"]),
    ),
    "config": path_key("config"),
    "demo_config": path_key("new", "config"),
    "output": path_key("out"),
    "dir": path_key("local"),
    "security": st.sampled_from(["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"]),
}
VALUES = {
    "topic": st.one_of(valid_topic, valid_topic, valid_topic, hostile),
    "link": st.one_of(
        st.just(LINK),
        st.just(LINK),
        st.just(LINK),
        st.sampled_from(["east-to-west", "west-to-east.", "WEST-TO-EAST", ".", "..", "x" * 300]),
        hostile,
    ),
    "group": st.one_of(VALID["group"], st.just(""), hostile),
    "mode": st.one_of(VALID["mode"], st.sampled_from(["EXACT", "Exact", "none", ""]), hostile),
    "partition": number(0, MAX_PARTITION),
    "offset": number(0, MAX_OFFSET),
    "records": number(1, 10_000_000),
    "clusters": number(1, clusters.MAX_CLUSTERS),
    "port": number(1024, 65535),
    "seconds": st.one_of(
        VALID["seconds"],
        st.sampled_from(["0", "0.999", "604800.0001", "1e-320", "5s", "1_0", "٣"]),
        st.floats().map(repr),
        st.sampled_from(NUMERIC),
        hostile,
    ),
    "config": st.one_of(
        path_key("config", "config", "config", "missing", "dir", "empty", "garbage", "devnull"), hostile
    ),
    "demo_config": st.one_of(path_key("new", "config", "nodir", "dir"), hostile),
    "output": st.one_of(path_key("out", "out", "nodir", "dir", "devnull"), hostile),
    "dir": st.one_of(path_key("local", "local", "file", "missing"), hostile),
    "security": st.one_of(VALID["security"], st.sampled_from(["SASL_SSL", "tls", "sasl", ""]), hostile),
}
EXTRAS = st.sampled_from(
    [
        ["--bogus"],
        ["--Link", "x"],
        ["-x"],
        ["--json=yes"],
        ["--help"],
        ["-h"],
        ["--version"],
        ["--"],
        ["--link"],
        ["--config"],
        ["-"],
        ["--debug"],
    ]
) | hostile.map(lambda t: [t])


@st.composite
def argv_case(draw):
    """(argv with path placeholders, whether the error must be JSON (True, False, None: either), tame).

    A tame case is a command with every value valid and nothing missing or extra: it must not be a usage error.
    """
    shape = draw(st.sampled_from(["tame"] * 15 + ["wild"] * 25 + ["group", "root", "unknown"]))
    if shape == "group":
        return [draw(st.sampled_from(GROUPS))] + draw(st.lists(EXTRAS, max_size=1).map(sum_lists)), None, False
    if shape == "root":
        return draw(st.sampled_from([[], ["--version"], ["-h"], ["--help"], ["--debug"], ["--bogus"]])), None, False
    if shape == "unknown":
        command = [draw(st.sampled_from(GROUPS + [""])), draw(hostile)]
        return command + draw(st.lists(EXTRAS, max_size=2).map(sum_lists)), None, False

    tame = shape == "tame"
    values = VALID if tame else VALUES
    path = draw(st.sampled_from(sorted(COMMANDS)))
    positionals, options = COMMANDS[path]
    given: list[list] = []  # positionals
    every = tame and "--all" in options and draw(st.booleans())  # tame: mirror topics or --all, never both
    for kind, nargs in positionals:
        if nargs == 1:
            count = 1 if tame or draw(st.integers(0, 14)) else draw(st.sampled_from([0, 2]))  # missing, one too many
        else:
            count = 0 if every else draw(st.sampled_from([1, 1, 2, 3] if tame else [0, 1, 1, 1, 2, 3]))
        given += [[draw(values[kind])] for _ in range(count)]
    chunks: list[list] = []  # options
    json_flag = False
    for name, (kind, required, repeatable) in options.items():
        if name == "--all" and tame:
            present = every
        elif required:
            present = tame or draw(st.integers(0, 12)) > 0
        else:
            present = draw(st.booleans())
        if not present:
            continue
        if kind is None:
            chunks.append([name])
            json_flag |= name == "--json"
            continue
        times = draw(st.sampled_from([1, 1, 1, 2, 3] if repeatable else [1] * 12 + [2]))
        for _ in range(times):
            value = draw(values[kind])
            glued = isinstance(value, str) and draw(st.integers(0, 7)) == 0
            chunks.append([f"{name}={value}"] if glued else [name, value])
    extras = draw(st.lists(EXTRAS, max_size=2)) if not tame and draw(st.integers(0, 4)) == 0 else []
    if tame and any(p[0].startswith("-") for p in given):
        # A positional that starts with '-' comes after `--`, and so after every option.
        chunks = draw(st.permutations(chunks)) + [["--"]] + given
    else:
        chunks = draw(st.permutations(chunks + given + extras))
    argv = list(path) + sum_lists(chunks)
    cut = not tame and draw(st.integers(0, 19)) == 0 and len(argv) > len(path)
    if cut:
        argv = argv[:-1]
    if json_flag and not extras and not cut and (tame or not any(p[0].startswith("-") for p in given)):
        expect_json = True  # (a positional like `--` or `--link` would change what the `--json` after it is)
    elif "--json" not in argv:
        expect_json = False
    else:
        expect_json = None
    return argv, expect_json, tame


def sum_lists(lists):
    return [token for chunk in lists for token in chunk]


# --- the work dir --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "a-dir").mkdir()
        (root / "local").mkdir()
        (root / "empty.yaml").write_text("")
        (root / "garbage.yaml").write_text("clusters: [\x07\n  - {: ::\n")
        write_pair_config(root / "mirror.yaml", "127.0.0.1:1", "127.0.0.1:1", LINK)
        yield root
    if sum(STATS["exit"].values()):
        exits = ", ".join(f"{code}: {n}" for code, n in sorted(STATS["exit"].items()))
        reached = STATS["reached"].copy()
        cases = reached.pop("cases", 0)
        verbs = ", ".join(f"{name} {n}" for name, n in reached.most_common())
        known = ", ".join(f"{name} {n}" for name, n in STATS["known"].most_common()) or "none"
        print(
            f"\ncli fuzz: {sum(STATS['exit'].values())} cases ({STATS['tame']['cases']} all-valid); "
            f"exit codes {{{exits}}}; engine reached in {cases} ({verbs or 'no verb'}); known bugs hit: {known}"
        )


def materialize(argv: list, root: Path) -> list[str]:
    paths = {
        "config": root / "mirror.yaml",
        "missing": root / "no-such.yaml",
        "dir": root / "a-dir",
        "empty": root / "empty.yaml",
        "garbage": root / "garbage.yaml",
        "devnull": Path(os.devnull),
        "new": root / "demo.yaml",
        "nodir": root / "no" / "such" / "file",
        "out": root / "plan.csv",
        "local": root / "local",
        "file": root / "mirror.yaml",
    }
    return [str(paths[t[1]]) if isinstance(t, tuple) else t for t in argv]


@pytest.fixture
def offline(workdir, monkeypatch):
    """The engine, Spark, Dagster, the demo and local clusters replaced by recorders; cwd in the work dir."""
    monkeypatch.chdir(workdir)
    for var in ("MIRROR_PIPELINE_DEBUG", "MIRROR_PIPELINE_CONFIG", "MIRROR_PIPELINE_LOCAL_DIR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(workdir / "dagster-home"))
    for verb in ENGINE_VERBS:
        monkeypatch.setattr(engine, verb, recorder(verb, getattr(engine, verb)))
    for owner, attribute, name in OTHER_EXITS:
        monkeypatch.setattr(owner, attribute, recorder(name, getattr(owner, attribute)))
    return workdir


# --- the properties ------------------------------------------------------------------------------


class CaseTimeout(BaseException):
    """Not an Exception: the CLI's error boundary must not turn it into an exit code."""


def unsafe_characters(text: str) -> list[str]:
    """Raw characters a terminal would act on: control characters but newline, format (bidi) characters,
    line/paragraph separators and lone surrogates."""
    return sorted({repr(c) for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs")})


def topic_problem(value) -> str | None:
    if not isinstance(value, str) or not 1 <= len(value) <= 249 or value in (".", ".."):
        return f"not a topic name: {value!r:.120}"
    if not all(TOPIC_CHARS.fullmatch(c) for c in value):
        return f"not a topic name: {value!r:.120}"
    return None


def whole(value, low, high) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def argument_problems(name: str, arguments: dict | None) -> list[str]:
    """What is wrong with the arguments an engine verb (or other replaced exit) was called with."""
    if arguments is None:
        return [f"{name}: called with arguments that do not fit its signature"]
    problems = []
    for key, value in arguments.items():
        if key == "config" and not isinstance(value, PipelineConfig):
            problems.append(f"config is {type(value).__name__}")
        elif key == "link" and value != LINK:  # the config's only link; anything else is refused by `load`
            problems.append(f"link {value!r:.120} is not a link of the config")
        elif key in ("source_topic", "topic") or (key == "mirror_topic" and value is not None):
            problems.append(topic_problem(value))
        elif key in ("mirrors", "topics") and value is not None:
            # `[]` for "every mirror" is launch_stop_job's way only; the engine takes None.
            if not isinstance(value, list) or (key == "mirrors" and not value):
                problems.append(f"{key} is {value!r:.120} (a non-empty list, or None for all)")
            else:
                problems += [topic_problem(v) for v in value]
                if len(set(value)) != len(value):
                    problems.append(f"{key} repeats a name: {value!r:.200}")
        elif key == "partition" and not whole(value, 0, MAX_PARTITION):
            problems.append(f"partition {value!r:.60}")
        elif key == "offset" and not whole(value, 0, MAX_OFFSET):
            problems.append(f"offset {value!r:.60}")
        elif key == "timeout_s" and not (
            isinstance(value, (int, float)) and math.isfinite(value) and 1 <= value <= MAX_TIMEOUT_S
        ):
            problems.append(f"timeout_s {value!r:.60}")
        elif (
            key == "groups"
            and value is not None
            and not (isinstance(value, list) and value and all(isinstance(g, str) and g for g in value))
        ):
            problems.append(f"groups {value!r:.200}")
        elif key == "mode" and value not in (None, "exact", "timestamp"):
            problems.append(f"mode {value!r:.60}")
        elif key == "records" and not whole(value, 1, 10_000_000):
            problems.append(f"records {value!r:.60}")
        elif key == "config_path" and name == "run_demo" and not (isinstance(value, Path) and value.parent.is_dir()):
            problems.append(f"demo config_path {value!r:.200}")
        elif key == "settings" and name == "spark_session" and not isinstance(value, SparkSettings):
            problems.append(f"spark settings {value!r:.120}")
        elif (
            key == "self"
            and isinstance(value, clusters.LocalKafka)
            and not (
                1 <= value.count <= clusters.MAX_CLUSTERS
                and 1024 <= value.base_port
                and value.base_port + (value.count - 1) * clusters.PORT_STRIDE + 1 <= 65535
            )
        ):
            problems.append(f"local clusters {value!r:.200}")
    return [f"{name}: {p}" for p in problems if p]


def is_group_help(argv: list[str], result) -> bool:
    """A group called without a command shows its help with exit 2 (click's way; see `exit_on_error`)."""
    return result.exit_code == 2 and result.stderr.startswith("Usage:") and argv in ([], *([g] for g in GROUPS))


def typed(argv: list[str]) -> tuple[set[str], set[int]]:
    """What the user typed: every token and `--opt=value` value, and the whole numbers among them."""
    words = set(argv) | {t.split("=", 1)[1] for t in argv if t.startswith("--") and "=" in t}
    numbers = {int(w.strip()) for w in words if re.fullmatch(r"\s*[+-]?[0-9]{1,100}\s*", w, re.ASCII)}
    return words, numbers


DEFAULTS = {"records": 20_000}  # `demo --records`


def passed_through(argv: list[str], calls) -> list[str]:
    """The names and numbers the engine got are those on the command line, not altered on the way."""
    words, numbers = typed(argv)
    broken = []
    for name, arguments in calls:
        for key, value in (arguments or {}).items():
            if key in ("source_topic", "topic", "mirror_topic", "mirrors", "topics", "groups", "link") and value:
                for item in value if isinstance(value, list) else [value]:
                    if item not in words:
                        broken.append(f"{name}: {key} {item!r:.80} is not what was typed")
            elif key in ("partition", "offset", "records") and value not in numbers and value != DEFAULTS.get(key):
                broken.append(f"{name}: {key} {value!r:.80} is not what was typed")
    return broken


def check(argv: list[str], expect_json: bool | None, result, calls, tame: bool = False) -> list[str]:
    """Every property a case must have; the list of those it breaks."""
    out, err, code = result.stdout, result.stderr, result.exit_code
    broken = []
    if tame and code == 2 and not (argv[:2] == ["local", "up"] and "past 65535" in err):
        broken.append(f"valid arguments refused as a usage error: {err[:300]!r}")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        broken.append(f"an exception escaped the error boundary: {type(result.exception).__name__}: {result.exception}")
    if code not in (0, 1, 2):
        broken.append(f"exit code {code}")
    if "Traceback" in out + err:
        broken.append("a traceback in the output")
    unsafe = unsafe_characters(out + err)
    if unsafe:
        broken.append(f"raw unsafe characters in the output: {', '.join(unsafe[:8])}")
    if code == 0:
        if err:
            broken.append(f"exit 0 with stderr {err[:200]!r}")
        if tame and expect_json:
            try:
                json.loads(out)
            except ValueError:
                broken.append(f"--json given, but the output is not one JSON document: {out[:200]!r}")
    elif not is_group_help(argv, result):
        lines = err.rstrip("\n").split("\n")
        if out:
            broken.append(f"a failure printed on stdout: {out[:200]!r}")
        if len(lines) != 1 or not err.endswith("\n"):
            broken.append(f"the error is not one line: {err[:300]!r}")
        first = lines[0]
        try:
            as_json = json.loads(first)
        except ValueError:
            as_json = None
        if as_json is not None:
            if not (
                isinstance(as_json, dict)
                and list(as_json) == ["error"]
                and isinstance(as_json["error"], str)
                and as_json["error"]
            ):
                broken.append(f'the JSON error is not {{"error": message}}: {first[:200]!r}')
            if expect_json is False:
                broken.append("a JSON error without --json")
        else:
            if not first.startswith("error: ") or len(first) <= len("error: "):
                broken.append(f"the error does not start with 'error: ': {first[:200]!r}")
            if expect_json is True:
                broken.append(f"--json given, but the error is text: {first[:200]!r}")
    if calls:
        if code == 2:
            broken.append(f"a usage error (exit 2) after reaching {', '.join(c[0] for c in calls)}")
        if code != 1 or ENGINE_MESSAGE not in err:
            broken.append(f"the engine's error did not end as exit 1 with its message (exit {code}: {err[:200]!r})")
        for name, arguments in calls:
            broken += argument_problems(name, arguments)
        broken += passed_through(argv, calls)
    return broken


# --- known CLI bugs: (id, what, does this case show it) --------------------------------------------


def _only(broken: list[str], *kinds: str) -> bool:
    return bool(broken) and all(b.startswith(kinds) for b in broken)


# Bugs the fuzz test found and that are fixed keep their reproducer tests below;
# a new one goes here while it is open: (id, what, does this case show it).
KNOWN_BUGS: list[tuple[str, str, Callable]] = []


def known_bug(argv: list[str], result, broken: list[str]) -> str | None:
    for bug_id, _, shows in KNOWN_BUGS:
        if shows(argv, result, broken):
            return bug_id
    return None


# --- the tests -----------------------------------------------------------------------------------


@pytest.mark.timeout(max(600, CASES))
def test_every_argv_ends_as_one_clear_outcome(offline):
    runner = CliRunner()

    @FUZZ
    @given(argv_case())
    def case(drawn):
        template, expect_json, tame = drawn
        argv = materialize(template, offline)
        CALLS.clear()
        note_case(repr(argv))
        with time_limit(CASE_SECONDS, CaseTimeout):
            result = runner.invoke(cli, argv, catch_exceptions=True)
        calls = list(CALLS)
        broken = check(argv, expect_json, result, calls, tame)
        STATS["exit"][result.exit_code] += 1
        STATS["tame"]["cases"] += tame
        if calls:
            STATS["reached"]["cases"] += 1
            STATS["reached"].update({name for name, _ in calls})
        if broken:
            bug = known_bug(argv, result, broken)
            if bug is not None:
                STATS["known"][bug] += 1
                return
        assert not broken, (
            f"argv {argv!r:.2000}\nexit {result.exit_code}\nstdout {result.stdout[:1000]!r}\n"
            f"stderr {result.stderr[:1000]!r}\nbroken:\n  " + "\n  ".join(broken)
        )

    case()
    forget_case()
    # The generator is not degenerate: it made successes, failures, usage errors and engine calls.
    assert {0, 1, 2} <= set(STATS["exit"]), STATS["exit"]
    assert STATS["reached"]["cases"] > 0, STATS["reached"]


# --- what the fuzz test found, fixed: one reproducer each ----------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["link", "list", "--config", "mirror\x00.yaml"],
        ["mirror", "list", "--link", LINK, "--config", "\ud800"],
        ["local", "status", "--dir", "kafka\x00"],
        ["offsets", "export", "--link", LINK, "--output", "plan\x00.csv"],
        ["demo", "--config", "demo\x00.yaml"],
    ],
    ids=["config-nul", "config-surrogate", "dir-nul", "output-nul", "demo-config-nul"],
)
def test_a_path_with_nul_or_a_lone_surrogate_is_a_usage_error(offline, argv):
    CALLS.clear()
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("error: Invalid value for '--") and result.stderr.count("\n") == 1, result.stderr
    assert not CALLS


@pytest.mark.parametrize(
    "argv",
    [
        ["link", "list", "--config", "no\nsuch.yaml"],
        ["demo", "extra\nargument"],
    ],
    ids=["config-not-found", "unexpected-extra-argument"],
)
def test_a_newline_in_a_value_is_escaped_in_the_one_error_line(offline, argv):
    CALLS.clear()
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code in (1, 2)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "\\n" in result.stderr

"""The Apache Kafka jars behind the embedded local clusters, fetched with Maven.

Kafka is not a Python package, and shipping a tarball would pin a download
mirror; Maven Central is the one stable source. `deploy/kafka/pom.xml` pins
the versions and this module turns it into one flat runtime classpath in a
per-user cache, so a fresh checkout pays the download once and every later
`local up` starts in seconds.

Main classes on that classpath that other modules rely on:

- `kafka.Kafka` -- the broker/controller (`server.properties` as its argument);
- `kafka.tools.StorageTool` -- formats KRaft storage (`format --standalone ...`);
- `org.apache.kafka.tools.consumer.group.ConsumerGroupCommand` --
  what `kafka-consumer-groups.sh` runs;
- `org.apache.kafka.connect.mirror.MirrorMaker` -- MirrorMaker 2's dedicated
  mode (`connect-mirror-maker.sh`), the reference run for benchmarks.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from mirror_pipeline.config.machine_paths import cache_root, find_java
from mirror_pipeline.model.errors import LocalClusterError

#: Fallback when the pom cannot be read; keep equal to `<kafka.version>` in the pom.
KAFKA_VERSION = "4.1.1"

POM_ENV = "MIRROR_PIPELINE_KAFKA_POM"

#: Log4j2 config for short-lived tools: warnings and errors on stderr only.
TOOLS_LOG4J = Path(__file__).with_name("log4j2-tools.properties")

_STAMP = ".complete"
_MAVEN_TAIL_LINES = 40


def pom_path() -> Path:
    """The pom listing the jars: env override, else `deploy/kafka/pom.xml` in the checkout.

    The package is installed editable, so the checkout is three levels above
    this file; the env override covers any other layout.
    """
    override = os.environ.get(POM_ENV)
    if override:
        return Path(override).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "deploy" / "kafka" / "pom.xml"


def kafka_version(pom: Path | None = None) -> str:
    """`<kafka.version>` from the pom, so the cache directory follows the pin."""
    pom = pom or pom_path()
    try:
        match = re.search(r"<kafka\.version>\s*([^<\s]+)\s*</kafka\.version>", pom.read_text())
    except OSError:
        return KAFKA_VERSION
    return match.group(1) if match else KAFKA_VERSION


def cache_dir(version: str | None = None) -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/mirror-pipeline/kafka-<version>`."""
    return cache_root() / f"kafka-{version or kafka_version()}"


def _require(tool: str, why: str) -> str:
    found = shutil.which(tool)
    if not found:
        raise LocalClusterError(f"`{tool}` is not on PATH; it is needed {why}")
    return found


def java_executable() -> str:
    """`$JAVA_HOME/bin/java` when set, else `java` from PATH."""
    return find_java() or _require("java", "to run the local Kafka clusters (install Java 17)")


def ensure_kafka_jars() -> Path:
    """Return a directory holding Kafka's full runtime classpath, fetching it if needed.

    The stamp file is written only after Maven succeeds and records the pom's
    hash, so an interrupted fetch or a changed pom is redone from a clean
    directory; an unchanged pom never runs Maven again. A file lock keeps two
    processes (say, two pytest runs) from fetching into the same directory.
    """
    pom = pom_path()
    if not pom.is_file():
        raise LocalClusterError(f"Kafka pom not found at {pom}; set {POM_ENV} to the path of deploy/kafka/pom.xml")
    pom_hash = hashlib.sha256(pom.read_bytes()).hexdigest()
    home = cache_dir(kafka_version(pom))
    lib = home / "lib"
    stamp = home / _STAMP
    if _stamp_matches(stamp, pom_hash):
        return lib

    java_executable()  # fail early and clearly: the jars are useless without Java
    mvn = _require("mvn", "to fetch the Kafka jars from Maven Central (install Maven)")
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp_matches(stamp, pom_hash):  # another process fetched while we waited
            return lib
        stamp.unlink(missing_ok=True)
        shutil.rmtree(lib, ignore_errors=True)
        _run_maven(mvn, pom, lib)
        if not any(lib.glob("kafka_*.jar")):
            raise LocalClusterError(f"Maven finished but put no Kafka broker jar in {lib}")
        stamp.write_text(pom_hash + "\n")
    return lib


def _stamp_matches(stamp: Path, pom_hash: str) -> bool:
    try:
        return stamp.read_text().strip() == pom_hash
    except OSError:
        return False


def _run_maven(mvn: str, pom: Path, lib: Path) -> None:
    cmd = [
        mvn, "-q", "-B", "-f", str(pom),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={lib}",
        "-DincludeScope=runtime",
    ]  # fmt: skip
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired as exc:
        raise LocalClusterError("Maven took over 30 minutes fetching the Kafka jars") from exc
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip().splitlines()
        tail = "\n".join(output[-_MAVEN_TAIL_LINES:]) or "(no output)"
        raise LocalClusterError(
            f"Maven failed (exit {result.returncode}) fetching the Kafka jars with `{shlex.join(cmd)}`:\n{tail}"
        )


def java_command(
    main_class: str,
    *args: str,
    heap: str | None = None,
    jvm_opts: Sequence[str] = (),
) -> list[str]:
    """`java [heap] [jvm_opts] -cp <kafka lib>/* main_class args`, fetching the jars if needed.

    `heap` is a string of JVM options such as "-Xmx512m -Xms128m". Unless
    `jvm_opts` names its own `-Dlog4j2.configurationFile`, the quiet tools
    config is used, so a tool prints its output and not Log4j's chatter.
    """
    lib = ensure_kafka_jars()
    opts = list(jvm_opts)
    if not any(o.startswith("-Dlog4j2.configurationFile=") for o in opts):
        opts.append(f"-Dlog4j2.configurationFile={TOOLS_LOG4J}")
    return [
        java_executable(),
        *(shlex.split(heap) if heap else []),
        *opts,
        "-cp",
        f"{lib}{os.sep}*",
        main_class,
        *args,
    ]

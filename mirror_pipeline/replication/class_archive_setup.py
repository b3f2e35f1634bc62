"""`make setup`'s step that makes the Spark driver's class archive (`driver_class_archive`), once.

    python -m mirror_pipeline.replication.class_archive_setup

A default session runs a job like the copy's with `-XX:ArchiveClassesAtExit`,
and its JVM writes the classes it loaded as it exits. A second session must
then start with the archive mapped (`-Xshare:on` refuses to start otherwise)
before the archive takes its name, so sessions never meet a half-written or
unusable one. Any failure is reported and setup goes on: sessions then start
without an archive, as before.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from mirror_pipeline.config.loader import SparkSettings
from mirror_pipeline.config.machine_paths import cache_root
from mirror_pipeline.replication import driver_class_archive as archive
from mirror_pipeline.replication import spark_runner


def make_archive() -> Path | None:
    """Make the archive if it is missing; its path, or None when no JVM or Spark jars are found.

    Raises when the JVM wrote nothing, or nothing a session can map.
    """
    path = archive.archive_path()
    if path is None or path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        _training_session(f"-XX:ArchiveClassesAtExit={partial}")
        if not partial.is_file():
            raise RuntimeError("the JVM wrote no archive (CDS needs JDK 13 or later with its base archive)")
        _training_session(f"-Xshare:on -XX:SharedArchiveFile={partial}")
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path


def _training_session(jvm_options: str) -> None:
    """A default session whose driver JVM also gets `jvm_options` runs a copy-like job, then stops with its JVM."""
    conf = spark_runner.spark_conf(SparkSettings())
    conf["spark.driver.extraJavaOptions"] += f" {jvm_options} {archive.QUIET}"
    spark = spark_runner.session_from_conf(conf)
    try:
        spark_runner.run_tasks(spark, list(range(4)), _training_row, spark_runner.RESULT_SCHEMA)
    finally:
        _stop_with_jvm(spark)


def _training_row(item: int) -> dict[str, Any]:
    """A result row of the copy job's shape, so the archive holds what collecting its results loads."""
    values = {pa.string(): str(item), pa.bool_(): bool(item % 2)}
    return {field.name: values.get(field.type, item) for field in spark_runner.RESULT_SCHEMA}


def _stop_with_jvm(spark: spark_runner.Spark, timeout_s: float = 300.0) -> None:
    """Stop the session and end its JVM, waiting for it: the JVM writes the archive as it exits."""
    context_class = type(spark.sparkContext)
    gateway = context_class._gateway
    spark.stop()
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    gateway.shutdown()
    proc.stdin.close()  # the JVM exits when its Python driver's pipe closes
    proc.wait(timeout=timeout_s)
    context_class._gateway = None
    context_class._jvm = None


@contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """Send this process's stdout and stderr, and so its JVM's, to `log` for a while."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log, "wb") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)


# An archive no session mapped for this long (by its access time) belongs to a JDK or Spark install that is
# gone or idle: each new virtualenv's Spark jars make a new one, about 140 MB.
STALE_AFTER_S = 2 * 86400


def prune_stale_archives(keep: Path, now: float | None = None) -> list[Path]:
    """Remove the other class archives (and half-written ones) beside `keep` that no session has used for
    STALE_AFTER_S; the removed paths. A session still running with one keeps its mapping: Linux frees an
    unlinked file only once unmapped, and a session that finds its archive gone starts without one."""
    now = time.time() if now is None else now
    removed = []
    for path in sorted(keep.parent.glob("spark-driver-*.jsa*")):
        if path == keep or not (path.suffix == ".jsa" or path.name.endswith(".partial")):
            continue
        try:
            st = path.stat()
            if now - max(st.st_atime, st.st_mtime) > STALE_AFTER_S:
                path.unlink()
                removed.append(path)
        except FileNotFoundError:  # another setup removed it first
            continue
    return removed


def _prune(keep: Path) -> None:
    removed = prune_stale_archives(keep)
    if removed:
        print(
            f"setup: removed {len(removed)} Spark driver class archive(s) no session used for "
            f"{STALE_AFTER_S // 86400} days (other JDK or Spark installs)"
        )


def main() -> int:
    """`make setup`'s step: make the archive once; a failure is reported and setup goes on without it.
    Archives of other installs that no session uses any more are removed."""
    existing = archive.archive_path()
    if existing is not None:
        _prune(existing)
    if existing is not None and existing.is_file():
        return 0
    print("setup: making a class archive for the Spark driver's JVM (once per JDK and Spark, about 30 s)")
    log = cache_root() / "spark-driver-archive.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with _output_to(log):
            path = make_archive()
    except Exception as err:  # an optimisation only
        print(
            f"setup: no class archive for the Spark driver ({type(err).__name__}: {str(err)[:300]}; "
            f"the JVM's output is in {log}); Spark sessions start without one",
            file=sys.stderr,
        )
        return 0
    if path is None:
        print("setup: no Java or Spark jars found for a Spark driver class archive", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

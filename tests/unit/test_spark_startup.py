"""What makes a Spark session and its Python workers start quicker, offline: the worker daemon's
path (`replication.worker_daemon`) and the driver's class archive (`replication.driver_class_archive`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mirror_pipeline.config.loader import SparkSettings
from mirror_pipeline.config.spark_requirements import QUICK_JVM, WORKER_DAEMON_CONF
from mirror_pipeline.replication import class_archive_setup
from mirror_pipeline.replication import driver_class_archive as archive
from mirror_pipeline.replication.spark_runner import spark_conf
from mirror_pipeline.replication.worker_daemon import installed_pyspark_root, without_bundled_archives


def test_workers_import_pyspark_from_the_installed_package_not_the_zips_inside_it(tmp_path):
    root = tmp_path / "site-packages" / "pyspark"
    (root / "python" / "lib").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    own_spark = tmp_path / "spark-home" / "python" / "lib" / "pyspark.zip"
    path = [
        str(tmp_path),
        str(root / "python" / "lib" / "pyspark.zip"),
        str(root / "python" / "lib" / "py4j-0.10.9.9-src.zip"),
        str(root / "jars" / "spark-core_2.13-4.0.1.jar"),
        str(own_spark),
        str(tmp_path / "site-packages"),
    ]
    found = installed_pyspark_root(path)
    assert found == os.path.realpath(root)
    # A Spark installation of its own keeps its zip: its version may not be the installed package's.
    assert without_bundled_archives(path, found) == [str(tmp_path), str(own_spark), str(tmp_path / "site-packages")]


def test_with_only_a_zipped_pyspark_the_workers_path_stays_as_spark_made_it(tmp_path):
    path = [str(tmp_path / "pyspark.zip"), str(tmp_path)]
    assert installed_pyspark_root(path) is None


def test_this_environment_has_an_installed_pyspark_for_the_workers():
    assert installed_pyspark_root(sys.path) == os.path.realpath(Path(__import__("pyspark").__file__).parent)


def test_classic_sessions_run_the_copy_jobs_worker_daemon_by_default(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    conf = spark_conf(SparkSettings())
    assert conf["spark.python.daemon.module"] == "mirror_pipeline.replication.worker_daemon"
    mine = spark_conf(SparkSettings(conf={"spark.python.daemon.module": "my_daemon"}))
    assert mine["spark.python.daemon.module"] == "my_daemon"  # a default, not a requirement
    assert set(WORKER_DAEMON_CONF) == {"spark.python.daemon.module"}  # the local Connect server's: test_spark_settings


def fake_jdk_and_spark(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "lib" / "server").mkdir(parents=True)
    (jdk / "bin" / "java").write_text("#!/bin/sh\n")
    (jdk / "lib" / "server" / "libjvm.so").write_bytes(b"jvm")
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"core")
    monkeypatch.setenv("JAVA_HOME", str(jdk))
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return jdk, jars


def test_the_class_archive_is_named_for_one_jvm_and_one_set_of_spark_jars(tmp_path, monkeypatch):
    jdk, jars = fake_jdk_and_spark(tmp_path, monkeypatch)
    first = archive.archive_path()
    assert first is not None and first.parent == tmp_path / "cache" / "mirror-pipeline"
    assert archive.archive_path() == first
    (jars / "spark-core.jar").write_bytes(b"core, another build")
    after_spark_changed = archive.archive_path()
    assert after_spark_changed != first
    (jdk / "lib" / "server" / "libjvm.so").write_bytes(b"jvm, updated")
    assert archive.archive_path() not in (first, after_spark_changed)


def test_without_java_or_spark_jars_there_is_no_archive(tmp_path, monkeypatch):
    fake_jdk_and_spark(tmp_path, monkeypatch)
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "nowhere"))
    assert archive.archive_path() is None and archive.driver_archive_options() == ""


def test_a_session_maps_the_archive_only_once_it_is_made(tmp_path, monkeypatch):
    fake_jdk_and_spark(tmp_path, monkeypatch)
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    driver = spark_conf(SparkSettings())["spark.driver.extraJavaOptions"]
    assert driver.endswith(QUICK_JVM) and "SharedArchiveFile" not in driver
    made = archive.archive_path()
    made.parent.mkdir(parents=True)
    made.write_bytes(b"an archive")
    driver = spark_conf(SparkSettings())["spark.driver.extraJavaOptions"]
    assert f"{QUICK_JVM} -XX:SharedArchiveFile={made} " in driver and driver.endswith(archive.QUIET)
    # The user's own driver options replace the pipeline's, archive included.
    mine = spark_conf(SparkSettings(conf={"spark.driver.extraJavaOptions": "-Xss4m"}))
    assert mine["spark.driver.extraJavaOptions"] == "-Xss4m"


def test_setup_reports_a_failed_archive_and_goes_on(tmp_path, monkeypatch, capsys):
    fake_jdk_and_spark(tmp_path, monkeypatch)

    def no_archive():
        raise RuntimeError("the JVM wrote no archive")

    monkeypatch.setattr(class_archive_setup, "make_archive", no_archive)
    assert class_archive_setup.main() == 0
    err = capsys.readouterr().err
    assert "no class archive for the Spark driver (RuntimeError: the JVM wrote no archive" in err
    assert "start without one" in err


def test_a_lazy_session_hands_off_once_just_before_its_start_and_never_without_one(monkeypatch):
    """`run` starts loading Dagster beside the JVM's start: after PySpark's import, before the session,
    once, and not at all when nothing needs a session (an empty `run` records nothing)."""
    from mirror_pipeline.replication import spark_runner

    events: list[str] = []

    class Session:
        def task_slots(self) -> int:
            return 2

    def start(settings):
        events.append("session")
        return Session()

    monkeypatch.setattr(spark_runner, "spark_session", start)
    untouched = spark_runner.LazySession(SparkSettings(), while_starting=lambda: events.append("hand-off"))
    del untouched
    assert events == []

    lazy = spark_runner.LazySession(
        SparkSettings(), while_starting=lambda: events.append("hand-off " + str("pyspark.sql" in sys.modules))
    )
    assert lazy.task_slots() == 2 and lazy.task_slots() == 2
    assert events == ["hand-off True", "session"]

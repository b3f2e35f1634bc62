"""Where the data plane runs (R-EX-2/3), offline: `spark.master` or `spark.remote`, the session
settings each one makes, the checks on a Spark Connect server, and the local Spark cluster's layout."""

from __future__ import annotations

import json
import logging
import sys

import pytest
from click.testing import CliRunner

from mirror_pipeline.cli import cli
from mirror_pipeline.config.loader import SparkSettings, parse_config
from mirror_pipeline.config.redaction import REDACTED
from mirror_pipeline.config.spark_requirements import QUICK_JVM
from mirror_pipeline.local.spark_cluster import LocalSpark
from mirror_pipeline.model.errors import ConfigError, LocalClusterError
from mirror_pipeline.replication import spark_runner
from mirror_pipeline.replication.spark_runner import REQUIRED_CONF, _check_connect_server, spark_conf

SRC = "mirror.yaml"
BASE = {"clusters": {"a": {"bootstrap.servers": "127.0.0.1:1"}}, "links": {}}


def spark_of(section: dict, env: dict | None = None):
    return parse_config({**BASE, "spark": section}, SRC, env or {})


def problem(section: dict) -> str:
    with pytest.raises(ConfigError) as err:
        spark_of(section)
    return str(err.value)


def test_remote_names_a_spark_connect_server():
    cfg = spark_of({"remote": "sc://127.0.0.1:15002"})
    assert cfg.spark.remote == "sc://127.0.0.1:15002"
    assert cfg.to_redacted_dict()["spark"]["remote"] == "sc://127.0.0.1:15002"
    assert spark_of({}).spark.remote is None and "remote" not in spark_of({}).to_redacted_dict()["spark"]


@pytest.mark.parametrize("url", ["http://h:15002", "sc://", "sc://h:port", "h:15002", "sc://h 1"])
def test_remote_must_be_a_connect_url_and_is_never_quoted(url):
    line = problem({"remote": url})
    assert (
        line
        == f"{SRC}: spark.remote: must be a Spark Connect URL: sc://host:port, optionally followed by /;name=value..."
    )


def test_spark_remote_under_conf_is_the_same_setting_with_its_token_kept_secret():
    cfg = spark_of({"conf": {"spark.remote": "sc://h:15002/;token=SEKRIT"}})
    assert cfg.spark.remote == "sc://h:15002/;token=SEKRIT" and "spark.remote" not in cfg.spark.conf
    assert "SEKRIT" not in str(cfg.to_redacted_dict()) and "SEKRIT" in cfg.secret_values()
    assert problem({"conf": {"spark.remote": "h:1"}}).endswith(
        "spark.remote: must be a Spark Connect URL: sc://host:port, optionally followed by /;name=value..."
    )
    assert "set it once" in problem({"remote": "sc://h:1", "conf": {"spark.remote": "sc://h:2"}})


def test_master_and_remote_exclude_each_other():
    assert problem({"master": "local[2]", "remote": "sc://h:15002"}) == (
        f"{SRC}: spark: set master or remote, not both (a Spark Connect server has its own master)"
    )
    assert f"{SRC}: spark: unknown key 'remot' (did you mean 'remote'?)" in problem({"remot": "sc://h"})


def test_a_connect_token_is_a_secret():
    literal = spark_of({"remote": "sc://h:443/;use_ssl=true;token=t0k3n-literal"})
    from_env = spark_of({"remote": "sc://h:443/;token=${SPARK_TOKEN}"}, {"SPARK_TOKEN": "t0k3n-env"})
    for cfg, token in ((literal, "t0k3n-literal"), (from_env, "t0k3n-env")):
        assert token in cfg.secret_values()
        for text in (repr(cfg), repr(cfg.spark), str(cfg.to_redacted_dict())):
            assert token not in text and f"token={REDACTED}" in text


def test_a_connect_session_sets_no_master_and_only_session_settings():
    conf = spark_conf(SparkSettings(remote="sc://h:15002", conf={"spark.sql.shuffle.partitions": "4"}))
    assert conf == {
        "spark.remote": "sc://h:15002",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
        "spark.sql.shuffle.partitions": "4",
    }
    # PySpark's own key in the conf works too, and wins over a master there.
    conf = spark_conf(SparkSettings(conf={"spark.remote": "sc://h:15002", "spark.master": "local[2]"}))
    assert conf["spark.remote"] == "sc://h:15002" and "spark.master" not in conf


def test_a_classic_session_keeps_the_required_settings(monkeypatch):
    monkeypatch.setenv("PYSPARK_PYTHON", "recorded")  # so that the undo restores what was there
    monkeypatch.delenv("PYSPARK_PYTHON")
    conf = spark_conf(SparkSettings(master="spark://127.0.0.1:7077", conf={"spark.speculation": "true"}))
    assert conf["spark.master"] == "spark://127.0.0.1:7077" and "spark.remote" not in conf
    assert {k: conf[k] for k in REQUIRED_CONF} == REQUIRED_CONF
    assert conf["spark.pyspark.python"] == sys.executable


def test_a_classic_driver_runs_a_quick_jvm_unless_the_user_says_otherwise(monkeypatch, tmp_path):
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no class archive there (tests/unit/test_spark_startup.py)
    driver = spark_conf(SparkSettings())["spark.driver.extraJavaOptions"]
    assert driver.endswith(QUICK_JVM) and "log4j2.configurationFile" in driver
    mine = spark_conf(SparkSettings(conf={"spark.driver.extraJavaOptions": "-Xss4m"}))
    assert mine["spark.driver.extraJavaOptions"] == "-Xss4m"


def test_an_explicit_executor_python_reaches_pyspark(monkeypatch):
    # Classic PySpark ships the driver's PYSPARK_PYTHON to the executors, not the conf's value.
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3")
    conf = spark_conf(SparkSettings(master="yarn", conf={"spark.pyspark.python": "./environment/bin/python"}))
    assert conf["spark.pyspark.python"] == "./environment/bin/python"
    assert spark_runner.os.environ["PYSPARK_PYTHON"] == "./environment/bin/python"


@pytest.mark.parametrize(
    "master, loopback",
    [
        ("local[*]", True),
        ("local", True),
        ("spark://127.0.0.1:7077", True),
        ("spark://localhost:7077", True),
        ("yarn", False),
        ("spark://spark-master:7077", False),
        ("k8s://https://k:443", False),
    ],
)
def test_only_a_driver_on_this_machine_binds_to_loopback(monkeypatch, master, loopback):
    monkeypatch.setenv("SPARK_LOCAL_IP", "recorded")  # so that the undo restores what was there
    monkeypatch.delenv("SPARK_LOCAL_IP")
    spark_conf(SparkSettings(master=master))
    assert (spark_runner.os.environ.get("SPARK_LOCAL_IP") == "127.0.0.1") is loopback


class FakeConnectSession:
    def __init__(self, **server_conf):
        self.server_conf = {k.replace("_", "."): v for k, v in server_conf.items()}
        self.stopped = False
        self.conf = self

    def get(self, key, default=None):
        return self.server_conf.get(key, default)

    def stop(self):
        self.stopped = True


def test_a_connect_server_that_speculates_is_refused():
    session = FakeConnectSession(spark_speculation="true", spark_task_maxFailures="1")
    with pytest.raises(ConfigError, match="spark.speculation=false"):
        _check_connect_server(session)
    assert session.stopped


def test_a_connect_server_that_retries_tasks_is_used_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        _check_connect_server(FakeConnectSession())  # Spark's defaults: no speculation, 4 attempts
    assert "spark.task.maxFailures" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        _check_connect_server(FakeConnectSession(spark_speculation="false", spark_task_maxFailures="1"))
    assert not caplog.text


def test_the_local_spark_cluster_layout(tmp_path):
    cluster = LocalSpark(tmp_path, master_port=11077, connect_port=11502)
    assert [(d.name, d.port, d.ui_port) for d in cluster.daemons] == [
        ("master", 11077, 11078),
        ("worker-1", 11079, 11080),
        ("worker-2", 11081, 11082),
        ("connect", 11502, None),
    ]
    assert (cluster.master_url, cluster.connect_url) == ("spark://127.0.0.1:11077", "sc://127.0.0.1:11502")
    connect = cluster._properties(cluster.connect)
    assert {k: connect[k] for k in REQUIRED_CONF} == REQUIRED_CONF
    assert connect["spark.connect.grpc.binding.port"] == "11502"
    assert connect["spark.python.daemon.module"] == "mirror_pipeline.replication.worker_daemon"
    # Every daemon's command names its own properties file: that is how its pid is recognised.
    for daemon in cluster.daemons:
        assert str(daemon.properties) in cluster._command(daemon, tmp_path)
    with pytest.raises(LocalClusterError, match="distinct"):
        LocalSpark(tmp_path, master_port=15000, connect_port=15002)


def test_the_cli_reports_a_stopped_cluster_and_its_recorded_ports(tmp_path):
    (tmp_path / "spark.json").write_text(json.dumps({"master_port": 11077, "connect_port": 11502}))
    result = CliRunner().invoke(cli, ["local", "spark", "status", "--dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    daemons = json.loads(result.stdout)
    assert [(d["name"], d["address"], d["running"]) for d in daemons] == [
        ("master", "spark://127.0.0.1:11077", False),
        ("worker-1", "127.0.0.1:11079", False),
        ("worker-2", "127.0.0.1:11081", False),
        ("connect", "sc://127.0.0.1:11502", False),
    ]
    result = CliRunner().invoke(cli, ["local", "spark", "down", "--dir", str(tmp_path / "none")])
    assert result.exit_code == 0 and result.stdout.strip() == "no local Spark daemon was running"

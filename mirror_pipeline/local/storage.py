"""Formatting the KRaft storage of first-time local clusters, with the users they start with.

The SCRAM users of a secured root are written into the storage's bootstrap
metadata at format time (`--add-scram`, KIP-900), so the broker can
authenticate its own inter-broker connection and `admin` can log in at
first start. Their passwords go to the tool through a java argument file
readable by its owner only (`java @file`), never on a command line, which
any local user could read from /proc; the tool's output is scrubbed of
them before it is kept or quoted in an error.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from mirror_pipeline.local.certificates import write_private
from mirror_pipeline.local.jars import java_command
from mirror_pipeline.local.layout import ClusterLayout
from mirror_pipeline.local.processes import tail_text
from mirror_pipeline.local.security import Credentials, redact, scram_format_args
from mirror_pipeline.local.server_config import random_cluster_id
from mirror_pipeline.model.errors import LocalClusterError

FORMATTED_MARKER = ".formatted"
FORMAT_TIMEOUT_S = 120


def is_formatted(cluster: ClusterLayout) -> bool:
    return (cluster.dir / FORMATTED_MARKER).exists()


def format_storage(clusters: list[ClusterLayout], creds: Credentials | None) -> None:
    """Format KRaft storage for first-time clusters, all in parallel (one JVM each)."""
    running: list[tuple[ClusterLayout, subprocess.Popen, Path]] = []
    try:
        for cluster in clusters:
            shutil.rmtree(cluster.log_dirs, ignore_errors=True)  # leftovers of a failed format
            argfile = cluster.dir / ".format.args"
            args = [
                "kafka.tools.StorageTool",
                "format", "--standalone",
                "-t", random_cluster_id(),
                "-c", str(cluster.properties),
                *scram_format_args(creds),
            ]  # fmt: skip
            write_private(argfile, "".join(_argfile_line(a) for a in args))
            # The launcher expands @file only up to the main class, so the main class goes in the file too.
            cmd = java_command(f"@{argfile}", heap="-Xmx256m")
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True
            )
            running.append((cluster, proc, argfile))
        failures = [f for f in (_finish(cluster, proc, creds) for cluster, proc, _ in running) if f]
    finally:
        for _, proc, argfile in running:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            argfile.unlink(missing_ok=True)
    if failures:
        raise LocalClusterError("formatting Kafka storage failed for " + "\n".join(failures))


def _finish(cluster: ClusterLayout, proc: subprocess.Popen, creds: Credentials | None) -> str | None:
    """Wait for one format; record success in the marker file, or return what went wrong."""
    try:
        output, _ = proc.communicate(timeout=FORMAT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        return f"{cluster.name}: no result after {FORMAT_TIMEOUT_S} s\n{tail_text(redact(output, creds))}"
    output = redact(output, creds)
    if proc.returncode != 0:
        return f"{cluster.name}: exit {proc.returncode}\n{tail_text(output)}"
    (cluster.dir / FORMATTED_MARKER).write_text(output)
    return None


def _argfile_line(arg: str) -> str:
    """One argument of a java @file, quoted: a path may hold spaces, and backslashes are escapes there."""
    quote = "'" if '"' in arg else '"'
    return quote + arg.replace("\\", "\\\\") + quote + os.linesep

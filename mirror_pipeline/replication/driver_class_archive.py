"""A class-data-sharing archive for the Spark driver's JVM: a quicker session start and first job.

By the end of a classic session's first job its JVM has loaded about 17,000
classes, 10,000 of them read, parsed and verified from Spark's jars on the
same two cores as the copy. A dynamic AppCDS archive (JDK 13 and later) holds
the 11,400 that job loads beyond the JDK's own archive, already parsed and
verified, mapped straight into memory: with it a session started in 1.8 s
instead of 3.3 and its first no-op job of 8 tasks took 1.7 s instead of 2.9
(`benchmarks/throughput.py` shows the copy).

The archive is made once, by `make setup` (`class_archive_setup`), which
names it only once a session has started with it mapped. It belongs to one JVM
and one set of Spark jars, so its name carries a fingerprint of both, and a
session whose archive is missing (not made yet, or made for another JDK or
Spark) starts without one, as before: the archive only saves time.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

from mirror_pipeline.config.machine_paths import cache_root, find_java
from mirror_pipeline.config.spark_requirements import QUICK_JVM

#: The JVM's own notes on the archive (a mapping it could not use, classes it skipped) stay out of the output.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off -Xlog:class+path=off"


def _java() -> Path | None:
    """The JVM spark-submit starts (`$JAVA_HOME/bin/java`, else `java` from PATH), its links resolved."""
    found = find_java()
    return Path(os.path.realpath(found)) if found else None


def _spark_jars() -> Path | None:
    """The jars the driver loads: `$SPARK_HOME/jars`, else those of the installed pyspark package."""
    home = os.environ.get("SPARK_HOME")
    if not home:
        spec = importlib.util.find_spec("pyspark")
        if spec is None or not spec.submodule_search_locations:
            return None
        home = list(spec.submodule_search_locations)[0]
    jars = Path(home) / "jars"
    return jars if jars.is_dir() else None


def _stat_line(path: Path) -> str:
    st = path.stat()
    return f"{path.name} {st.st_size} {st.st_mtime_ns}"


def archive_path() -> Path | None:
    """Where the archive for this JVM and these Spark jars lives (whether made or not); None if neither is found.

    The fingerprint covers the JVM (its path and its libjvm), every jar on
    Spark's class path, and the driver's JVM options that shape the archive.
    """
    java, jars = _java(), _spark_jars()
    if java is None or jars is None:
        return None
    digest = hashlib.sha256(f"{java}\n{QUICK_JVM}\n".encode())
    for libjvm in sorted(java.parent.parent.glob("lib/server/libjvm.*")):
        digest.update(_stat_line(libjvm).encode())
    for jar in sorted(jars.glob("*.jar")):
        digest.update(_stat_line(jar).encode())
    return cache_root() / f"spark-driver-{digest.hexdigest()[:16]}.jsa"


def driver_archive_options() -> str:
    """The driver's JVM options that map the archive, or "" when there is none for this JVM and Spark."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"

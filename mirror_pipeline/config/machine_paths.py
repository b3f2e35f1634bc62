"""Where on this machine the project keeps what it makes once, and which Java runs Kafka and Spark.

Both the local Kafka clusters (`local.jars`) and the Spark driver's class
archive (`replication.driver_class_archive`) need them, from different layers.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def cache_root() -> Path:
    """`${XDG_CACHE_HOME:-~/.cache}/mirror-pipeline`: the Kafka jars, the Spark driver's class archive."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mirror-pipeline"


def find_java() -> str | None:
    """`$JAVA_HOME/bin/java` when set and present, else `java` from PATH; None when there is neither."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")

"""The Python worker daemon of the copy job's Spark sessions (`spark.python.daemon.module`).

PySpark starts `python -m pyspark.daemon` once per executor and forks a worker
from it for each task slot. Two costs of the stock daemon fall on every copy:

- Spark puts its own `pyspark.zip` and `py4j-*.zip` first on the workers'
  PYTHONPATH, so PySpark is imported from a zip of sources: compiled again in
  every daemon, with no bytecode cache. Before each task the worker also calls
  `importlib.invalidate_caches()`, which on Python 3.11 rereads the zip's
  directory once for every package imported from it (about 0.1 s of CPU per
  task, the bulk of a no-op task's cost). When the installed `pyspark` package
  is the one those zips came from (they live inside it), the same modules are
  imported from it instead, with their bytecode cached.
- Each forked worker imports what a copy task needs (pyarrow, pandas,
  confluent-kafka, the copier) after the fork, once per worker. Imported here, before any fork,
  the workers inherit them.

A forked worker also runs at most `worker_reuse.MAX_TASKS` tasks before it ends
(see `worker_reuse`). Everything else is PySpark's own daemon, unchanged.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys

from mirror_pipeline.replication import worker_reuse

#: What every copy task imports: imported once in the daemon, inherited by each worker it forks. pandas is
#: among them because pyarrow imports it at a worker's first `RecordBatch.from_pylist` (the task's results).
PRELOADED = ("pyarrow", "pandas", "pyspark.worker", "mirror_pipeline.replication.group_copy")


def without_bundled_archives(path: list[str], installed_root: str) -> list[str]:
    """`path` without the zips and jars that live inside the installed pyspark package (at `installed_root`).

    Archives elsewhere stay: a Spark installation of its own (SPARK_HOME on a
    cluster) keeps its zips, since its version may differ from what pip installed.
    """

    def bundled(entry: str) -> bool:
        real = os.path.realpath(entry)
        return real.startswith(installed_root.rstrip(os.sep) + os.sep) and real.endswith((".zip", ".jar"))

    return [entry for entry in path if not bundled(entry)]


def installed_pyspark_root(path: list[str]) -> str | None:
    """The directory of the pyspark package found on `path` outside any archive, if there is one."""
    for entry in path:
        if entry.endswith((".zip", ".jar")):
            continue
        spec = importlib.machinery.PathFinder.find_spec("pyspark", [entry])
        if spec is not None and spec.submodule_search_locations:
            return os.path.realpath(list(spec.submodule_search_locations)[0])
    return None


def main() -> None:
    """PySpark's daemon, after importing PySpark from its installed package and preloading the copy's modules."""
    root = installed_pyspark_root(sys.path)
    if root is not None:
        sys.path[:] = without_bundled_archives(sys.path, root)
        sys.path_importer_cache.clear()
    for module in PRELOADED:
        importlib.import_module(module)
    import pyspark.worker
    from pyspark import daemon  # reads the worker module from sys.argv, as under `python -m pyspark.daemon`

    if daemon.worker_main is pyspark.worker.main:  # PySpark's own worker (not one a user named)
        daemon.worker_main = worker_reuse.limited(pyspark.worker)
    # pyspark.daemon has no annotations; manager() runs the daemon's accept loop.
    daemon.manager()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()

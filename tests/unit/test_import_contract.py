"""The code's layout, checked on its source (no import runs) and on the installed package.

- each engine subpackage imports only from its own layer or the ones below
  (model < config < kafka < link < replication, sync < operations < engine,
  local < demo, the Dagster layer < cli), and there is no import cycle;
- the model imports nothing else of the project;
- only `cli/` and the Dagster layer import Dagster, only the replication
  runner (and the worker daemon Spark starts for it) imports PySpark;
- at most two function-level imports of the project's own modules, each with
  its reason on the line above;
- no module over 400 lines;
- the Dagster layer installs as `mirror_pipeline_dagster`, never as generic
  top-level `assets`, `resources` or `definitions`.
"""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENGINE, DAGSTER_LAYER = "mirror_pipeline", "mirror_pipeline_dagster"
# Where each package's source lives (the Dagster layer is built from two top-level folders).
SOURCES = {
    ENGINE: REPO / "mirror_pipeline",
    DAGSTER_LAYER: REPO / "assets",
    f"{DAGSTER_LAYER}.resources": REPO / "resources",
}
# Engine layers, lowest first: a module may import its own layer and those below.
LAYERS = {
    "model": 0,
    "config": 1,
    "kafka": 2,
    "link": 3,
    "replication": 4,
    "sync": 4,
    "verification": 4,  # verify reads both clusters through the link; the engine calls it
    "operations": 5,
    "engine": 6,
    "local": 6,
    "demo": 7,
    DAGSTER_LAYER: 7,  # the Dagster layer calls the engine; the CLI launches its jobs
    "cli": 8,
    "__main__": 9,
}
MAX_LINES = 400
# The runner, and the daemon Spark forks the runner's Python workers from (`spark.python.daemon.module`).
PYSPARK_MODULES = {f"{ENGINE}.replication.spark_runner", f"{ENGINE}.replication.worker_daemon"}
MAX_FUNCTION_LEVEL_IMPORTS = 2


def _modules() -> dict[str, Path]:
    out = {}
    for package, root in SOURCES.items():
        for path in root.rglob("*.py"):
            parts = path.relative_to(root).with_suffix("").parts
            if package == DAGSTER_LAYER and parts[0] == "resources":
                continue  # its own entry in SOURCES
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out[".".join((package, *parts))] = path
    return out


def _import_nodes(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node, [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            yield node, [alias.name for alias in node.names]


def _imports(path: Path) -> set[str]:
    return {name for _, names in _import_nodes(path) for name in names}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {i for i in _imports(path) if i in modules and i != name and i not in (ENGINE, DAGSTER_LAYER)}
        for name, path in modules.items()
    }


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] == DAGSTER_LAYER:
        return LAYERS[DAGSTER_LAYER]
    return LAYERS[parts[1]] if len(parts) > 1 else None


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_there_is_no_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_every_engine_module_sits_in_a_layer():
    unplaced = sorted(m for m in _modules() if m.startswith(f"{ENGINE}.") and m.split(".")[1] not in LAYERS)
    assert not unplaced, f"add these to LAYERS (and to the map in docs/how-it-works.md): {unplaced}"


def test_modules_import_only_their_layer_or_below():
    upward = [
        f"{name} imports {target}"
        for name, targets in _graph().items()
        if (layer := _layer(name)) is not None
        for target in sorted(targets)
        if (_layer(target) or 0) > layer
    ]
    assert not upward, "\n".join(upward)


def test_the_model_imports_nothing_else_of_the_project():
    outside = [
        f"{name} imports {target}"
        for name, targets in _graph().items()
        if name.startswith(f"{ENGINE}.model")
        for target in sorted(targets)
        if not target.startswith(f"{ENGINE}.model")
    ]
    assert not outside, "\n".join(outside)


def test_only_the_cli_and_the_dagster_layer_import_dagster_and_only_the_runner_imports_pyspark():
    for name, path in _modules().items():
        roots = {i.split(".")[0] for i in _imports(path)}
        if not (name.startswith(f"{ENGINE}.cli") or name.startswith(DAGSTER_LAYER)):
            assert not roots & {"dagster", "dagster_pyspark"}, f"{name} imports dagster"
        if name not in PYSPARK_MODULES:
            assert "pyspark" not in roots, f"{name} imports pyspark"


def test_function_level_imports_of_the_project_are_few_and_explained():
    found = []
    for name, path in _modules().items():
        lines = path.read_text().splitlines()
        for node, names in _import_nodes(path):
            if node.col_offset and names[0].split(".")[0] in (ENGINE, DAGSTER_LAYER):
                reason = lines[node.lineno - 2].strip()
                assert reason.startswith("#"), f"{name}:{node.lineno}: say on the line above why it is imported here"
                found.append(f"{name}:{node.lineno}")
    assert len(found) <= MAX_FUNCTION_LEVEL_IMPORTS, found


def test_no_module_is_over_400_lines():
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_nothing_imports_the_dagster_layer_by_its_folder_names():
    generic = {"assets", "resources", "definitions"}
    for name, path in _modules().items():
        assert not {i.split(".")[0] for i in _imports(path)} & generic, f"{name} imports a folder name"


def test_the_installed_distribution_has_only_specific_top_level_names():
    top_level = importlib.metadata.distribution("mirror-pipeline").read_text("top_level.txt").split()
    assert sorted(top_level) == [ENGINE, DAGSTER_LAYER]
    # Outside the repository nothing generic is importable from the installation.
    probe = "import importlib.util as u; print([n for n in ('assets', 'resources', 'definitions') if u.find_spec(n)])"
    out = subprocess.run([sys.executable, "-c", probe], cwd="/", capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_engine_package_is_listed_for_installation():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts) for init in (REPO / "mirror_pipeline").rglob("__init__.py")
    }
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"

"""The engine's layering, checked on its source (no import runs): what may import what.

- no import cycle between the engine's modules (function-level imports count);
- the lifecycle vocabulary, results and errors form a leaf that imports
  nothing else of the project;
- only the CLI imports Dagster, and only `spark` imports PySpark.
"""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "mirror_pipeline"
MODEL = {"mirror_pipeline.states", "mirror_pipeline.results", "mirror_pipeline.errors"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in ENGINE.rglob("*.py"):
        parts = path.relative_to(ENGINE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: {i for i in _imports(path) if i in modules and i != name and i != "mirror_pipeline"}
            for name, path in modules.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_engine_has_no_import_cycle():
    assert _cycle(_graph()) is None, " -> ".join(_cycle(_graph()))


def test_the_model_imports_nothing_else_of_the_project():
    graph = _graph()
    for name in MODEL:
        assert graph[name] <= MODEL, f"{name} imports {sorted(graph[name] - MODEL)}"


def test_only_the_cli_imports_dagster_and_only_spark_imports_pyspark():
    for name, path in _modules().items():
        roots = {i.split(".")[0] for i in _imports(path)}
        if not name.startswith("mirror_pipeline.cli"):
            assert "dagster" not in roots, f"{name} imports dagster"
        if name != "mirror_pipeline.spark":
            assert "pyspark" not in roots, f"{name} imports pyspark"

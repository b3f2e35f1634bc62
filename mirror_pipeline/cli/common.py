"""What every command shares: the --json flag, rendering, and the error boundary.

Library errors (`MirrorError`) become a one-line message on stderr and exit
code 1 here, in one place; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from mirror_pipeline.config.loader import PipelineConfig, load_config
from mirror_pipeline.model.errors import MirrorError

json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of text."
)


def emit(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    """Print `data` as JSON, or as the human text that `render` makes of it."""
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        click.echo(render(data))


def fail(message: str, as_json: bool = False, code: int = 1) -> None:
    if as_json:
        click.echo(json.dumps({"error": message}), err=True)
    else:
        click.echo(f"error: {message}", err=True)
    sys.exit(code)


def handle_errors(fn: Callable) -> Callable:
    """Turn engine errors into a clear message and a non-zero exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MirrorError as exc:
            fail(str(exc), kwargs.get("as_json", False))

    return wrapper


config_option = click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Config file [default: $MIRROR_PIPELINE_CONFIG or ./mirror.yaml].",
)
link_option = click.option("--link", "link", required=True, help="The link's name, as in the config file.")


def load(config_path: str | None) -> PipelineConfig:
    """The validated config (`--config`, else $MIRROR_PIPELINE_CONFIG, else ./mirror.yaml)."""
    return load_config(config_path)


def ensure_dagster_home(home: Path) -> Path:
    """A Dagster home holding the project's instance settings (one run per link at a time)."""
    home = home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():
        shipped = Path(__file__).resolve().parents[2] / "deploy" / "dagster.yaml"
        settings.write_text(shipped.read_text() if shipped.exists() else "")
    return home


def table(headers: list[str], rows: list[list]) -> str:
    """A plain aligned text table."""
    cells = [headers] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)

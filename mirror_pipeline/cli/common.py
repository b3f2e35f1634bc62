"""What every command shares: the --json flag, rendering, and the error boundary.

Library errors (`MirrorError`) become a one-line message on stderr and exit
code 1 here, in one place; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import click

from mirror_pipeline.errors import MirrorError

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

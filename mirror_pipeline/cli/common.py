"""What every command shares: the --json flag, rendering, and the error boundary.

Every bad input and every failure ends as ONE paragraph on stderr,
`error: ...` (or `{"error": "..."}` with --json), and one of these exit codes:

    code  meaning
    0     done
    1     refused or failed: the config, a link, a mirror, a cluster, the file
          system or the operation said no (an unknown link or mirror, a cluster
          that does not answer, a promote that did not reach zero lag, ...);
          the message says why
    2     usage error: an unknown option, a missing argument, or a value out of
          what is allowed (a name Kafka would refuse, nan or a negative timeout,
          an offset past 2**63-1, ...); the message names the argument, and
          nothing ran
    3     internal error: a bug; rerun with --debug (or MIRROR_PIPELINE_DEBUG=1)
          for the traceback
    130   interrupted (Ctrl-C)

`exit_on_error` is the one place that turns an exception into that message and
code: `handle_errors` sends it what a command raises, `RootGroup.main` what
click raises before a command runs. With --debug the traceback is printed
above the message; without it, no traceback is ever shown. Messages are
escaped: a control character shows as `\\x07`, never raw.
"""

from __future__ import annotations

import errno
import functools
import itertools
import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from mirror_pipeline.cli.values import LINK, SafePath, printable, shown
from mirror_pipeline.config.loader import PipelineConfig, load_config
from mirror_pipeline.model.errors import ConfigError, MirrorError
from mirror_pipeline.model.text import some_of

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEBUG_ENV = "MIRROR_PIPELINE_DEBUG"
# click 8.2+ asks for a group's help this way when no command is given.
NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())

json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON instead of text.")


def emit(data: Any, as_json: bool, render: Callable[[Any], str]) -> None:
    """Print `data` as JSON, or as the human text that `render` makes of it (control characters escaped)."""
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        click.echo(printable(render(data)))


def fail(message: str, as_json: bool = False, code: int = EXIT_FAILED) -> NoReturn:
    if as_json:
        click.echo(json.dumps({"error": message}), err=True)
    else:
        click.echo(f"error: {printable(message)}", err=True)
    sys.exit(code)


def handle_errors(fn: Callable) -> Callable:
    """The error boundary of a command: whatever it raises becomes a message and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # usage errors: `RootGroup.main` reports them with the command's usage hint
        except (Exception, KeyboardInterrupt) as exc:
            exit_on_error(exc, kwargs.get("as_json", False), debug_requested())

    return wrapper


def debug_requested() -> bool:
    """Whether the root group's --debug (or $MIRROR_PIPELINE_DEBUG) asks for tracebacks."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().params.get("debug"))


def exit_on_error(exc: BaseException, as_json: bool, debug: bool) -> NoReturn:
    """Report `exc` as one paragraph and exit with its code (see the table above)."""
    if isinstance(exc, click.exceptions.Exit):
        sys.exit(exc.exit_code)
    if isinstance(exc, NO_ARGS_IS_HELP):
        exc.show()  # a group called without a command: its help, as click shows it
        sys.exit(exc.exit_code)
    if isinstance(exc, click.ClickException):
        # Usage messages are one line; click quotes arguments raw, newlines included.
        fail(printable(_click_message(exc), keep=""), as_json, exc.exit_code)
    if isinstance(exc, (click.Abort, KeyboardInterrupt)):
        fail("interrupted", as_json, EXIT_INTERRUPTED)
    if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
        _quiet_stdout()  # the reader went away (`| head`): nothing more to say
        sys.exit(EXIT_FAILED)
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    if isinstance(exc, MirrorError):
        fail(str(exc), as_json)
    if isinstance(exc, OSError) and exc.filename is not None:  # the file system said no: not a bug
        fail(f"{shown(str(exc.filename))}: {exc.strerror or exc}", as_json)
    said = " ".join(str(exc).split())
    hint = "" if debug else "; rerun with --debug for the traceback"
    fail(f"internal error: {type(exc).__name__}{': ' + said if said else ''}{hint}", as_json, EXIT_INTERNAL)


def _click_message(exc: click.ClickException) -> str:
    message = exc.format_message().rstrip()
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None and ctx.help_option_names:
        help_option = max(ctx.help_option_names, key=len)
        message += f"{'' if message.endswith('.') else '.'} See '{ctx.command_path} {help_option}'."
    return message


def _quiet_stdout() -> None:
    """What is still buffered for the reader that went away is dropped at exit, as click does."""
    sys.stdout = _QuietFlush(sys.stdout)
    sys.stderr = _QuietFlush(sys.stderr)


class _QuietFlush:
    def __init__(self, stream):
        self._stream = stream

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError:
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class RootGroup(click.Group):
    """The root command: click's own errors (usage, interrupts) go through `exit_on_error` too."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except (Exception, KeyboardInterrupt) as exc:
            exit_on_error(exc, "--json" in argv, _debug_in(argv))
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else EXIT_OK)


def _debug_in(argv: list[str]) -> bool:
    """--debug among the root's options (they come before the command), or $MIRROR_PIPELINE_DEBUG."""
    if os.environ.get(DEBUG_ENV, "").strip().lower() in ("1", "true", "t", "yes", "y", "on"):
        return True
    return "--debug" in itertools.takewhile(lambda a: a.startswith("-"), argv)


config_option = click.option(
    "--config",
    "config_path",
    type=SafePath(dir_okay=False),
    default=None,
    help="Config file [default: $MIRROR_PIPELINE_CONFIG or ./mirror.yaml].",
)
link_option = click.option("--link", "link", type=LINK, required=True, help="The link's name, as in the config file.")


def load(config_path: str | None, link: str | None = None, given_as: str = "--link") -> PipelineConfig:
    """The validated config (`--config`, else $MIRROR_PIPELINE_CONFIG, else ./mirror.yaml).

    With `link`, a link the config does not declare is refused here, naming
    the argument (`given_as`) it came from.
    """
    config = load_config(config_path)
    if link is not None and link not in config.links:
        known = ", ".join(sorted(config.links)) or "none"
        raise ConfigError(
            f"{given_as}: no link {shown(link)} in {config.path or 'the config'}; give one of its links: {known}"
        )
    return config


def refuse_unknown_mirrors(names, known, link: str, given_as: str, as_json: bool) -> None:
    """Refuse `names` that are not among `known` (the link's mirror topics), naming the argument."""
    unknown = [n for n in names if n not in known]
    if unknown:
        fail(
            f"{given_as}: no mirror {', '.join(shown(n) for n in unknown)} on link '{link}'; give mirror topics "
            f"of the link ({some_of(sorted(known), none='it has none')})"
            + (", or --all" if given_as == "TOPICS" else ""),
            as_json,
        )


def dagster_home_in_use() -> str:
    """The Dagster home the CLI records in (`$DAGSTER_HOME`, else `./.dagster-home`), named as
    `dagster_runs.dagster_instance` names it, without creating it."""
    return os.environ.get("DAGSTER_HOME") or str(Path(".dagster-home").resolve())


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
    """A plain aligned text table (control characters in cells escaped)."""
    cells = [headers] + [[printable(str(c), keep="") for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in cells]
    return "\n".join(lines)

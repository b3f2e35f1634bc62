"""`mirror-pipeline ui`: the Dagster UI and the Dagster daemon for the current config, in one command.

How Dagster runs here. Dagster 1.13 marks `dagster dev` superseded by `dg dev`
and warns so at every start; `dg dev` needs the `dagster-dg-cli` package and a
`dg` project (a `defs` package declared in `pyproject.toml`), which this
project, one code location that `workspace.yaml` loads from a config file, is
not. So this command starts what Dagster's guide "Deploying Dagster as a
service" names, the same three processes `dagster dev` starts itself, as
children sharing one `$DAGSTER_HOME`:

    dagster code-server start -m mirror_pipeline_dagster.definitions --location-name mirror-pipeline --socket S
    dagster-daemon run -w W                       W: a workspace file with one `grpc_server` entry, S
    dagster-webserver -w W -h HOST -p PORT

One code server loads the definitions once for both (run alone with the
project's `workspace.yaml`, the daemon starts a code server of its own and
replaces it every minute), launches the runs, and "Reload definitions" in the
UI restarts it to read an edited config. None of the three prints a
deprecation warning.

- The code location reads the config through `$MIRROR_PIPELINE_CONFIG`, set
  for the children to the absolute path of `--config` (else
  `$MIRROR_PIPELINE_CONFIG`, else `./mirror.yaml`). The file is validated
  first: a bad file is the usual one-line error, and nothing starts.
- `$DAGSTER_HOME`, else `./.dagster-home`: the instance the CLI records its
  own Dagster runs in (`dagster_runs.dagster_instance`), holding the project's settings
  (`deploy/dagster.yaml`: one run per link at a time), which are added to a
  home that has no `dagster.yaml`. Its storage is created here, before the
  children start, so they never race to create it.
- A port already in use is one error line, before anything starts.
- The children run in sessions of their own: Ctrl-C (or SIGTERM, SIGHUP)
  reaches this process, which stops the webserver, the daemon and then the
  code server the way Ctrl-C stops each (SIGINT), and kills whatever of a
  child's process group is left after `STOP_WAIT_S` (runs still in progress
  included: a cycle is crash-safe). On Linux the children also get SIGINT
  should this process die without stopping them.
- A child that dies before the UI serves fails the command, naming it (a
  code location that cannot load, say). Once the UI serves, a child that dies
  is started again after a backoff, with a line on stderr
  (`ui_processes.Children`); the others go on.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import NoReturn

import click
import yaml

from mirror_pipeline.cli.common import config_option, ensure_dagster_home, fail, handle_errors, load
from mirror_pipeline.cli.listening import check_host_text, check_port_free, host_port
from mirror_pipeline.cli.ui_processes import POLL_S, Children, Stop, how_it_ended
from mirror_pipeline.cli.values import printable, shown
from mirror_pipeline.config.loader import CONFIG_ENV_VAR
from mirror_pipeline.model.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 3000  # Dagster's own default; below Linux's ephemeral range (32768-60999)
# The one code location, as `workspace.yaml` declares it (a unit test keeps them equal).
MODULE = "mirror_pipeline_dagster.definitions"
LOCATION = "mirror-pipeline"


@click.command()
@config_option
@click.option(
    "--host",
    "-H",
    default=DEFAULT_HOST,
    show_default=True,
    help="Address the UI listens on (0.0.0.0: every interface).",
)
@click.option(
    "--port",
    "-p",
    type=click.IntRange(1, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port the UI listens on.",
)
@handle_errors
def ui(config_path: str | None, host: str, port: int) -> None:
    """Start the Dagster UI and the Dagster daemon for the config's links; Ctrl-C stops both.

    The UI shows each link's assets, jobs, schedules, sensors and runs (the
    CLI's too); the daemon runs the schedules and sensors that are on (see
    dagster.automation.running) and the queued runs. Runs are recorded in
    $DAGSTER_HOME, else ./.dagster-home (created with the project's settings).

    \b
    Example:
      mirror-pipeline ui --config mirror.yaml --port 3000
    """
    config = load(config_path)
    config_file = Path(config.path or config_path or "mirror.yaml").resolve()
    check_host_text(host)
    check_port_free(host, port)
    home = _dagster_home()
    env = {**os.environ, CONFIG_ENV_VAR: str(config_file), "DAGSTER_HOME": str(home)}
    url = _url(host, port)
    links = ", ".join(sorted(config.links)) or "none"
    click.echo(
        f"Starting the Dagster UI and daemon for {printable(str(config_file))} (links: {printable(links)}), "
        f"DAGSTER_HOME={printable(str(home))}"
    )
    with ExitStack() as stack:
        run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mirror-pipeline-ui-")))
        code_socket = run_dir / "code.sock"
        workspace = run_dir / "workspace.yaml"
        workspace.write_text(
            yaml.safe_dump(
                {
                    "load_from": [
                        {"grpc_server": {"socket": str(code_socket), "host": "localhost", "location_name": LOCATION}}
                    ]
                }
            )
        )
        children = Children()
        stack.callback(children.stop)
        previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
        stack.callback(lambda: [signal.signal(sig, handler) for sig, handler in previous.items()])
        try:
            children.start(
                "the Dagster code server",
                [
                    *_tool("dagster", "dagster"),
                    "code-server",
                    "start",
                    "-m",
                    MODULE,
                    "--location-name",
                    LOCATION,
                    "--socket",
                    str(code_socket),
                ],
                env,
                ready=lambda: _accepts(code_socket),
            )
            _wait_for(children, lambda: _accepts(code_socket))  # it binds once the definitions are loaded
            children.start(
                "dagster-daemon", [*_tool("dagster-daemon", "dagster._daemon"), "run", "-w", str(workspace)], env
            )
            children.start(
                "dagster-webserver",
                [*_tool("dagster-webserver", "dagster_webserver"), "-w", str(workspace), "-h", host, "-p", str(port)],
                env,
            )
            _wait_for(children, lambda: _answers(f"{url}/server_info"))
            click.echo(f"Dagster UI: {url}  (Ctrl-C stops the UI and the daemon)")
            children.supervise()
        except (KeyboardInterrupt, Stop):
            click.echo("Stopping the Dagster UI and daemon...", err=True)
            children.stop()
            click.echo("Stopped.", err=True)


def _died(child: tuple[str, int]) -> NoReturn:
    name, code = child
    fail(f"{name} {how_it_ended(code)} (its output is above); the other Dagster processes were stopped")


def _raise_stop(signum, frame) -> None:
    raise Stop()


def _dagster_home() -> Path:
    """`$DAGSTER_HOME` (made absolute, as Dagster requires), else ./.dagster-home, as the CLI's own runs use
    (`dagster_runs.dagster_instance`); with the project's settings, and its storage created."""
    given = os.environ.get("DAGSTER_HOME")
    if not given:
        home = ensure_dagster_home(Path(".dagster-home"))
    else:
        home = Path(given).resolve()
        if not home.is_dir():
            raise ConfigError(
                f"$DAGSTER_HOME {shown(given)} is not a directory: create it, or unset DAGSTER_HOME "
                f"to use ./.dagster-home"
            )
        if not (home / "dagster.yaml").exists():
            ensure_dagster_home(home)
            click.echo(
                f"Wrote the project's Dagster settings (deploy/dagster.yaml) to {printable(str(home / 'dagster.yaml'))}"
            )
    from dagster import DagsterInstance  # Dagster takes seconds to import: only this command needs it here

    with DagsterInstance.from_config(str(home)) as instance:  # creates the storage (SQLite) before the children
        if not instance.run_monitoring_enabled:
            click.echo(
                f"warning: {printable(str(home / 'dagster.yaml'))} has no run monitoring: a run whose "
                f"worker dies stays STARTED and holds its link's runs back; add the `run_launcher` and "
                f"`run_monitoring` sections of the project's deploy/dagster.yaml",
                err=True,
            )
    return home


def _tool(script: str, module: str) -> list[str]:
    """The console script next to this Python (same virtualenv), else its module run by this Python."""
    path = Path(sys.executable).parent / script
    return [str(path)] if path.is_file() and os.access(path, os.X_OK) else [sys.executable, "-m", module]


def _url(host: str, port: int) -> str:
    """Where a browser on this machine reaches the UI."""
    return f"http://{host_port({'0.0.0.0': '127.0.0.1', '::': '::1'}.get(host, host), port)}"


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _wait_for(children: Children, ready: Callable[[], bool]) -> None:
    """Until `ready()`, however long loading takes, unless a child dies (then: fail)."""
    while not ready():
        dead = children.exited()
        if dead:
            children.stop()
            _died(dead)
        time.sleep(POLL_S)

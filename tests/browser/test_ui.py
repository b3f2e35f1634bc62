"""The Dagster UI in a real browser: `mirror-pipeline ui` on the local Kafka pair, driven by Playwright.

The browser is Debian's `chromium` package (`deploy/setup.sh` installs it; set
MIRROR_PIPELINE_CHROMIUM to use another binary): Playwright's own browser
download is never used. Without a chromium binary the test skips, saying so.
The page may ask nothing of the internet: every request that is not for the
UI itself is aborted.

The test creates a mirror and copies its records with the CLI, starts
`mirror-pipeline ui` on a port the OS gives (a temporary DAGSTER_HOME), and
checks in the browser that:

1. the link's asset group page lists every asset of the link;
2. the `mirror_data` asset shows the mirror as a partition;
3. materializing that partition from the asset page (Materialize..., All,
   Launch 1 run) runs to Success, and the mirror on Kafka then holds the
   records produced after the CLI's copy;
3b. the link's follow job (always-on) launched from the Launchpad copies
   records produced while it runs, each epoch in the run's log; Terminate
   stops it gracefully: the epoch in flight is finished and logged, the run
   ends Canceled, and the mirror holds every record;
4. promote launched from the Launchpad (the run config typed into its
   editor, Launch Run): the shared `promote` job without the link's tag
   fails, saying so in one sentence, and the mirror stays ACTIVE; the link's
   own promote job, whose config is only the mirrors (the link is in its name
   and tag), runs to Success: the mirror holds every record, including those
   produced just before, and is STOPPED;
5. a link with `dagster.automation.running: true` shows its replicate
   schedule and its three sensors on, while the first link's are off;
6. no page showed a Python error (in its text, or in any GraphQL answer).

Then Ctrl-C (SIGINT) stops the UI cleanly, and its output never mentioned a
deprecation. The UI is stopped in a `finally` whatever happens. The asset
page's screenshot is kept in the test's tmp dir; with
MIRROR_PIPELINE_SCREENSHOT=1 it is also written to docs/ui-asset.png (the
picture in docs/console.md).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror_pipeline.cli.common import ensure_dagster_home
from mirror_pipeline_dagster.lifecycle_jobs import PROMOTE_JOB, stop_run_config
from mirror_pipeline_dagster.link_stop_jobs import link_stop_run_config
from mirror_pipeline_dagster.naming import LinkNames
from tests.cli_process import UiProcess
from tests.config_files import TEST_FENCE_WAIT_MS
from tests.ports import free_port

REPO = Path(__file__).resolve().parents[2]
LINK = "west-to-east"
AUTO_LINK = "west-to-east-auto"
PARTITIONS = 2
FIRST, LATER = 120, 80  # records copied by the CLI, then by the run launched from the UI
FOLLOWED = 60  # produced while the follow job runs
FOLLOW_EPOCH_S = 3
FINAL = 40  # produced just before promote: the promote run copies them before it stops the mirror
UI_START_S = 300  # the UI loads the code location first; a loaded two-core machine is slow
RUN_S = 600  # a copy run: a Spark session, the copy, and the asset's checks
STOP_S = 120
STEP_MS = 90_000  # one page step (navigation, an element to appear)
PICK_TRY_MS = 10_000  # one try at picking a partition from the Launchpad's list
AUTOMATION_TICK_MS = 180_000  # a running schedule's or sensor's first tick, seen on its page
ERROR_MARKERS = (
    "Traceback (most recent call last)",
    "PythonError",
    "DagsterUserCodeLoadError",
    "Unexpected GraphQL error",
)
SCREENSHOT_ENV = "MIRROR_PIPELINE_SCREENSHOT"


def chromium_binary() -> str | None:
    explicit = os.environ.get("MIRROR_PIPELINE_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    return next(
        (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None
    )


CHROMIUM = chromium_binary()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium binary (install Debian's `chromium` package, as deploy/setup.sh does as root, "
    "or set MIRROR_PIPELINE_CHROMIUM)",
)


@pytest.mark.timeout(UI_START_S + RUN_S + 3 * STOP_S + 600)
def test_the_ui_shows_the_link_and_materializes_a_mirror(
    tmp_path, source_bootstrap, destination_bootstrap, create_topic
):
    from playwright.sync_api import expect, sync_playwright  # a dev dependency: an ImportError is a real failure

    expect.set_options(timeout=STEP_MS)

    tag = uuid.uuid4().hex[:6]
    topic = create_topic(source_bootstrap, f"orders-{tag}", partitions=PARTITIONS)
    config = write_config(tmp_path / "mirror.yaml", source_bootstrap, destination_bootstrap, tag)
    names, auto = LinkNames(LINK), LinkNames(AUTO_LINK)

    # The CLI records its Dagster runs where the UI will look (the same DAGSTER_HOME).
    home = ensure_dagster_home(tmp_path / "dagster-home")
    # Dagster's one-time "Join the Dagster community" dialog, marked seen as the UI's "Skip" does
    # (`dagster._core.nux`): opening at a random moment, it could swallow a click of the test.
    (home / ".nux").mkdir(exist_ok=True)
    (home / ".nux" / "nux.yaml").write_text("seen: 1\n")
    produce(source_bootstrap, topic, FIRST, "first")
    cli(home, "mirror", "create", topic, "--link", LINK, "--config", str(config))
    cli(home, "run", "--link", LINK, "--config", str(config))
    assert mirror_counts(destination_bootstrap, topic) == source_counts(source_bootstrap, topic)
    register_partition(home, names, topic)
    port = free_port()
    ui = UiProcess(config, home, port, tmp_path / "ui.log")
    try:
        url = ui.wait_until_serving(UI_START_S)
        errors: list[str] = []
        graphql = {"answers": 0}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
            )
            try:
                context = browser.new_context(viewport={"width": 1280, "height": 760})
                context.route(
                    "**/*", lambda route: route.continue_() if route.request.url.startswith(url) else route.abort()
                )
                page = context.new_page()
                page.set_default_timeout(STEP_MS)
                page.set_default_navigation_timeout(STEP_MS)
                page.on("response", lambda response: check_graphql(response, graphql, errors))
                # Should the community dialog open all the same, it is skipped.
                page.add_locator_handler(
                    page.get_by_text("Join the Dagster community"),
                    lambda: page.get_by_role("button", name="Skip").click(),
                )

                def visit(path: str, ready) -> None:
                    page.goto(url + path)
                    expect(ready()).to_be_visible()
                    text = page.inner_text("body")
                    errors.extend(f"{path}: {marker}" for marker in ERROR_MARKERS if marker in text)

                # 1. The group page lists the link's assets (each a link to its page; long names are cut).
                def asset_link(asset: str):
                    return page.locator(f'a[href="/assets/{names.group}/{asset}"]').first

                visit(f"/locations/mirror-pipeline/asset-groups/{names.group}/list", lambda: asset_link("mirror_data"))
                for asset in group_assets(config, names.group):
                    expect(asset_link(asset)).to_be_visible()

                # 2. The copy asset has the mirror as a partition.
                visit(
                    f"/assets/{names.group}/mirror_data?view=partitions",
                    lambda: page.get_by_text(topic, exact=True).first,
                )

                # 3. Materialize it from the UI: the run copies what was produced since the CLI's copy.
                produce(source_bootstrap, topic, LATER, "later")
                page.get_by_role("button", name="Materialize…").first.click()
                dialog = page.get_by_role("dialog")
                expect(dialog.get_by_text(f"Launch runs to materialize {names.group} / mirror_data")).to_be_visible()
                dialog.get_by_role("button", name="All", exact=True).click()
                dialog.get_by_role("button", name="Launch 1 run").click()
                launched = page.get_by_text(re.compile(r"Launched run [0-9a-f]{8}"))
                expect(launched).to_be_visible()
                short_id = re.search(r"[0-9a-f]{8}", launched.inner_text()).group(0)
                visit("/runs", lambda: page.get_by_role("link", name=short_id).first)
                page.get_by_role("link", name=short_id).first.click()
                page.wait_for_url(re.compile(rf"/runs/{short_id}[0-9a-f-]+"))
                status = wait_for_run_end(page, RUN_S)
                assert status == "Success", f"the run launched from the UI ended {status}; see {ui.log}"
                text = page.inner_text("body")
                errors.extend(f"run page: {marker}" for marker in ERROR_MARKERS if marker in text)
                assert mirror_counts(destination_bootstrap, topic) == source_counts(source_bootstrap, topic)
                assert sum(source_counts(source_bootstrap, topic)) == FIRST + LATER

                # The asset page after the run: the picture in docs/console.md.
                visit(f"/assets/{names.group}/mirror_data", lambda: page.get_by_text("cycle_records").first)
                shot = tmp_path / "ui-asset.png"
                page.screenshot(path=str(shot))
                if os.environ.get(SCREENSHOT_ENV):
                    (REPO / "docs").mkdir(exist_ok=True)
                    shutil.copyfile(shot, REPO / "docs" / "ui-asset.png")

                # 3b. Follow mode from the Launchpad; Terminate finishes the epoch in flight.
                launch_follow(page, visit, names)
                expect(page.get_by_text(re.compile(r"epoch 1: copied")).first).to_be_visible(timeout=RUN_S * 1000)
                produce(source_bootstrap, topic, FOLLOWED, "followed")
                deadline = time.monotonic() + RUN_S
                while mirror_counts(destination_bootstrap, topic) != source_counts(source_bootstrap, topic):
                    assert time.monotonic() < deadline, f"the follow run did not copy new records; see {ui.log}"
                    time.sleep(1)
                page.get_by_role("button", name="Terminate").first.click()
                page.get_by_role("dialog").get_by_role("button", name="Terminate").click()
                status = wait_for_run_end(page, FOLLOW_EPOCH_S + RUN_S)
                assert status == "Canceled", f"the terminated follow run ended {status}; see {ui.log}"
                expect(page.get_by_text("sending SIGINT to subprocess").first).to_be_visible()
                text = page.inner_text("body")
                errors.extend(f"follow run page: {marker}" for marker in ERROR_MARKERS if marker in text)
                assert describe(home, config, topic)["state"] == "ACTIVE"
                assert mirror_counts(destination_bootstrap, topic) == source_counts(source_bootstrap, topic)

                # 4. Promote from the Launchpad. The shared job without the link's tag is refused in one
                #    sentence and changes nothing; the link's own job, whose mirror is picked from the list
                #    of its partitions, finishes copying, then stops the mirror for good.
                produce(source_bootstrap, topic, FINAL, "final")
                refused = launch_promote(
                    page, visit, PROMOTE_JOB, stop_run_config(PROMOTE_JOB, LINK, [topic], timeout_s=RUN_S)
                )
                assert refused == "Failure", f"promote without the link's tag ended {refused}; see {ui.log}"
                expect(page.get_by_text("promote refused: the run must carry the tag").first).to_be_visible()
                assert describe(home, config, topic)["state"] == "ACTIVE"
                status = launch_promote(
                    page,
                    visit,
                    names.promote_job,
                    link_stop_run_config(names, PROMOTE_JOB, [], timeout_s=RUN_S),
                    partition=topic,
                )
                assert status == "Success", f"promote launched from the Launchpad ended {status}; see {ui.log}"
                text = page.inner_text("body")
                errors.extend(f"promote run page: {marker}" for marker in ERROR_MARKERS if marker in text)
                described = describe(home, config, topic)
                assert described["state"] == "STOPPED" and described["lag"] == 0
                assert mirror_counts(destination_bootstrap, topic) == source_counts(source_bootstrap, topic)
                assert sum(source_counts(source_bootstrap, topic)) == FIRST + LATER + FOLLOWED + FINAL

                # 5. dagster.automation.running: on for the second link, off for the first.
                for kind, name, running in [
                    ("schedules", auto.replicate_schedule, True),
                    ("sensors", auto.lag_sensor, True),
                    ("sensors", auto.health_sensor, True),
                    ("sensors", auto.auto_create_sensor, True),
                    ("schedules", names.replicate_schedule, False),
                    ("sensors", names.lag_sensor, False),
                ]:
                    state = page.get_by_role("row", name="Running", exact=True)
                    visit(f"/locations/mirror-pipeline/{kind}/{name}", lambda row=state: row)
                    switch = state.get_by_role("checkbox")  # the on/off switch (its input is drawn over, not shown)
                    expect(switch).to_be_enabled()
                    (expect(switch).to_be_checked if running else expect(switch).not_to_be_checked)()
                    if running:  # and the daemon runs it: a sensor ticks every 30 s, the schedule every minute
                        latest = page.get_by_role("row", name=re.compile(r"^Latest tick"))
                        expect(latest).not_to_contain_text("never run", timeout=AUTOMATION_TICK_MS)

                # 6. The code location loaded without error.
                visit("/deployment/locations", lambda: page.get_by_text("mirror-pipeline").first)
            finally:
                browser.close()
        assert graphql["answers"] > 0
        assert errors == [], f"Python errors shown: {errors}"

        code, output = ui.stop(STOP_S)
        assert code == 0 and "Stopped." in output, f"exit {code}; see {ui.log}"
        assert "deprecat" not in output.lower() and "superseded" not in output.lower(), f"see {ui.log}"
    finally:
        ui.stop(STOP_S)


# --- the UI process --------------------------------------------------------------------------------

# --- Dagster and Kafka -----------------------------------------------------------------------------


def write_config(path: Path, source: str, destination: str, tag: str) -> Path:
    """Two links on the pair, each with internal topics of its own (no other test's mirrors in sight)."""

    def link(side: str, **settings) -> dict:
        own = {
            f"mirror.{kind}.topic": f"_ui-{tag}-{side}.{kind.replace('.', '-')}"
            for kind in ("state", "offset.map", "checkpoints")
        }
        return {"source": "us-west", "destination": "us-east", **own, **settings}

    data = {
        "clusters": {"us-west": {"bootstrap.servers": source}, "us-east": {"bootstrap.servers": destination}},
        "defaults": {"mirror.writer.fence.wait.ms": TEST_FENCE_WAIT_MS},
        # The first link's schedule and sensors stay off: nothing but the UI may copy while it is watched.
        "links": {LINK: link("a"), AUTO_LINK: link("b", **{"dagster.automation.running": True})},
        "spark": {"master": "local[2]"},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def group_assets(config: Path, group: str) -> list[str]:
    from mirror_pipeline_dagster.definitions import build_definitions

    repo = build_definitions(config).get_repository_def()
    keys = [key for key in repo.asset_graph.get_all_asset_keys() if repo.asset_graph.get(key).group_name == group]
    assert keys, f"no asset in group {group}"
    return sorted(key.path[-1] for key in keys)


def register_partition(home: Path, names: LinkNames, topic: str) -> None:
    """The mirror as a partition of the link's assets, as the lag sensor registers it (off here)."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(names.mirrors_partitions, [topic])  # a no-op if the CLI did it


def check_graphql(response, counter: dict, errors: list[str]) -> None:
    if "/graphql" not in response.url:
        return
    try:
        body = response.text()
    except Exception:  # noqa: BLE001 - a page left mid-request: nothing to read
        return
    counter["answers"] += 1
    if '"PythonError"' in body:
        errors.append(f"GraphQL answer with a PythonError: {body[:400]}")


def launch_promote(page, visit, job: str, run_config: dict, partition: str | None = None) -> str:
    """Launch `job` from the Launchpad with `run_config` typed into its editor (and `partition` picked
    from the Launchpad's list of the job's partitions); the run's final status."""
    from playwright.sync_api import expect

    editor = page.locator(".CodeMirror").first
    visit(f"/locations/mirror-pipeline/jobs/{job}/playground", lambda: editor)
    if partition is not None:
        picker = page.get_by_placeholder("Partition")
        pick_partition(page, picker, partition)
        expect(picker).to_have_value(partition)
        # Picking a partition fetches its tags and config, then writes them over the session as it was
        # when picked: typed any sooner, the config is lost, and Launch Run, its partition not yet in the
        # session, only asks "Are you sure?" (a loaded machine made that race happen).
        expect(page.get_by_text(f"partition: {partition}", exact=True).first).to_be_visible()
        expect(page.get_by_text("Generating configuration...")).to_be_hidden()
    launch_from_launchpad(page, editor, run_config)
    return wait_for_run_end(page, RUN_S)


def pick_partition(page, picker, partition: str) -> None:
    """Type `partition` into the Launchpad's picker and choose it from the list.

    While the job's partitions load, the picker is a placeholder of its own: once they arrive it is
    replaced by the real one, and what was typed and the list opened under it are gone (a loaded CI
    machine made a test type into the placeholder). So the typing is tried again until the list shows."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    deadline = time.monotonic() + STEP_MS / 1000
    while True:
        picker.click()
        picker.fill(partition)
        choice = page.get_by_role("menuitem", name=partition).first
        try:
            choice.click(timeout=PICK_TRY_MS)
            return
        except PlaywrightTimeout:
            if time.monotonic() > deadline:
                raise
            page.keyboard.press("Escape")


def launch_from_launchpad(page, editor, run_config: dict) -> None:
    """Type `run_config` into the Launchpad's editor, press Launch Run, and wait for the run's page."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    text = yaml.safe_dump(run_config)
    editor.evaluate("(node, text) => node.CodeMirror.setValue(text)", text)  # CodeMirror 5
    assert editor.evaluate("node => node.CodeMirror.getValue()") == text
    launch = page.get_by_role("button", name="Launch Run")  # its icon is part of its name
    expect(launch).to_be_enabled()  # the UI has validated the config
    launch.click()
    try:
        page.wait_for_url(re.compile(r"/runs/[0-9a-f]{8}-"))
    except PlaywrightTimeout as error:  # the page's own words say why no run started
        shown = page.inner_text("body")[:1500]
        raise AssertionError(f"Launch Run opened no run page; the page said: {shown}") from error


def launch_follow(page, visit, names: LinkNames) -> None:
    """The link's follow job from the Launchpad, in short epochs; returns once its run page shows."""
    editor = page.locator(".CodeMirror").first
    visit(f"/locations/mirror-pipeline/jobs/{names.follow_job}/playground", lambda: editor)
    run_config = {"ops": {f"{names.group}_follow_epochs": {"config": {"epoch_seconds": FOLLOW_EPOCH_S}}}}
    launch_from_launchpad(page, editor, run_config)


def describe(home: Path, config: Path, topic: str) -> dict:
    return json.loads(cli(home, "mirror", "describe", topic, "--link", LINK, "--config", str(config), "--json"))


def wait_for_run_end(page, timeout_s: float) -> str:
    """The run page's final status (it updates itself while the run goes on)."""
    final = re.compile(r"^(Success|Failure|Canceled)$")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        shown = page.get_by_text(final)
        if shown.count():
            return shown.first.inner_text().strip()
        page.wait_for_timeout(2000)
    return f"not finished after {timeout_s} s"


def cli(home: Path, *args: str) -> str:
    env = {**{k: v for k, v in os.environ.items() if k != "MIRROR_PIPELINE_CONFIG"}, "DAGSTER_HOME": str(home)}
    result = subprocess.run(
        [sys.executable, "-m", "mirror_pipeline", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=home.parent,
    )
    assert result.returncode == 0, f"mirror-pipeline {' '.join(args)}: {result.stderr}"
    return result.stdout


def produce(bootstrap: str, topic: str, count: int, label: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=f"{label}-{i}".encode(), value=f'{{"n": {i}}}'.encode(), partition=i % PARTITIONS)
    assert producer.flush(60) == 0


def _ends(bootstrap: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ui-test-{uuid.uuid4().hex[:6]}"})
    try:
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()


def source_counts(bootstrap: str, topic: str) -> list[int]:
    return _ends(bootstrap, topic)


def mirror_counts(bootstrap: str, topic: str) -> list[int]:
    """The mirror's log end per partition: equal to the source's once it holds every record (offsets are kept)."""
    return _ends(bootstrap, topic)

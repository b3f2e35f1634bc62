"""The engine as ONE Dagster resource: every asset, job, sensor, schedule and check calls it.

Each method loads the configuration file (so an edited file applies at the
next run or tick) and calls the engine verb of the same name. Tests replace
the resource with a subclass whose methods answer without Kafka, instead of
patching modules.
"""

from __future__ import annotations

from collections.abc import Sequence

from dagster import ConfigurableResource
from pydantic import Field

from mirror_pipeline import engine
from mirror_pipeline.config.link_settings import LinkConfig
from mirror_pipeline.config.loader import PipelineConfig, load_config
from mirror_pipeline.model.results import CycleResult, MirrorDescription, MirrorInfo


class MirrorEngine(ConfigurableResource):
    """mirror-pipeline's engine over the links of one configuration file."""

    config_path: str | None = Field(
        default=None,
        description=(
            "Path of the mirror-pipeline configuration file. Empty: "
            "$MIRROR_PIPELINE_CONFIG, else ./mirror.yaml, resolved at run time."
        ),
    )

    def load(self) -> PipelineConfig:
        """The validated configuration; raises `ConfigError` naming the file and key."""
        return load_config(self.config_path or None)

    def link(self, name: str) -> LinkConfig:
        return self.load().link(name)

    # --- reads: what sensors, schedules and checks may call ---------------------

    def list_mirrors(self, link: str) -> list[MirrorInfo]:
        return engine.list_mirrors(self.load(), link)

    def describe_mirror(self, link: str, mirror_topic: str) -> MirrorDescription:
        """Per partition, both sides' offsets (the source's are None when it does not answer)."""
        return engine.describe_mirror(self.load(), link, mirror_topic)

    def mirror_lags(self, link: str) -> dict[str, int]:
        return engine.mirror_lags(self.load(), link)

    def mirror_overview(self, link: str) -> tuple[list[MirrorInfo], dict[str, int]]:
        """Every mirror of the link and their lags, from one read of its registry."""
        return engine.mirror_overview(self.load(), link)

    def heartbeat_status(self, link: str) -> engine.heartbeats.HeartbeatStatus:
        """The newest heartbeat on the link's heartbeats mirror (R-OBS-3); reads the destination only."""
        return engine.heartbeat_status(self.load(), link)

    def link_config_drift(self, link: str, mirrors: Sequence[str] | None = None) -> dict[str, dict]:
        return engine.link_config_drift(self.load(), link, mirrors)

    def health_changes(self, link: str) -> dict[str, dict]:
        return engine.health_changes(self.load(), link)

    def auto_create_plan(self, link: str) -> engine.AutoCreateResult:
        return engine.auto_create(self.load(), link, dry_run=True)

    def verify_mirrors(
        self,
        link: str,
        spark,
        mirrors: Sequence[str] | None = None,
        sample: float = 1.0,
        max_bytes_per_second: int | None = None,
        seed: str = "",
    ) -> engine.VerifyResult:
        """Reads only, but runs a Spark job: called by the `mirror_verified` check in its own runs."""
        return engine.verify_mirrors(
            self.load(),
            link,
            spark,
            mirrors=mirrors,
            sample=sample,
            max_bytes_per_second=max_bytes_per_second,
            seed=seed,
        )

    # --- writes: only ever called inside runs -----------------------------------

    def run_cycle(self, link: str, spark, mirrors: Sequence[str] | None = None, progress=None) -> CycleResult:
        return engine.run_cycle(self.load(), link, spark, mirrors=mirrors, progress=progress)

    def sync_configs(self, link: str, mirrors: Sequence[str] | None = None):
        return engine.sync_configs(self.load(), link, mirrors=mirrors)

    def sync_offsets(self, link: str, mirrors: Sequence[str] | None = None) -> engine.OffsetSyncResult:
        return engine.sync_offsets(self.load(), link, mirrors=mirrors)

    def sync_acls(self, link: str, dry_run: bool = False) -> engine.AclSyncResult:
        return engine.sync_acls(self.load(), link, dry_run=dry_run)

    def check_health(self, link: str) -> dict[str, str]:
        return engine.check_health(self.load(), link)

    def auto_create(self, link: str) -> engine.AutoCreateResult:
        return engine.auto_create(self.load(), link)

    def promote(self, link: str, spark, mirrors: Sequence[str], timeout_s: float) -> engine.LifecycleResult:
        return engine.promote(self.load(), link, spark, mirrors, timeout_s)

    def failover(self, link: str, mirrors: Sequence[str]) -> engine.LifecycleResult:
        return engine.failover(self.load(), link, mirrors)

    def reverse(
        self,
        link: str,
        mirrors: Sequence[str],
        reverse_link: str | None,
        start: bool,
        dry_run: bool = False,
        realign_groups: bool = False,
    ) -> engine.LifecycleResult:
        return engine.reverse(self.load(), link, mirrors, reverse_link, start, dry_run, realign_groups)

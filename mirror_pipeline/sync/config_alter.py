"""Applying a config sync's changes: alter the mirrors' configs, then wait until brokers show them."""

from __future__ import annotations

import time

from mirror_pipeline.config.redaction import scrub
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.kafka.controller_requests import request_batches
from mirror_pipeline.kafka.topic_configs import describe_topic_configs, setting
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError

Changes = dict[str, dict[str, tuple[str, str]]]  # mirror -> name -> (old value, new value)


def alter_configs(ctx: LinkContext, changes: Changes, secrets: list[str]) -> dict[str, str]:
    """SET the changes, one resource per mirror, in as few requests as the controller takes (each
    config set is a metadata record, `controller_requests.RECORDS_PER_REQUEST`); mirror -> error of
    those that failed."""
    errors: dict[str, str] = {}
    for batch in request_batches(sorted(changes), lambda m: len(changes[m])):
        errors.update(_alter_batch(ctx, {m: changes[m] for m in batch}, secrets))
    return errors


def _alter_batch(ctx: LinkContext, changes: Changes, secrets: list[str]) -> dict[str, str]:
    resources = {m: setting(m, {n: new for n, (_, new) in sorted(c.items())}) for m, c in changes.items()}
    alias = ctx.dest.alias
    try:
        with kc.kafka_errors(f"cluster '{alias}': altering configs failed"):
            futures = ctx.dest_admin.incremental_alter_configs(
                list(resources.values()), request_timeout=kc.REQUEST_TIMEOUT_S
            )
    except MirrorError as exc:
        return dict.fromkeys(resources, scrub(str(exc), secrets))
    by_name = {res.name: fut for res, fut in futures.items()}
    errors: dict[str, str] = {}
    for m in resources:
        try:
            with kc.kafka_errors(f"cluster '{alias}': setting {', '.join(sorted(changes[m]))} on '{m}' failed"):
                by_name[m].result()
        except MirrorError as exc:
            errors[m] = scrub(str(exc), secrets)
    return errors


def await_visible(ctx: LinkContext, changes: Changes, timeout: float = 5.0) -> None:
    """Wait (briefly) until the broker describes the new values.

    An alter is acknowledged by the controller; brokers take their metadata a
    moment later. Waiting keeps a drift check that runs right after a sync
    from reporting the old values. Past the timeout the alter still counts.
    """
    deadline = time.monotonic() + timeout
    waiting = dict(changes)
    while waiting and time.monotonic() < deadline:
        for m, c in list(waiting.items()):
            try:
                now = describe_topic_configs(ctx.dest_admin, m, ctx.dest.alias)
            except MirrorError:
                del waiting[m]
                continue
            if all(now.get(n) == new for n, (_, new) in c.items()):
                del waiting[m]
        if waiting:
            time.sleep(0.1)

"""Guard passes racing a failover on the secured pair: a stopped topic is never left locked (R-ACL-3, R-LC-8).

A config sync re-applies the read-only guard of every mirror it syncs, while a
failover lifts it. Threads keep running guard passes and config syncs while
the failover runs, at a seeded moment. Afterwards the topic must be a normal
one: no binding the link created is left, and an application allowed to write
to every topic writes to it.
"""

from __future__ import annotations

import random
import threading
import time

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from mirror_pipeline import engine
from mirror_pipeline.kafka import acls
from mirror_pipeline.link import write_guard
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorError
from tests.faults.conftest import FULL
from tests.faults.harness import Verdict
from tests.faults.test_kills import SEED
from tests.secured_link import LINK, grant, produce, settings

ROUNDS = 6 if FULL else 2


def test_guard_passes_racing_a_failover_never_lock_the_stopped_topic(
    secure_kafka, principals, secured_link, fault_report
):
    config, east = secured_link["config"], secured_link["east"]
    app = f"User:{principals['app']}"
    grant(
        east,
        "us-east",
        [
            AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, app, "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ],
    )
    west = settings(secure_kafka, "admin", 0)
    rng = random.Random(f"{SEED}-write-guard")
    verdict = Verdict()
    for round_ in range(ROUNDS):
        topic = f"{secured_link['topic']}-{round_}"
        secured_link["west"].create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
        grant(secured_link["west"], "us-west", _source_reads(topic, principals["src"]))
        grant(east, "us-east", _destination_owns(topic, principals["dst"]))
        assert produce(west, topic, 20) == []
        engine.create_mirror(config, LINK, topic)

        stop = threading.Event()
        errors: list[BaseException] = []

        # This round's event, topic and error list come in as arguments, not from the enclosing loop.
        def keep_guarding(sync: bool, stop: threading.Event, topic: str, errors: list[BaseException]) -> None:
            ctx = LinkContext.open(config, LINK)
            while not stop.is_set():
                try:
                    if sync:
                        engine.sync_configs(config, LINK, [topic])
                    else:
                        write_guard.guard(ctx, topic)
                except MirrorError:
                    pass  # a sync refused while the mirror stops is fine; a locked topic is not
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)
                    return

        threads = [threading.Thread(target=keep_guarding, args=(sync, stop, topic, errors)) for sync in (False, True)]
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(0.0, 1.5))
        try:
            assert engine.failover(config, LINK, [topic]).mirrors[topic]["after"] == "STOPPED"
            time.sleep(rng.uniform(0.0, 1.0))
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
        assert not errors, errors

        left = acls.describe_bindings(
            east,
            "us-east",
            AclBindingFilter(
                ResourceType.TOPIC,
                topic,
                ResourcePatternType.LITERAL,
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.DENY,
            ),
        )
        written = produce(settings(secure_kafka, principals["app"], 1), topic, 3, start=100)
        verdict.records_checked += 3
        if left:
            verdict.note("wrong_states", f"{topic}: {len(left)} DENY binding(s) left after the failover")
        if written:
            verdict.note("wrong_states", f"{topic}: the application's writes were refused after the failover")
    fault_report.race(f"guard passes racing a failover, {ROUNDS} rounds (secured pair)")(verdict)
    assert verdict.clean, verdict.problems


def _source_reads(topic: str, user: str) -> list[AclBinding]:
    return [
        AclBinding(
            ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", op, AclPermissionType.ALLOW
        )
        for op in (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.DESCRIBE_CONFIGS)
    ]


def _destination_owns(topic: str, user: str) -> list[AclBinding]:
    ops = (
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.ALTER,
        AclOperation.DELETE,
    )
    return [
        AclBinding(
            ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", op, AclPermissionType.ALLOW
        )
        for op in ops
    ]

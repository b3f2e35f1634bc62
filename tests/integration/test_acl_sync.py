"""ACL sync (R-ACL-1) on real clusters that authorize: the session's sasl_ssl pair `secure_kafka`.

The pair is shared by every test of the session (and by other pytest runs),
so each test names its own principals, topics and link state topic, and
scopes its filters to its own principals: bindings other tests leave behind
are then someone else's, exactly as on a shared production cluster.

ACLs reach a broker's cache through the metadata log, so what a test wrote
is awaited before it is relied on (`_await_bindings`).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from mirror_pipeline import engine
from mirror_pipeline.cli import cli
from mirror_pipeline.config.acl_filters import BindingKey
from mirror_pipeline.config.loader import load_config
from mirror_pipeline.kafka import acls
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.link.context import LinkContext
from mirror_pipeline.model.errors import MirrorRefused

pytestmark = pytest.mark.integration

LINK = "west-to-east"


def _uid() -> str:
    return uuid.uuid4().hex[:8]


def _key(
    rtype: str, name: str, principal: str, operation: str = "read", permission: str = "allow", pattern: str = "literal"
) -> BindingKey:
    return BindingKey(rtype, name, pattern, principal, "*", operation, permission)


def _admin(kafka, cluster: int):
    return kc.admin_client(kafka.client_properties("admin", cluster))


def _of_principals(admin, alias: str, principals: set[str]) -> set[BindingKey]:
    """The cluster's bindings of `principals` (other tests' bindings are not this test's business)."""
    found = set()
    for principal in principals:
        f = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, principal, None, AclOperation.ANY, AclPermissionType.ANY
        )
        found |= {acls.binding_key(b) for b in acls.describe_bindings(admin, alias, f)}
    return found


def _await_bindings(admin, alias: str, principals: set[str], expected: set[BindingKey], timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        found = _of_principals(admin, alias, principals)
        if found == expected:
            return
        assert time.monotonic() < deadline, f"{alias}: bindings {sorted(found)} never became {sorted(expected)}"
        time.sleep(0.2)


def _create(kafka, cluster: int, keys) -> None:
    acls.create_bindings(_admin(kafka, cluster), "test", [acls.binding_from_key(k) for k in keys])


def _delete(kafka, cluster: int, keys) -> None:
    acls.delete_bindings(_admin(kafka, cluster), "test", [acls.binding_from_key(k) for k in keys])


def _filters(*entries: dict) -> str:
    return json.dumps({"aclFilters": list(entries)})


def _principal_filter(principal: str, **resource) -> dict:
    out: dict = {"accessFilter": {"principal": principal}}
    if resource:
        out["resourceFilter"] = resource
    return out


def _write_config(path: Path, source: dict, destination: dict, tag: str, settings: dict) -> Path:
    """One link us-west -> us-east, with a state topic of its own (records never meet other tests')."""
    data = {
        "clusters": {"us-west": source, "us-east": destination},
        "links": {
            LINK: {
                "source": "us-west",
                "destination": "us-east",
                "acl.sync.enable": True,
                "mirror.state.topic": f"_acl-{tag}.state",
                "mirror.offset.map.topic": f"_acl-{tag}.omap",
                **settings,
            }
        },
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def secure_config(tmp_path: Path, secure_kafka):
    """Factory: a config on the secure pair, both clusters as the super user `admin`."""

    def write(filters: str, **settings) -> Path:
        return _write_config(
            tmp_path / "mirror.yaml",
            secure_kafka.client_properties("admin", 0),
            secure_kafka.client_properties("admin", 1),
            _uid(),
            {"acl.filters": filters, **settings},
        )

    return write


def test_additions_removals_foreign_and_preexisting_bindings(secure_kafka, secure_config):
    u = _uid()
    app, ops = f"User:app-{u}", f"User:ops-{u}"
    topic_read = _key("topic", f"orders-{u}", app)
    group_read = _key("group", f"billing-{u}", app)
    preexisting = _key("topic", f"pre-{u}", app, "describe")
    foreign = _key("topic", f"theirs-{u}", app, "write")  # on the destination only, matched by the filters
    other = _key("topic", f"orders-{u}", ops)  # on the source, not selected
    _create(secure_kafka, 0, [topic_read, group_read, preexisting, other])
    _create(secure_kafka, 1, [foreign, preexisting])
    west, east = _admin(secure_kafka, 0), _admin(secure_kafka, 1)
    _await_bindings(west, "us-west", {app, ops}, {topic_read, group_read, preexisting, other})
    _await_bindings(east, "us-east", {app, ops}, {foreign, preexisting})
    config = load_config(secure_config(_filters(_principal_filter(app))))

    preview = engine.sync_acls(config, LINK, dry_run=True)
    assert preview.dry_run and {BindingKey(**_fields(b)) for b in preview.created} == {topic_read, group_read}
    assert not preview.deleted
    time.sleep(1)  # a dry run that wrote anything would show by now
    assert _of_principals(east, "us-east", {app, ops}) == {foreign, preexisting}

    first = engine.sync_acls(config, LINK)
    assert {BindingKey(**_fields(b)) for b in first.created} == {topic_read, group_read} and not first.deleted
    assert first.foreign >= 2 and first.in_sync_bindings == 1  # `preexisting` was there: not the link's
    _await_bindings(east, "us-east", {app, ops}, {topic_read, group_read, foreign, preexisting})
    assert engine.sync_acls(config, LINK).in_sync

    _delete(secure_kafka, 0, [group_read, preexisting])
    _await_bindings(west, "us-west", {app, ops}, {topic_read, other})
    removal = engine.sync_acls(config, LINK)
    assert [BindingKey(**_fields(b)) for b in removal.deleted] == [group_read] and not removal.created
    # The foreign binding and the one that predates the link are left alone.
    _await_bindings(east, "us-east", {app, ops}, {topic_read, foreign, preexisting})

    last = engine.acl_sync_status(config, LINK)
    assert (last["created"], last["deleted"], last["error"]) == (0, 1, "")


class _Killed(BaseException):
    """Stands for a kill -9: nothing after it runs, no handler sees it."""


def test_a_sync_killed_between_its_steps_never_loses_track_of_a_binding(secure_kafka, secure_config, monkeypatch):
    u = _uid()
    app = f"User:crash-{u}"
    binding = _key("topic", f"orders-{u}", app)
    _create(secure_kafka, 0, [binding])
    west, east = _admin(secure_kafka, 0), _admin(secure_kafka, 1)
    _await_bindings(west, "us-west", {app}, {binding})
    config = load_config(secure_config(_filters(_principal_filter(app))))

    def record() -> set[BindingKey]:
        stored = LinkContext.open(config, LINK).store.read_acl_record()
        return {acls.key_from_dict(d) for d in stored.get("bindings", [])}

    # Killed after recording the creation, before creating: recorded, not created.
    def killed(*_args, **_kwargs):
        raise _Killed()

    with monkeypatch.context() as m:
        m.setattr(acls, "create_bindings", killed)
        with pytest.raises(_Killed):
            engine.sync_acls(config, LINK)
    assert binding in record() and _of_principals(east, "us-east", {app}) == set()
    engine.sync_acls(config, LINK)  # the next sync creates it
    _await_bindings(east, "us-east", {app}, {binding})
    assert record() == {binding}

    # Killed after deleting, before un-recording: the next sync forgets it.
    _delete(secure_kafka, 0, [binding])
    _await_bindings(west, "us-west", {app}, set())
    real_delete = acls.delete_bindings

    def delete_then_die(*args, **kwargs):
        real_delete(*args, **kwargs)
        raise _Killed()

    with monkeypatch.context() as m:
        m.setattr(acls, "delete_bindings", delete_then_die)
        with pytest.raises(_Killed):
            engine.sync_acls(config, LINK)
    _await_bindings(east, "us-east", {app}, set())
    assert record() == {binding}
    after = engine.sync_acls(config, LINK)
    assert after.forgotten == 1 and not after.deleted and record() == set()


def test_each_filter_kind_selects_what_kafka_would(secure_kafka, secure_config):
    u = _uid()
    p1, p2 = f"User:one-{u}", f"User:two-{u}"
    orders = f"orders-{u}"
    b1 = _key("topic", orders, p1)
    b2 = _key("topic", orders, p1, pattern="prefixed")
    b3 = _key("group", f"g-{u}", p1)
    b4 = _key("topic", orders, p2, "write")
    b5 = _key("topic", orders, p2, "read", "deny")
    b6 = _key("transactional_id", f"tx-{u}", p1, "write")
    _create(secure_kafka, 0, [b1, b2, b3, b4, b5, b6])
    _await_bindings(_admin(secure_kafka, 0), "us-west", {p1, p2}, {b1, b2, b3, b4, b5, b6})
    both = [_principal_filter(p1), _principal_filter(p2)]
    cases = {
        "resource type": ([_principal_filter(p1, resourceType="group")], {b3}),
        "literal name": ([_principal_filter(p1, name=orders, patternType="literal")], {b1}),
        "prefixed name": ([_principal_filter(p1, name=orders, patternType="prefixed")], {b2}),
        "name, any pattern": ([_principal_filter(p1, name=orders)], {b1, b2}),
        "match": ([_principal_filter(p1, resourceType="topic", name=f"{orders}-eu", patternType="match")], {b2}),
        "principal": ([_principal_filter(p2)], {b4, b5}),
        "operation": ([{**f, "accessFilter": {**f["accessFilter"], "operation": "write"}} for f in both], {b4, b6}),
        "permission": ([{"accessFilter": {"principal": p2, "permissionType": "deny"}}], {b5}),
        "exclude": (
            [_principal_filter(p1), {"resourceFilter": {"resourceType": "group"}, "filterType": "EXCLUDE"}],
            {b1, b2, b6},
        ),
    }
    for kind, (entries, expected) in cases.items():
        preview = engine.sync_acls(load_config(secure_config(_filters(*entries))), LINK, dry_run=True)
        assert {BindingKey(**_fields(b)) for b in preview.created} == expected, kind


def test_topic_names_are_mapped_by_the_default_replication_policy(secure_kafka, secure_config):
    u = _uid()
    app = f"User:mm2-{u}"
    literal = _key("topic", f"orders-{u}", app)
    prefixed = _key("topic", f"pay-{u}", app, pattern="prefixed")
    group = _key("group", f"g-{u}", app)
    _create(secure_kafka, 0, [literal, prefixed, group])
    _await_bindings(_admin(secure_kafka, 0), "us-west", {app}, {literal, prefixed, group})
    config = load_config(
        secure_config(_filters(_principal_filter(app)), **{"replication.policy.class": "DefaultReplicationPolicy"})
    )
    engine.sync_acls(config, LINK)
    _await_bindings(
        _admin(secure_kafka, 1),
        "us-east",
        {app},
        {
            literal._replace(name=f"us-west.orders-{u}"),
            prefixed._replace(name=f"us-west.pay-{u}"),
            group,  # group names are not topic names: unchanged
        },
    )


def test_cli_dry_run_changes_nothing_and_describe_shows_the_last_sync(secure_kafka, secure_config):
    u = _uid()
    app = f"User:cli-{u}"
    binding = _key("topic", f"orders-{u}", app)
    _create(secure_kafka, 0, [binding])
    _await_bindings(_admin(secure_kafka, 0), "us-west", {app}, {binding})
    path = secure_config(_filters(_principal_filter(app)))
    runner = CliRunner()

    dry = runner.invoke(cli, ["link", "sync-acls", LINK, "--dry-run", "--config", str(path)])
    assert dry.exit_code == 0, dry.output
    assert "1 would create, 0 would delete" in dry.output and f"orders-{u}" in dry.output
    time.sleep(1)
    assert _of_principals(_admin(secure_kafka, 1), "us-east", {app}) == set()
    described = runner.invoke(cli, ["link", "describe", LINK, "--config", str(path)])
    assert "last ACL sync: never" in described.output  # a dry run records nothing

    done = runner.invoke(cli, ["link", "sync-acls", LINK, "--json", "--config", str(path)])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["created"] == [acls.binding_to_dict(binding)]
    described = runner.invoke(cli, ["link", "describe", LINK, "--json", "--config", str(path)])
    last = json.loads(described.output)["acl_sync"]
    assert (last["created"], last["deleted"], last["error"]) == (1, 0, "")
    for password in _passwords(secure_kafka):
        assert password not in dry.output + done.output + described.output


def test_a_principal_that_may_not_describe_acls_is_refused_not_read_as_no_acls(secure_kafka, tmp_path):
    u = _uid()
    weak = f"weak-{u}"
    secure_kafka.create_user(weak)
    path = _write_config(
        tmp_path / "mirror.yaml",
        secure_kafka.client_properties(weak, 0),
        secure_kafka.client_properties("admin", 1),
        u,
        {"acl.filters": _filters(_principal_filter(f"User:{weak}"))},
    )
    with pytest.raises(MirrorRefused) as err:
        engine.sync_acls(load_config(path), LINK)
    assert (
        str(err.value)
        == "cluster 'us-west': the link's principal may not describe ACLs (needs DESCRIBE on the cluster)"
    )


def test_a_destination_without_an_authorizer_is_refused(secure_kafka, local_kafka, tmp_path):
    u = _uid()
    path = _write_config(
        tmp_path / "mirror.yaml",
        secure_kafka.client_properties("admin", 0),
        {"bootstrap.servers": local_kafka.bootstraps[1]},
        u,
        {"acl.filters": _filters({"resourceFilter": {"resourceType": "topic"}})},
    )
    result = CliRunner().invoke(cli, ["link", "sync-acls", LINK, "--config", str(path)])
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"error: link '{LINK}': cluster 'us-east' has no authorizer, so it keeps no ACLs and ACL sync cannot "
        f"run (configure one, e.g. StandardAuthorizer, or set acl.sync.enable to false)"
    )
    # Refused before anything: not even the link's state topic was created to record it.
    plain = kc.admin_client({"bootstrap.servers": local_kafka.bootstraps[1]})
    assert kc.topic_partitions(plain, f"_acl-{u}.state", "us-east") is None


def test_nothing_happens_when_acl_sync_is_off(secure_kafka, tmp_path):
    path = _write_config(
        tmp_path / "mirror.yaml",
        secure_kafka.client_properties("admin", 0),
        secure_kafka.client_properties("admin", 1),
        _uid(),
        {"acl.sync.enable": False},
    )
    result = engine.sync_acls(load_config(path), LINK)
    assert not result.enabled and "acl.sync.enable is false" in result.message


def _fields(d: dict) -> dict:
    return {
        "resource_type": d["resourceType"],
        "name": d["name"],
        "pattern_type": d["patternType"],
        "principal": d["principal"],
        "host": d["host"],
        "operation": d["operation"],
        "permission_type": d["permissionType"],
    }


def _passwords(kafka) -> list[str]:
    return [v for c in (0, 1) for k, v in kafka.client_properties("admin", c).items() if k == "sasl.password"]

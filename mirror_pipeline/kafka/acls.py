"""ACL bindings on one cluster: describe, create, delete, and one stable JSON form (R-ACL-1).

Thin over confluent-kafka's ACL admin calls. Kafka errors become the project's
errors here (through `clients.kafka_errors`), each naming the cluster by its
alias and never a client setting. An authorization failure says which right
on the CLUSTER resource the link's principal lacks.

Kafka's CLUSTER resource is librdkafka's BROKER type; the JSON form says
`cluster`, as Cluster Linking's ACL JSON does. Every enum is written as its
lower-case name (`topic`, `prefixed`, `read`, `allow`).

librdkafka (2.16 included) drops DescribeAcls' error code: a refused
principal and a cluster without an authorizer both get an empty list, as if
the cluster had no ACLs. So `describe_bindings` checks the principal's
DESCRIBE right first, and `authorizer_enabled` asks the broker's config
rather than DescribeAcls.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import cast

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from mirror_pipeline.config.acl_filters import BindingKey
from mirror_pipeline.kafka import clients as kc
from mirror_pipeline.model.errors import ClusterUnreachable, MirrorError, MirrorRefused

# Kafka names the one CLUSTER resource so; ACLs on it carry this name.
CLUSTER_RESOURCE_NAME = "kafka-cluster"

# Every binding of the cluster (DescribeAcls' "all").
# None matches any name, principal and host (confluent-kafka's documented wildcard), though its type hints say str.
ANY_BINDING = AclBindingFilter(
    ResourceType.ANY,
    None,  # type: ignore[arg-type]
    ResourcePatternType.ANY,
    None,  # type: ignore[arg-type]
    None,  # type: ignore[arg-type]
    AclOperation.ANY,
    AclPermissionType.ANY,
)

# The JSON form's keys, in the order of `binding_key`.
FIELDS = ("resourceType", "name", "patternType", "principal", "host", "operation", "permissionType")

_AUTHORIZATION = frozenset(
    {
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
    }
)
_UNREACHABLE = frozenset(
    {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError.REQUEST_TIMED_OUT}
)


# --- the JSON form ----------------------------------------------------------------------


def resource_type_name(restype: ResourceType) -> str:
    return "cluster" if restype == ResourceType.BROKER else restype.name.lower()


def resource_type_of(name: str) -> ResourceType:
    """The ResourceType a JSON name stands for (`cluster` is librdkafka's BROKER)."""
    upper = str(name).upper()
    if upper == "CLUSTER":
        return ResourceType.BROKER
    if upper in ("BROKER", "UNKNOWN") or upper not in ResourceType.__members__:
        raise ValueError(f"unknown resource type {name!r}")
    return ResourceType[upper]


def _enum_of(enum_cls, name: str, what: str):
    upper = str(name).upper()
    if upper == "UNKNOWN" or upper not in enum_cls.__members__:
        raise ValueError(f"unknown {what} {name!r}")
    return enum_cls[upper]


def pattern_type_of(name: str) -> ResourcePatternType:
    return _enum_of(ResourcePatternType, name, "pattern type")


def operation_of(name: str) -> AclOperation:
    return _enum_of(AclOperation, name, "operation")


def permission_of(name: str) -> AclPermissionType:
    return _enum_of(AclPermissionType, name, "permission type")


def binding_key(binding: AclBinding) -> BindingKey:
    """A binding as a sortable, hashable tuple of strings, in `FIELDS` order (what filters match)."""
    restype, pattern_type, operation, permission_type = _enums(binding)
    return BindingKey(
        resource_type_name(restype),
        binding.name,
        pattern_type.name.lower(),
        binding.principal,
        binding.host,
        operation.name.lower(),
        permission_type.name.lower(),
    )


def _enums(binding: AclBinding) -> tuple[ResourceType, ResourcePatternType, AclOperation, AclPermissionType]:
    """A binding's enum fields. confluent-kafka converts them to enums as it builds the binding, but
    types them as its constructor's arguments (enum, str or int)."""
    return cast(
        tuple[ResourceType, ResourcePatternType, AclOperation, AclPermissionType],
        (binding.restype, binding.resource_pattern_type, binding.operation, binding.permission_type),
    )


def binding_to_dict(binding: AclBinding | BindingKey) -> dict[str, str]:
    key = binding if isinstance(binding, BindingKey) else binding_key(binding)
    return dict(zip(FIELDS, key, strict=True))


def key_from_dict(data: dict) -> BindingKey:
    """The key of a `binding_to_dict` form, checked; raises MirrorError when it is not a binding."""
    return binding_key(binding_from_dict(data))


def binding_from_dict(data: dict) -> AclBinding:
    """The binding a `binding_to_dict` form stands for; raises MirrorError when it is not one."""
    if not isinstance(data, dict):
        raise MirrorError("not an ACL binding: expected a mapping")
    missing = [k for k in FIELDS if not isinstance(data.get(k), str)]
    if missing:
        raise MirrorError(f"not an ACL binding: missing {', '.join(missing)}")
    return binding_from_key(BindingKey(*(data[k] for k in FIELDS)))


def binding_from_key(key: BindingKey) -> AclBinding:
    """The binding a key stands for; raises MirrorError when it is not one (an `any` in it, say)."""
    try:
        return AclBinding(
            resource_type_of(key.resource_type),
            key.name,
            pattern_type_of(key.pattern_type),
            key.principal,
            key.host,
            operation_of(key.operation),
            permission_of(key.permission_type),
        )
    except (ValueError, TypeError) as exc:
        raise MirrorError(f"not an ACL binding: {exc}") from None


def exact_filter(binding: AclBinding) -> AclBindingFilter:
    """A filter that matches `binding` and nothing else (LITERAL/PREFIXED names match as written)."""
    return AclBindingFilter(
        binding.restype,
        binding.name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )


# --- admin calls ------------------------------------------------------------------------


@contextmanager
def _acl_errors(alias: str, doing: str, right: str) -> Iterator[None]:
    """Kafka errors of an ACL call into the project's: `doing` is e.g. "create ACLs",
    `right` the operation on the CLUSTER resource that call needs."""
    try:
        yield
    except KafkaException as exc:
        code = kc.error_code(exc)
        if code in _AUTHORIZATION:
            raise MirrorRefused(
                f"cluster '{alias}': the link's principal may not {doing} (needs {right} on the cluster)"
            ) from None
        if code == KafkaError.SECURITY_DISABLED:
            raise MirrorRefused(
                f"cluster '{alias}' has no authorizer (it answers SECURITY_DISABLED), so it keeps no ACLs"
            ) from None
        error = ClusterUnreachable if code in _UNREACHABLE else MirrorError
        with kc.kafka_errors(f"cluster '{alias}': could not {doing}", error):
            raise


def describe_bindings(
    admin: AdminClient,
    alias: str,
    binding_filter: AclBindingFilter = ANY_BINDING,
    timeout: float = kc.REQUEST_TIMEOUT_S,
) -> list[AclBinding]:
    """The cluster's bindings that `binding_filter` matches, sorted by `binding_key`.

    librdkafka drops DescribeAcls' error code: a principal that may not
    describe ACLs, or a cluster without an authorizer, gets an empty list that
    reads as "no ACLs". Syncing from such a list would delete everything, so
    the principal's DESCRIBE right on the cluster is checked first (a cluster
    without an authorizer grants it: see `authorizer_enabled` for that case).
    Bindings librdkafka cannot name (resource types or operations newer than
    it, read back as UNKNOWN) are left out: they could be neither matched nor
    created faithfully.
    """
    if not may_on_cluster(admin, alias, AclOperation.DESCRIBE, timeout):
        raise MirrorRefused(
            f"cluster '{alias}': the link's principal may not describe ACLs (needs DESCRIBE on the cluster)"
        )
    with _acl_errors(alias, "describe ACLs", "DESCRIBE"):
        found = admin.describe_acls(binding_filter, request_timeout=timeout).result()
    return sorted((b for b in found if _nameable(b)), key=binding_key)


def _nameable(binding: AclBinding) -> bool:
    return all(e.name != "UNKNOWN" for e in _enums(binding))


def may_on_cluster(
    admin: AdminClient, alias: str, operation: AclOperation, timeout: float = kc.REQUEST_TIMEOUT_S
) -> bool:
    """Whether the link's principal may do `operation` on the CLUSTER resource (the broker says,
    implied rights included: ALTER implies DESCRIBE)."""
    with _acl_errors(alias, "describe the cluster", "DESCRIBE"):
        described = admin.describe_cluster(include_authorized_operations=True, request_timeout=timeout).result()
    granted = set(described.authorized_operations or ())
    return operation in granted or AclOperation.ALL in granted


def create_bindings(
    admin: AdminClient, alias: str, bindings: Iterable[AclBinding], timeout: float = kc.REQUEST_TIMEOUT_S
) -> None:
    """Create every binding (creating one that exists is a no-op for Kafka).

    All are tried; the first failure is raised afterwards, so one refused
    binding does not keep the others from being created.
    """
    wanted = sorted(set(bindings), key=binding_key)
    if not wanted:
        return
    with _acl_errors(alias, "create ACLs", "ALTER"):
        futures = admin.create_acls(wanted, request_timeout=timeout)
    _results(alias, "create ACLs", [futures[b] for b in wanted])


def delete_bindings(
    admin: AdminClient, alias: str, bindings: Iterable[AclBinding], timeout: float = kc.REQUEST_TIMEOUT_S
) -> list[AclBinding]:
    """Delete each binding by an exact-match filter; returns the bindings the cluster deleted."""
    filters = [exact_filter(b) for b in sorted(set(bindings), key=binding_key)]
    if not filters:
        return []
    with _acl_errors(alias, "delete ACLs", "ALTER"):
        futures = admin.delete_acls(filters, request_timeout=timeout)
    deleted = _results(alias, "delete ACLs", [futures[f] for f in filters])
    return sorted((b for found in deleted for b in found or ()), key=binding_key)


def _results(alias: str, doing: str, futures: list) -> list:
    """Every future's result; after waiting for all, the first failure is raised (worded by `_acl_errors`)."""
    results, first = [], None
    for fut in futures:
        try:
            results.append(fut.result())
        except KafkaException as exc:
            first = first or exc
    if first is not None:
        with _acl_errors(alias, doing, "ALTER"):
            raise first
    return results


def authorizer_enabled(admin: AdminClient, alias: str, timeout: float = kc.REQUEST_TIMEOUT_S) -> bool:
    """Whether the cluster runs an authorizer (one that keeps ACLs).

    DescribeAcls cannot tell (see `describe_bindings`), so a broker's
    `authorizer.class.name` decides. When the principal may not read broker
    configs, a DeleteAcls of a binding no one can have decides instead: a
    cluster without an authorizer answers it SECURITY_DISABLED, one with an
    authorizer deletes nothing (or refuses, which needs an authorizer too).
    """
    try:
        return bool(_broker_config(admin, "authorizer.class.name", timeout))
    except KafkaException as exc:
        if kc.error_code(exc) not in _AUTHORIZATION:
            with _acl_errors(alias, "describe broker configs", "DESCRIBE_CONFIGS"):
                raise
    try:
        admin.delete_acls([exact_filter(_NEVER_A_BINDING)], request_timeout=timeout)[
            exact_filter(_NEVER_A_BINDING)
        ].result()
    except KafkaException as exc:
        code = kc.error_code(exc)
        if code == KafkaError.SECURITY_DISABLED:
            return False
        if code not in _AUTHORIZATION:
            with _acl_errors(alias, "probe for an authorizer", "ALTER"):
                raise
    return True


# `/` is in no topic name: no one grants this.
_NEVER_A_BINDING = AclBinding(
    ResourceType.TOPIC,
    "mirror-pipeline/authorizer-probe",
    ResourcePatternType.LITERAL,
    "User:mirror-pipeline/authorizer-probe",
    "*",
    AclOperation.READ,
    AclPermissionType.DENY,
)


def _broker_config(admin: AdminClient, name: str, timeout: float) -> str:
    """One broker's value of config `name` (any broker: the ones read here are set cluster-wide)."""
    described = admin.describe_cluster(request_timeout=timeout).result()
    resource = ConfigResource(ResourceType.BROKER, str(described.nodes[0].id))
    entry = admin.describe_configs([resource], request_timeout=timeout)[resource].result().get(name)
    return (entry.value or "") if entry is not None else ""

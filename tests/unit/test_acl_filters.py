"""`acl.filters`: Cluster Linking's ACL filter JSON, parsed at config load into typed filters."""

import dataclasses
import json

import pytest

from mirror_pipeline.config.acl_filters import AclFilter, AclFilters, BindingKey
from mirror_pipeline.config.filters import FilterType
from mirror_pipeline.config.loader import parse_config
from mirror_pipeline.model.errors import ConfigError

SRC = "mirror.yaml"
WHERE = "mirror.yaml: links.l.acl.filters"


def binding(
    rtype="topic",
    name="orders",
    pattern="literal",
    principal="User:app",
    host="*",
    operation="read",
    permission="allow",
) -> BindingKey:
    return BindingKey(rtype, name, pattern, principal, host, operation, permission)


def entry(resource=None, access=None, filter_type=None) -> dict:
    out: dict = {}
    if resource is not None:
        out["resourceFilter"] = resource
    if access is not None:
        out["accessFilter"] = access
    if filter_type is not None:
        out["filterType"] = filter_type
    return out


def parse(*entries) -> AclFilters:
    return AclFilters.parse({"aclFilters": list(entries)}, where=WHERE)


def config(**settings) -> dict:
    return {
        "clusters": {"a": {"bootstrap.servers": "h1:9092"}, "b": {"bootstrap.servers": "h2:9092"}},
        "links": {"l": {"source": "a", "destination": "b", **settings}},
    }


def problem(data) -> str:
    with pytest.raises(ConfigError) as err:
        parse_config(data, SRC, {})
    return str(err.value)


ALL_TOPICS_READ = {
    "aclFilters": [
        {
            "resourceFilter": {"resourceType": "topic", "patternType": "any"},
            "accessFilter": {"operation": "read", "permissionType": "allow"},
        }
    ]
}


class TestLoading:
    def test_json_string_and_yaml_structure_give_the_same_filters(self):
        from_yaml = parse_config(config(**{"acl.filters": ALL_TOPICS_READ}), SRC, {}).link("l").acl_filters
        from_json = parse_config(config(**{"acl.filters": json.dumps(ALL_TOPICS_READ)}), SRC, {}).link("l").acl_filters
        assert isinstance(from_yaml, AclFilters) and from_yaml == from_json
        assert from_yaml.filters == (AclFilter(resource_type="topic", operation="read", permission_type="allow"),)

    def test_the_link_setting_is_typed_and_to_dict_shows_the_json_form(self):
        link = parse_config(config(**{"acl.sync.enable": True, "acl.filters": ALL_TOPICS_READ}), SRC, {}).link("l")
        assert link.acl_sync_enable and link.acl_sync_ms == 60000
        assert link.to_dict()["acl.filters"] == {
            "aclFilters": [
                {
                    "resourceFilter": {"resourceType": "topic", "patternType": "any"},
                    "accessFilter": {"operation": "read", "permissionType": "allow"},
                    "filterType": "INCLUDE",
                }
            ]
        }
        # The JSON form reads back as the same filters.
        assert AclFilters.parse(link.to_dict()["acl.filters"], where=WHERE) == link.acl_filters

    def test_defaults_apply_and_the_link_wins(self):
        data = config()
        data["defaults"] = {"acl.filters": ALL_TOPICS_READ, "acl.sync.enable": True}
        assert not parse_config(data, SRC, {}).link("l").acl_filters.is_empty
        data["links"]["l"]["acl.filters"] = {"aclFilters": [{"resourceFilter": {"resourceType": "group"}}]}
        assert parse_config(data, SRC, {}).link("l").acl_filters.filters[0].resource_type == "group"

    def test_absent_empty_or_null_is_no_filters(self):
        for value in (None, "", "  ", {}, {"aclFilters": None}, {"aclFilters": []}):
            assert AclFilters.parse(value, where=WHERE).is_empty

    def test_enum_values_are_case_insensitive(self):
        f = parse(
            entry(
                {"resourceType": "TOPIC", "patternType": "Prefixed", "name": "Or"},
                {"operation": "Describe_Configs", "permissionType": "DENY"},
                "exclude",
            )
        ).filters[0]
        assert (f.resource_type, f.pattern_type, f.name) == ("topic", "prefixed", "Or")
        assert (f.operation, f.permission_type, f.filter_type) == ("describe_configs", "deny", FilterType.EXCLUDE)

    def test_absent_keys_mean_any(self):
        f = parse(entry()).filters[0]
        assert f == AclFilter()
        assert (f.resource_type, f.pattern_type, f.operation, f.permission_type) == ("any",) * 4
        assert f.name is f.principal is f.host is None and f.filter_type is FilterType.INCLUDE
        assert f.matches(binding()) and f.matches(binding("cluster", "kafka-cluster", operation="alter"))

    def test_frozen(self):
        with pytest.raises(dataclasses.FrozenInstanceError):
            AclFilter().name = "x"


class TestRefusals:
    @pytest.mark.parametrize(
        "value, reason",
        [
            ({"aclFilters": [], "topicFilters": []}, "unknown key 'topicFilters'"),
            ({"aclFilter": []}, "unknown key 'aclFilter' (did you mean 'aclFilters'?)"),
            ({"aclFilters": {}}, "aclFilters: expected a list of filters, got a mapping"),
            (
                {"aclFilters": ["x"]},
                "aclFilters[0]: expected a mapping with resourceFilter, accessFilter and filterType",
            ),
            ({"aclFilters": [{"resource": {}}]}, "aclFilters[0]: unknown key 'resource'"),
            (
                {"aclFilters": [{"resourceFilter": {"type": "topic"}}]},
                "aclFilters[0].resourceFilter: unknown key 'type'",
            ),
            (
                {"aclFilters": [{"accessFilter": {"principals": "User:a"}}]},
                "aclFilters[0].accessFilter: unknown key 'principals' (did you mean 'principal'?)",
            ),
            ({"aclFilters": [{"resourceFilter": []}]}, "aclFilters[0].resourceFilter: expected a mapping"),
            (
                {"aclFilters": [{"resourceFilter": {"resourceType": "user"}}]},
                "aclFilters[0].resourceFilter.resourceType: unknown resource type 'user' "
                "(expected any, topic, group, cluster or transactional_id)",
            ),
            (
                {"aclFilters": [{"resourceFilter": {"patternType": "regex"}}]},
                "aclFilters[0].resourceFilter.patternType: unknown pattern type 'regex' "
                "(expected any, match, literal or prefixed)",
            ),
            (
                {"aclFilters": [{"accessFilter": {"operation": "publish"}}]},
                "aclFilters[0].accessFilter.operation: unknown operation 'publish'",
            ),
            (
                {"aclFilters": [{"accessFilter": {"permissionType": "maybe"}}]},
                "aclFilters[0].accessFilter.permissionType: unknown permission type 'maybe' "
                "(expected any, allow or deny)",
            ),
            (
                {"aclFilters": [{"filterType": "BOTH"}]},
                "aclFilters[0].filterType: unknown filter type 'BOTH' (expected INCLUDE or EXCLUDE)",
            ),
            (
                {"aclFilters": [{"accessFilter": {"operation": 3}}]},
                "aclFilters[0].accessFilter.operation: expected any",
            ),
            (
                {"aclFilters": [{"resourceFilter": {"name": ""}}]},
                "aclFilters[0].resourceFilter.name: expected a non-empty string, got an empty string",
            ),
            (
                {"aclFilters": [{"accessFilter": {"host": 7}}]},
                "aclFilters[0].accessFilter.host: expected a non-empty string, got a number",
            ),
            (
                {"aclFilters": [{"accessFilter": {"principal": "alice"}}]},
                "aclFilters[0].accessFilter.principal: expected a principal such as User:alice, got 'alice'",
            ),
            ("[1]", "expected a mapping or a JSON object string, got a list"),
            ("{nope", "malformed JSON"),
        ],
    )
    def test_refused_naming_the_key_and_why(self, value, reason):
        msg = problem(config(**{"acl.filters": value}))
        assert msg.startswith(f"{WHERE}: ") and reason in msg, msg

    def test_sync_on_needs_at_least_one_filter(self):
        for filters in (None, {"aclFilters": []}, '{"aclFilters": []}'):
            settings = {"acl.sync.enable": True} | ({} if filters is None else {"acl.filters": filters})
            assert (
                problem(config(**settings)) == f"{WHERE}: at least one filter is required when acl.sync.enable is true"
            )

    def test_sync_off_accepts_no_filters(self):
        assert parse_config(config(**{"acl.filters": {"aclFilters": []}}), SRC, {}).link("l").acl_filters.is_empty

    def test_acl_sync_ms_is_bounded_like_the_other_syncs(self):
        assert parse_config(config(**{"acl.sync.ms": "120000"}), SRC, {}).link("l").acl_sync_ms == 120000
        assert problem(config(**{"acl.sync.ms": 0})) == "mirror.yaml: links.l.acl.sync.ms: must be greater than 0"
        assert "links.l.acl.sync.ms: must be at most 86400000" in problem(config(**{"acl.sync.ms": 86_400_001}))
        assert "expected a whole number" in problem(config(**{"acl.sync.ms": "1m"}))

    def test_a_principal_is_never_echoed_when_long(self):
        long = "x" * 500
        msg = problem(config(**{"acl.filters": {"aclFilters": [{"accessFilter": {"principal": long}}]}}))
        assert long not in msg and "of 500 characters" in msg


class TestMatching:
    """Kafka's AclBindingFilter semantics, so a filter means what it means to `kafka-acls --list`."""

    def test_resource_type(self):
        assert AclFilter(resource_type="topic").matches(binding())
        assert not AclFilter(resource_type="group").matches(binding())
        assert AclFilter(resource_type="cluster").matches(binding("cluster", "kafka-cluster"))

    def test_literal_and_prefixed_match_their_own_pattern_type_and_exact_name(self):
        literal = AclFilter(name="orders", pattern_type="literal")
        assert literal.matches(binding()) and not literal.matches(binding(pattern="prefixed"))
        assert not literal.matches(binding(name="orders-eu"))
        prefixed = AclFilter(name="ord", pattern_type="prefixed")
        assert prefixed.matches(binding(name="ord", pattern="prefixed"))
        assert not prefixed.matches(binding(name="orders", pattern="prefixed"))
        assert not prefixed.matches(binding(name="ord"))

    def test_pattern_type_any_is_any_pattern_with_the_exact_name(self):
        f = AclFilter(name="orders")
        assert f.matches(binding()) and f.matches(binding(pattern="prefixed"))
        assert not f.matches(binding(name="orders-eu"))
        assert AclFilter(pattern_type="prefixed").matches(binding(name="x", pattern="prefixed"))
        assert not AclFilter(pattern_type="prefixed").matches(binding())

    def test_match_is_every_binding_that_applies_to_the_named_resource(self):
        f = AclFilter(resource_type="topic", name="orders-eu", pattern_type="match")
        assert f.matches(binding(name="orders-eu"))
        assert f.matches(binding(name="*"))
        assert f.matches(binding(name="orders-", pattern="prefixed"))
        assert f.matches(binding(name="orders-eu", pattern="prefixed"))
        assert not f.matches(binding(name="orders-e"))
        assert not f.matches(binding(name="orders-eu-1", pattern="prefixed"))

    def test_access_fields(self):
        assert AclFilter(principal="User:app").matches(binding())
        assert not AclFilter(principal="User:other").matches(binding())
        assert not AclFilter(principal="User:*").matches(binding())  # exact, as in Kafka
        assert AclFilter(host="*").matches(binding()) and not AclFilter(host="10.0.0.1").matches(binding())
        assert AclFilter(operation="read").matches(binding()) and not AclFilter(operation="write").matches(binding())
        assert not AclFilter(operation="read").matches(binding(operation="all"))
        assert AclFilter(permission_type="allow").matches(binding())
        assert not AclFilter(permission_type="deny").matches(binding())


class TestSelects:
    def test_empty_selects_nothing(self):
        assert not AclFilters().selects(binding())

    def test_exclude_wins_whatever_the_order(self):
        include_topics = AclFilter(resource_type="topic")
        exclude_deny = AclFilter(permission_type="deny", filter_type=FilterType.EXCLUDE)
        for order in ((include_topics, exclude_deny), (exclude_deny, include_topics)):
            fs = AclFilters(order)
            assert fs.selects(binding())
            assert not fs.selects(binding(permission="deny"))
            assert not fs.selects(binding("group", "g"))

    def test_only_exclude_selects_nothing(self):
        assert not AclFilters([AclFilter(principal="User:x", filter_type=FilterType.EXCLUDE)]).selects(binding())


class TestBindingJsonForm:
    """`kafka.acls`' stable JSON form of a binding: lower-case enum names, `cluster` for Kafka's CLUSTER."""

    def test_round_trip(self):
        from mirror_pipeline.kafka import acls

        for key in (
            binding(),
            binding("cluster", "kafka-cluster", operation="idempotent_write"),
            binding("transactional_id", "tx-", "prefixed", permission="deny"),
            binding(name="*"),
        ):
            made = acls.binding_from_key(key)
            assert acls.binding_key(made) == key
            assert acls.binding_from_dict(acls.binding_to_dict(made)) == made
            assert list(acls.binding_to_dict(key)) == list(acls.FIELDS)

    def test_cluster_is_librdkafkas_broker_type(self):
        from confluent_kafka.admin import ResourceType

        from mirror_pipeline.kafka import acls

        assert acls.binding_from_key(binding("cluster", "kafka-cluster")).restype == ResourceType.BROKER
        assert (
            acls.binding_to_dict(acls.binding_from_key(binding("cluster", "kafka-cluster")))["resourceType"]
            == "cluster"
        )

    @pytest.mark.parametrize(
        "change",
        [
            {"operation": "any"},
            {"patternType": "match"},
            {"resourceType": "broker"},
            {"permissionType": "unknown"},
            {"host": None},
        ],
    )
    def test_not_a_binding(self, change):
        from mirror_pipeline.kafka import acls
        from mirror_pipeline.model.errors import MirrorError

        data = {**acls.binding_to_dict(binding()), **change}
        with pytest.raises(MirrorError, match="not an ACL binding"):
            acls.binding_from_dict(data)

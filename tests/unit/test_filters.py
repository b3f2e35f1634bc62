import dataclasses
import json

import pytest

from mirror_pipeline.config.filters import FilterType, NameFilter, NameFilters, PatternType
from mirror_pipeline.model.errors import ConfigError

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
INC, EXC = FilterType.INCLUDE, FilterType.EXCLUDE
WHERE = "mirror.yaml: links.w2e.auto.create.mirror.topics.filters"


def filters(*items: NameFilter) -> NameFilters:
    return NameFilters(items)


def parse(value, list_key="topicFilters"):
    return NameFilters.parse(value, list_key=list_key, where=WHERE)


class TestNameFilter:
    def test_literal_matches_whole_name_only(self):
        f = NameFilter("orders", LIT)
        assert f.matches("orders")
        assert not f.matches("orders2")
        assert not f.matches("my-orders")
        assert not f.matches("order")

    def test_prefixed_matches_start_of_name(self):
        f = NameFilter("orders", PRE)
        assert f.matches("orders")
        assert f.matches("orders.eu")
        assert not f.matches("my-orders")
        assert not f.matches("Orders")

    @pytest.mark.parametrize("pattern", [LIT, PRE])
    def test_star_matches_everything_whatever_the_pattern_type(self, pattern):
        f = NameFilter("*", pattern)
        assert all(f.matches(n) for n in ["a", "orders", "*", "__consumer_offsets", ""])

    def test_star_inside_a_name_is_literal(self):
        assert not NameFilter("ord*", LIT).matches("orders")
        assert NameFilter("ord*", LIT).matches("ord*")
        assert not NameFilter("ord*", PRE).matches("orders")

    def test_default_filter_type_is_include_and_is_frozen(self):
        f = NameFilter("a", LIT)
        assert f.filter_type is INC
        with pytest.raises(dataclasses.FrozenInstanceError):
            f.name = "b"


class TestSelects:
    def test_empty_selects_nothing(self):
        assert NameFilters().is_empty
        assert not NameFilters().selects("orders")

    def test_include_only(self):
        fs = filters(NameFilter("orders", LIT), NameFilter("pay.", PRE))
        assert fs.selects("orders")
        assert fs.selects("pay.eu")
        assert not fs.selects("users")
        assert not fs.is_empty

    def test_only_excludes_select_nothing(self):
        fs = filters(NameFilter("tmp.", PRE, EXC))
        assert not fs.selects("orders")
        assert not fs.selects("tmp.x")

    @pytest.mark.parametrize("order", [0, 1])
    def test_exclude_beats_include_in_any_order(self, order):
        items = [NameFilter("*", LIT, INC), NameFilter("tmp.", PRE, EXC), NameFilter("secret", LIT, EXC)]
        fs = filters(*(items if order == 0 else reversed(items)))
        assert fs.selects("orders")
        assert not fs.selects("tmp.x")
        assert not fs.selects("secret")
        assert fs.selects("secrets")

    def test_exclude_star_excludes_everything(self):
        fs = filters(NameFilter("orders", LIT), NameFilter("*", PRE, EXC))
        assert not fs.selects("orders")

    def test_same_name_include_and_exclude_is_excluded(self):
        fs = filters(NameFilter("orders", LIT, EXC), NameFilter("orders", LIT, INC))
        assert not fs.selects("orders")

    def test_list_input_is_stored_as_tuple(self):
        fs = NameFilters([NameFilter("a", LIT)])
        assert fs.filters == (NameFilter("a", LIT),)
        hash(fs)


class TestParse:
    STRUCT = {
        "topicFilters": [
            {"name": "*", "patternType": "LITERAL", "filterType": "INCLUDE"},
            {"name": "tmp.", "patternType": "PREFIXED", "filterType": "EXCLUDE"},
        ]
    }
    EXPECTED = filters(NameFilter("*", LIT, INC), NameFilter("tmp.", PRE, EXC))

    def test_yaml_structure(self):
        assert parse(self.STRUCT) == self.EXPECTED

    def test_json_string_equals_yaml_structure(self):
        assert parse(json.dumps(self.STRUCT)) == self.EXPECTED

    @pytest.mark.parametrize(
        "empty", [None, "", "  ", {}, {"topicFilters": []}, {"topicFilters": None}, '{"topicFilters": []}']
    )
    def test_empty_inputs(self, empty):
        assert parse(empty).is_empty

    def test_types_are_case_insensitive(self):
        fs = parse({"topicFilters": [{"name": "a", "patternType": "prefixed", "filterType": "Exclude"}]})
        assert fs == filters(NameFilter("a", PRE, EXC))

    def test_filter_type_defaults_to_include(self):
        assert parse({"topicFilters": [{"name": "a", "patternType": "literal"}]}) == filters(NameFilter("a", LIT, INC))

    def test_group_filters_list_key(self):
        value = '{"groupFilters": [{"name": "app-", "patternType": "PREFIXED"}]}'
        fs = parse(value, list_key="groupFilters")
        assert fs.selects("app-1") and not fs.selects("other")
        assert fs.to_json("groupFilters") == {
            "groupFilters": [{"name": "app-", "patternType": "PREFIXED", "filterType": "INCLUDE"}]
        }

    def test_to_json_round_trips(self):
        assert parse(self.EXPECTED.to_json()) == self.EXPECTED
        assert parse(json.dumps(self.EXPECTED.to_json())) == self.EXPECTED

    def test_parsed_value_is_accepted_again(self):
        assert parse(self.EXPECTED) == self.EXPECTED

    @pytest.mark.parametrize(
        "value, reason",
        [
            ('{"topicFilters": [', "malformed JSON"),
            ("not json", "malformed JSON"),
            ("[1, 2]", "expected a mapping with key 'topicFilters'"),
            ([{"name": "a", "patternType": "LITERAL"}], "got a list"),
            (42, "got a number"),
            ({"topicFilter": []}, "unknown key 'topicFilter' (did you mean 'topicFilters'?)"),
            ({"groupFilters": []}, "unknown key 'groupFilters'"),
            ({"topicFilters": {"name": "a"}}, "topicFilters: expected a list of filters, got a mapping"),
            ({"topicFilters": ["a"]}, "topicFilters[0]: expected a mapping"),
            ({"topicFilters": [{"patternType": "LITERAL"}]}, "topicFilters[0]: name is required"),
            (
                {"topicFilters": [{"name": "", "patternType": "LITERAL"}]},
                "topicFilters[0].name: expected a non-empty string",
            ),
            (
                {"topicFilters": [{"name": 5, "patternType": "LITERAL"}]},
                "topicFilters[0].name: expected a non-empty string, got a number",
            ),
            ({"topicFilters": [{"name": "a"}]}, "topicFilters[0]: patternType is required"),
            (
                {"topicFilters": [{"name": "a", "patternType": "REGEX"}]},
                "topicFilters[0].patternType: unknown pattern type 'REGEX' (expected LITERAL or PREFIXED)",
            ),
            (
                {"topicFilters": [{"name": "a", "patternType": "LITERAL", "filterType": "ALLOW"}]},
                "topicFilters[0].filterType: unknown filter type 'ALLOW' (expected INCLUDE or EXCLUDE)",
            ),
            (
                {"topicFilters": [{"name": "a", "patternType": True}]},
                "topicFilters[0].patternType: expected LITERAL or PREFIXED, got a boolean",
            ),
            (
                {"topicFilters": [{"name": "a", "patternType": "LITERAL"}, {"name": "b", "patern": "x"}]},
                "topicFilters[1]: unknown key 'patern' (did you mean 'patternType'?)",
            ),
        ],
    )
    def test_malformed(self, value, reason):
        with pytest.raises(ConfigError) as err:
            parse(value)
        message = str(err.value)
        assert message.startswith(WHERE + ": ")
        assert reason in message

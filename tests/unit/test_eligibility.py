"""The eligibility rule engine: policy > writer deny intent > heuristics > fallback."""

from __future__ import annotations

from typing import Any

import pytest

from shared.model import Decision
from shared.policy import eligibility
from shared.policy.eligibility import EligibilityPolicy, Rule, doc_attrs
from tests.support.equivalence import assert_same_everywhere

TEXT = "Boundary layer transition on swept wings at high Reynolds numbers in a wind tunnel."


def policy(*rules: dict[str, Any]) -> EligibilityPolicy:
    return EligibilityPolicy(list(rules))


# -- priority ---------------------------------------------------------------------------


def test_policy_rule_overrides_writer_deny() -> None:
    p = policy({"if": {"collection": "^vip$"}, "then": {"action": "embed"}})
    assert p.decide("vip", {}, "deny", TEXT) == Decision("embed", "policy:rule0")


def test_policy_rule_overrides_heuristics() -> None:
    p = policy({"if": {"collection": "codes"}, "then": {"action": "embed"}})
    assert p.decide("codes", {}, None, "42").reason == "policy:rule0"


def test_writer_deny_beats_heuristics_and_fallback() -> None:
    p = policy({"if": {"collection": "^vip$"}, "then": {"action": "embed"}})
    assert p.decide("notes", {}, "deny", TEXT) == Decision("ignore", "writer_deny")
    assert p.decide("notes", {}, "deny", "hi") == Decision("ignore", "writer_deny")


def test_allow_intent_does_not_bypass_heuristics() -> None:
    assert policy().decide("notes", {}, "allow", "hi") == Decision("ignore", "too_short")


def test_heuristics_beat_fallback() -> None:
    p = policy()
    assert p.decide("notes", {}, None, "hi there") == Decision("ignore", "too_short")
    assert p.decide("notes", {}, None, "") == Decision("ignore", "too_short")
    assert p.decide("notes", {}, None, "12 34 56 78 90 11 22 33") == Decision("ignore", "structured")
    assert p.decide("notes", {}, None, "id: 4411-22, 3.50, 17/08, #9") == Decision("ignore", "structured")


def test_fallback_embeds_text_heavy_documents() -> None:
    assert policy().decide("notes", {}, None, TEXT) == Decision("embed", "default")


def test_short_cjk_sentence_is_not_too_short() -> None:
    assert policy().decide("notes", {}, None, "边界层转捩实验") == Decision("embed", "default")


def test_first_matching_rule_wins() -> None:
    p = policy({"if": {"collection": "posts"}, "then": {"action": "defer"}},
               {"if": {"collection": "posts"}, "then": {"action": "ignore"}})
    assert p.decide("posts", {}, None, TEXT) == Decision("defer", "policy:rule0")


def test_later_rule_reason_names_its_index() -> None:
    p = policy({"if": {"collection": "^posts$"}, "then": {"action": "defer"}},
               {"if": {"collection": "notes"}, "then": {"action": "ignore"}})
    assert p.decide("notes", {}, None, TEXT) == Decision("ignore", "policy:rule1")


# -- matchers ---------------------------------------------------------------------------


def test_spec_example_embed_rule_carries_space_and_fields() -> None:
    p = policy({"if": {"collection": "posts|notes|docs", "tokenCount": {"gt": 5}},
                "then": {"action": "embed", "space": "core", "fields": ["title", "body"]}})
    assert p.decide("Blog-POSTS", {}, "deny", TEXT) == Decision("embed", "policy:rule0", ("title", "body"), "core")


def test_token_count_bounds() -> None:
    p = policy({"if": {"tokenCount": {"gt": 3, "lte": 5}}, "then": {"action": "defer"}})
    assert p.decide("c", {}, None, "one two three four").action == "defer"
    assert p.decide("c", {}, None, "one two three four five").action == "defer"
    assert p.decide("c", {}, None, "one two three").reason == "default"
    assert p.decide("c", {}, None, "one two three four five six").reason == "default"


@pytest.mark.parametrize("fields", [{"mime": "image/png"}, {"_mime": "IMAGE/JPEG"},
                                    {"contentType": "application/x-binary"}])
def test_mime_regex_reads_any_mime_field_case_insensitively(fields: dict[str, Any]) -> None:
    p = policy({"if": {"mime": "image|binary"}, "then": {"action": "ignore"}})
    assert p.decide("files", fields, None, TEXT) == Decision("ignore", "policy:rule0")


def test_regex_on_a_missing_attribute_does_not_match() -> None:
    p = policy({"if": {"mime": ".*"}, "then": {"action": "ignore"}})
    assert p.decide("files", {}, None, TEXT).reason == "default"
    assert p.decide("files", {"mime": 7}, None, TEXT).reason == "default"


def test_type_regex() -> None:
    p = policy({"if": {"type": "^invoice$"}, "then": {"action": "defer"}})
    assert p.decide("docs", {"type": "Invoice"}, None, TEXT).action == "defer"
    assert p.decide("docs", {"type": "invoice-draft"}, None, TEXT).reason == "default"


def test_sensitivity_from_field_or_vibe() -> None:
    p = policy({"if": {"sensitivity": "private"}, "then": {"action": "defer"}})
    assert p.decide("notes", {"sensitivity": "Private"}, None, TEXT).action == "defer"
    assert p.decide("notes", {}, None, TEXT, vibe={"sensitivity": "private"}).action == "defer"
    assert p.decide("notes", {"_vibe": {"sensitivity": "private"}}, None, TEXT).action == "defer"
    assert p.decide("notes", {"sensitivity": "public"}, None, TEXT).reason == "default"


def test_all_conditions_of_a_rule_must_hold() -> None:
    p = policy({"if": {"collection": "posts", "sensitivity": "private"}, "then": {"action": "defer"}})
    assert p.decide("posts", {"sensitivity": "private"}, None, TEXT).action == "defer"
    assert p.decide("posts", {}, None, TEXT).action == "embed"
    assert p.decide("notes", {"sensitivity": "private"}, None, TEXT).action == "embed"


def test_empty_condition_matches_everything() -> None:
    p = policy({"if": {}, "then": {"action": "ignore"}})
    assert p.decide("any", {}, None, TEXT) == Decision("ignore", "policy:rule0")


def test_doc_attrs_prefers_mime_then_underscore_mime_then_content_type() -> None:
    attrs = doc_attrs("c", {"contentType": "text/html", "_mime": "image/png"})
    assert attrs.mime == "image/png" and attrs.collection == "c" and attrs.sensitivity is None


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize("rule, message", [
    ({"if": {}, "then": {"action": "explode"}}, "action"),
    ({"if": {}, "then": {"action": "sample", "p": 0.1}}, "'then' key"),
    ({"if": {}, "then": {}}, "action"),
    ({"if": {"collection": "("}, "then": {"action": "embed"}}, "not a valid regex"),
    ({"if": {"collection": 5}, "then": {"action": "embed"}}, "regex string"),
    ({"if": {"tokenCount": {"about": 3}}, "then": {"action": "embed"}}, "tokenCount operator"),
    ({"if": {"tokenCount": {"gt": "40"}}, "then": {"action": "embed"}}, "must be a number"),
    ({"if": {"tokenCount": {"gt": True}}, "then": {"action": "embed"}}, "must be a number"),
    ({"if": {"tokenCount": 40}, "then": {"action": "embed"}}, "'tokenCount' must be an object"),
    ({"if": {"color": "red"}, "then": {"action": "embed"}}, "unknown condition"),
    ({"if": {"sensitivity": ""}, "then": {"action": "defer"}}, "sensitivity"),
    ({"if": {}, "then": {"action": "embed", "fields": "title"}}, "fields"),
    ({"if": {}, "then": {"action": "embed", "fields": []}}, "fields"),
    ({"if": {}, "then": {"action": "embed", "space": 3}}, "space"),
    ({"then": {"action": "embed"}}, "'if'"),
    ({"iff": {}, "then": {"action": "embed"}}, "'if'"),
    ("embed everything", "'rule' must be an object"),
])
def test_bad_rules_raise_at_construction(rule: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        EligibilityPolicy([{"if": {}, "then": {"action": "embed"}}, rule])
    assert "rule 1" in str(err.value)  # the message points at the offending rule


def test_policy_must_be_a_list() -> None:
    with pytest.raises(ValueError, match="list of rules"):
        EligibilityPolicy({"if": {}, "then": {"action": "embed"}})  # type: ignore[arg-type]


def test_rule_parse_keeps_its_index_and_comment_is_allowed() -> None:
    rule = Rule.parse({"if": {}, "then": {"action": "defer"}, "comment": "park everything"}, 4)
    assert rule.reason == "policy:rule4" and rule.decision() == Decision("defer", "policy:rule4")


def test_no_rules_means_intent_then_heuristics_then_fallback() -> None:
    p = EligibilityPolicy([])
    assert p.rules == ()
    assert p.decide("notes", {}, None, TEXT) == Decision("embed", "default")


def _looks_structured_per_character(text: str) -> bool:
    """The definition `_looks_structured` must keep."""
    chars = [ch for ch in text if not ch.isspace()]
    return sum(ch.isalpha() for ch in chars) < eligibility.MIN_LETTER_RATIO * len(chars)


def test_looks_structured_equals_the_per_character_definition() -> None:
    # every BMP character, among letters and among digits, and random mixes
    assert_same_everywhere(eligibility._looks_structured, _looks_structured_per_character,
                           lambda ch: [f"ab{ch}", f"1{ch}2 {ch}", ch],
                           "aZ09 .-_\t\n\x1c\x1f\x85\xa0\u3000é漢①²Ⅻ١\u200b", seed=3, longest=20)


def test_short_and_structured_decisions_do_not_depend_on_rules_being_present() -> None:
    # Without rules the token count stops at MIN_TOKENS; a rule that never matches must not
    # change what the heuristics decide.
    bare, ruled = EligibilityPolicy([]), policy({"if": {"collection": "^never$"}, "then": {"action": "defer"}})
    for text in ["", "one", "one two", "one two three", "12 34 56 78 x", TEXT]:
        assert bare.decide("c", {}, None, text) == ruled.decide("c", {}, None, text), text

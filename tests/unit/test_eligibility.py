"""The eligibility rule engine: policy > writer deny intent > heuristics > fallback."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shared.model import Decision, DocKey, StoredDoc
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
    ({"if": {}, "then": {"action": "sample"}}, "'p'"),
    ({"if": {}, "then": {"action": "sample", "p": 1.5}}, "'p'"),
    ({"if": {}, "then": {"action": "sample", "p": True}}, "'p'"),
    ({"if": {}, "then": {"action": "embed", "p": 0.5}}, "'p' belongs"),
    ({"if": {}, "then": {"action": "embed", "mode": "x"}}, "'then' key"),
    ({"if": {"certs": []}, "then": {"action": "embed"}}, "certs"),
    ({"if": {"certs": 3}, "then": {"action": "embed"}}, "certs"),
    ({"if": {"certs": "("}, "then": {"action": "embed"}}, "certs"),
    ({"if": {"app": 7}, "then": {"action": "embed"}}, "regex string"),
    ({"if": {}, "then": {"action": "embed", "space": "s" * 65}}, "space"),
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


def test_policy_must_be_a_list_or_the_policy_object() -> None:
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


# -- the policy object as the core spec writes it ------------------------------------------

SPEC_POLICY: dict[str, Any] = {
    "default": {"action": "sample", "p": 0.1},
    "rules": [
        {"if": {"collection": "posts|notes|docs", "tokenCount": {"gt": 40}},
         "then": {"action": "embed", "space": "core", "fields": ["title", "body"]}},
        {"if": {"mime": "image|binary"}, "then": {"action": "ignore"}},
        {"if": {"sensitivity": "private"}, "then": {"action": "defer"}},
    ],
}
LONG = " ".join(["turbulent boundary layer measurements"] * 15)  # > 40 tokens


def key(doc_id: str, collection: str = "wiki", tenant: str = "t1") -> DocKey:
    return DocKey(tenant, collection, doc_id)


def test_the_spec_object_loads_as_written() -> None:
    p = EligibilityPolicy(SPEC_POLICY)
    assert len(p.rules) == 3 and p.default is not None and p.default.p == 0.1
    assert p.decide("docs", {}, None, LONG, key=key("a", "docs")) == Decision(
        "embed", "policy:rule0", ("title", "body"), "core")
    assert p.decide("files", {"mime": "image/png"}, None, TEXT) == Decision("ignore", "policy:rule1")
    assert p.decide("x", {"sensitivity": "private"}, None, TEXT) == Decision("defer", "policy:rule2")
    assert p.spaces() == {"core"}


# Priority, as a table: (policy, collection, fields, intent, text, expected decision).
PRIORITY_TABLE: list[tuple[str, dict[str, Any], str, dict[str, Any], str | None, str, Decision]] = [
    ("rule beats writer deny", SPEC_POLICY, "docs", {}, "deny", LONG,
     Decision("embed", "policy:rule0", ("title", "body"), "core")),
    ("rule beats heuristics", {"rules": [{"if": {"collection": "codes"}, "then": {"action": "embed"}}]},
     "codes", {}, None, "42", Decision("embed", "policy:rule0")),
    ("writer deny beats heuristics", SPEC_POLICY, "wiki", {}, "deny", "hi", Decision("ignore", "writer_deny")),
    ("writer deny beats the default", {"default": {"action": "embed"}}, "wiki", {}, "deny", TEXT,
     Decision("ignore", "writer_deny")),
    ("heuristics beat the default", {"default": {"action": "embed"}}, "wiki", {}, None, "hi",
     Decision("ignore", "too_short")),
    ("structured beats the default", {"default": {"action": "embed"}}, "wiki", {}, None, "12 34 56 78 90 11",
     Decision("ignore", "structured")),
    ("configured default applies last", {"default": {"action": "defer"}}, "wiki", {}, None, TEXT,
     Decision("defer", "default")),
    ("no default: fallback embeds", {"rules": []}, "wiki", {}, None, TEXT, Decision("embed", "default")),
    ("default may route", {"default": {"action": "embed", "space": "cheap"}}, "wiki", {}, None, TEXT,
     Decision("embed", "default", None, "cheap")),
    ("sample p=1 embeds", {"default": {"action": "sample", "p": 1}}, "wiki", {}, None, TEXT,
     Decision("embed", "default")),
    ("sample p=0 defers", {"default": {"action": "sample", "p": 0}}, "wiki", {}, None, TEXT,
     Decision("defer", "sampled_out")),
]


@pytest.mark.parametrize("name, raw, collection, fields, intent, text, expected", PRIORITY_TABLE,
                         ids=[row[0] for row in PRIORITY_TABLE])
def test_priority_table(name: str, raw: dict[str, Any], collection: str, fields: dict[str, Any],
                        intent: str | None, text: str, expected: Decision) -> None:
    assert EligibilityPolicy(raw).decide(collection, fields, intent, text, key=key("d1", collection)) == expected


def test_sample_embeds_about_p_and_is_fixed_per_document() -> None:
    p = EligibilityPolicy({"default": {"action": "sample", "p": 0.1}})
    keys = [key(f"doc-{i}") for i in range(4000)]
    first = [p.decide("wiki", {}, None, TEXT, key=k).action for k in keys]
    share = first.count("embed") / len(keys)
    assert 0.08 < share < 0.12  # binomial(4000, 0.1): 5 standard deviations is about ±0.024
    assert set(first) == {"embed", "defer"}
    # deciding again, even after an edit of the text, never flips a document
    again = [p.decide("wiki", {}, None, TEXT + " edited", key=k).action for k in keys]
    assert again == first


def test_sample_draw_depends_on_tenant_collection_and_id() -> None:
    p = EligibilityPolicy({"default": {"action": "sample", "p": 0.5}})
    def picks(make: Any) -> list[str]:
        return [p.decide("c", {}, None, TEXT, key=make(i)).action for i in range(200)]
    base = picks(lambda i: DocKey("t1", "c", str(i)))
    assert base != picks(lambda i: DocKey("t2", "c", str(i)))
    assert base != picks(lambda i: DocKey("t1", "c2", str(i)))
    assert base != picks(lambda i: DocKey("t1", "c", f"x{i}"))


def test_sample_in_a_rule_keeps_the_rules_routing() -> None:
    p = EligibilityPolicy([{"if": {"collection": "logs"}, "then": {"action": "sample", "p": 0.5, "space": "cheap"}}])
    decisions = [p.decide("logs", {}, "deny", TEXT, key=key(str(i), "logs")) for i in range(300)]
    assert {d for d in decisions if d.action == "embed"} == {Decision("embed", "policy:rule0", None, "cheap")}
    assert {d for d in decisions if d.action != "embed"} == {Decision("defer", "sampled_out")}


@pytest.mark.parametrize("cond, certs, hit", [
    (["hr:confidential"], ["hr:confidential"], True),
    (["hr:confidential"], ["acme:staff", "hr:confidential"], True),
    (["hr:confidential"], ["acme:staff"], False),
    (["hr:confidential"], [], False),
    ("^hr:", ["HR:payroll"], True),
    ("^hr:", ["acme:hr"], False),
    (True, ["acme:staff"], True),
    (True, [], False),
    (False, [], True),
    (False, ["acme:staff"], False),
])
def test_certs_condition(cond: Any, certs: list[str], hit: bool) -> None:
    p = policy({"if": {"certs": cond}, "then": {"action": "embed", "space": "private"}})
    d = p.decide("notes", {}, None, TEXT, certs=certs)
    assert (d == Decision("embed", "policy:rule0", None, "private")) is hit


def test_certs_condition_reads_a_stored_documents_certificates() -> None:
    p = policy({"if": {"certs": ["hr:confidential"]}, "then": {"action": "defer"}})
    doc = StoredDoc(key("a"), {"body": TEXT}, ["*"], None, "h", 0.0, {}, ["hr:confidential"])
    assert p.decide_doc(doc, None) == Decision("defer", "policy:rule0")
    plain = StoredDoc(key("b"), {"body": TEXT}, ["*"], None, "h", 0.0)
    assert p.decide_doc(plain, None).reason == "default"


def test_app_condition_reads_the_creating_app_label() -> None:
    p = policy({"if": {"app": "^crm$"}, "then": {"action": "ignore"}})
    assert p.decide("notes", {}, None, TEXT, vibe={"app": "CRM"}) == Decision("ignore", "policy:rule0")
    assert p.decide("notes", {}, None, TEXT, vibe={"app": "crm-sync"}).reason == "default"
    assert p.decide("notes", {}, None, TEXT).reason == "default"  # no app: a regex cannot match


@pytest.mark.parametrize("raw, message", [
    ({"default": {"action": "sample"}}, "index_policy default: 'sample' needs 'p'"),
    ({"default": {"action": "sample", "p": -0.1}}, "default"),
    ({"default": "embed"}, "default"),
    ({"rules": {"if": {}}}, "'rules' must be a list"),
    ({"rules": [], "fallback": {}}, "unknown key"),
    ("[]", "list of rules"),
    ({"rules": [{"if": {}, "then": {"action": "embed"}}] * 1001}, "at most 1000"),
])
def test_bad_policy_objects_raise_at_construction(raw: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        EligibilityPolicy(raw)


def test_settings_accept_both_shapes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from shared.config import Settings

    monkeypatch.setenv("VIBE_INDEX_POLICY", json.dumps(SPEC_POLICY))
    assert EligibilityPolicy(Settings().index_policy).default == EligibilityPolicy(SPEC_POLICY).default
    monkeypatch.setenv("VIBE_INDEX_POLICY", json.dumps(SPEC_POLICY["rules"]))
    assert len(EligibilityPolicy(Settings().index_policy).rules) == 3

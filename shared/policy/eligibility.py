"""Eligibility policy: should a document be embedded, ignored, or deferred?

Priority: **policy > writer deny intent > heuristics > fallback**. Operators configure rules
in `VIBE_INDEX_POLICY` (Settings.index_policy), e.g.

    {"if": {"collection": "posts|notes", "tokenCount": {"gt": 40}},
     "then": {"action": "embed", "space": "core", "fields": ["title", "body"]}}

Rules are validated when the policy is built so a bad policy stops the service at start-up
instead of silently mis-classifying documents. Decision reasons are short, stable
snake_case strings because coverage reports group skipped documents by them.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from shared.model import Decision, StoredDoc
from shared.text.hashing import doc_text, token_count
from shared.text.redaction import select_fields

Action = Literal["embed", "ignore", "defer"]
ACTIONS: frozenset[str] = frozenset({"embed", "ignore", "defer"})

# Heuristic thresholds: tiny and structured documents are not worth an embedding.
MIN_TOKENS = 3
MIN_LETTER_RATIO = 0.4

REASON_WRITER_DENY = "writer_deny"
REASON_TOO_SHORT = "too_short"
REASON_STRUCTURED = "structured"
REASON_DEFAULT = "default"

_REGEX_CONDITIONS = ("collection", "mime", "type")
_CONDITIONS = frozenset({*_REGEX_CONDITIONS, "tokenCount", "sensitivity"})
_THEN_KEYS = frozenset({"action", "space", "fields"})
_RULE_KEYS = frozenset({"if", "then", "comment"})  # "comment": operator notes, ignored
_OPS: dict[str, Callable[[float, float], bool]] = {
    "gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le, "eq": operator.eq,
}


@dataclass(frozen=True)
class DocAttrs:
    """What rules can see of a document. `None` means the document does not say."""

    collection: str
    mime: str | None = None
    type: str | None = None
    sensitivity: str | None = None

    def get(self, name: str) -> str | None:
        return cast("str | None", getattr(self, name))


def _text_attr(value: Any) -> str | None:
    # Only non-empty strings count: a number or an object under `type` is data, not a label.
    return value if isinstance(value, str) and value.strip() else None


def doc_attrs(collection: str, fields: Mapping[str, Any], vibe: Mapping[str, Any] | None = None) -> DocAttrs:
    """Rule inputs from the document: `mime` from `mime`, `_mime` or `contentType`; `type`
    from `type`; `sensitivity` from the field or, failing that, from `_vibe.sensitivity`."""
    if vibe is None and isinstance(fields.get("_vibe"), Mapping):
        vibe = fields["_vibe"]  # callers that pass the raw body still get the label
    mimes = (_text_attr(fields.get(k)) for k in ("mime", "_mime", "contentType"))
    sensitivity = _text_attr(fields.get("sensitivity")) or _text_attr((vibe or {}).get("sensitivity"))
    return DocAttrs(collection, next((m for m in mimes if m), None), _text_attr(fields.get("type")), sensitivity)


def _fail(index: int, message: str) -> ValueError:
    return ValueError(f"index_policy rule {index}: {message}")


def _mapping(value: Any, index: int, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(index, f"'{what}' must be an object, got {type(value).__name__}")
    return value


def _parse_patterns(cond: Mapping[str, Any], index: int) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Regex conditions, case-insensitive and unanchored like a JS `/x/i.test()`."""
    out = []
    for name in _REGEX_CONDITIONS:
        if name not in cond:
            continue
        if not isinstance(cond[name], str):
            raise _fail(index, f"'{name}' must be a regex string")
        try:
            out.append((name, re.compile(cond[name], re.IGNORECASE)))
        except re.error as e:
            raise _fail(index, f"'{name}' is not a valid regex ({e})") from None
    return tuple(out)


def _parse_token_bounds(raw: Any, index: int) -> tuple[tuple[str, float], ...]:
    bounds = _mapping(raw, index, "tokenCount")
    unknown = sorted(set(bounds) - set(_OPS))
    if unknown:
        raise _fail(index, f"unknown tokenCount operator(s) {unknown}; use {sorted(_OPS)}")
    for op, value in bounds.items():
        # bool is an int subclass; `{"gt": true}` is a typo, not a bound.
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _fail(index, f"tokenCount.{op} must be a number")
    return tuple((op, float(v)) for op, v in bounds.items())


def _parse_sensitivity(raw: Any, index: int) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise _fail(index, "'sensitivity' must be a non-empty string")
    return raw.strip().casefold()


def _parse_fields(raw: Any, index: int) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise _fail(index, "'then.fields' must be a non-empty list of field names")
    if not all(isinstance(f, str) and f for f in raw):
        raise _fail(index, "'then.fields' must hold non-empty strings")
    return tuple(raw)


def _parse_then(raw: Any, index: int) -> tuple[Action, str | None, tuple[str, ...] | None]:
    then = _mapping(raw, index, "then")
    unknown = sorted(set(then) - _THEN_KEYS)
    if unknown:
        raise _fail(index, f"unknown 'then' key(s) {unknown}; use {sorted(_THEN_KEYS)}")
    action = then.get("action")
    if action not in ACTIONS:
        raise _fail(index, f"action {action!r} is not one of {sorted(ACTIONS)}")
    space = then.get("space")
    if space is not None and (not isinstance(space, str) or not space):
        raise _fail(index, "'then.space' must be a non-empty string")
    return cast(Action, action), space, _parse_fields(then.get("fields"), index)


@dataclass(frozen=True)
class Rule:
    """One `{"if": ..., "then": ...}` rule. An empty `if` matches every document."""

    index: int
    action: Action
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    token_bounds: tuple[tuple[str, float], ...] = ()
    sensitivity: str | None = None
    space: str | None = None
    fields: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, raw: Any, index: int = 0) -> Rule:
        """Validate and compile one rule; raises ValueError naming the rule and the problem."""
        rule = _mapping(raw, index, "rule")
        if not {"if", "then"} <= set(rule) <= _RULE_KEYS:
            raise _fail(index, f"a rule has the keys 'if', 'then' (and optionally 'comment'), got {sorted(rule)}")
        cond = _mapping(rule["if"], index, "if")
        unknown = sorted(set(cond) - _CONDITIONS)
        if unknown:
            raise _fail(index, f"unknown condition(s) {unknown}; use {sorted(_CONDITIONS)}")
        action, space, fields = _parse_then(rule["then"], index)
        bounds = _parse_token_bounds(cond["tokenCount"], index) if "tokenCount" in cond else ()
        return cls(index, action, _parse_patterns(cond, index), bounds,
                   _parse_sensitivity(cond.get("sensitivity"), index), space, fields)

    @property
    def reason(self) -> str:
        return f"policy:rule{self.index}"

    def matches(self, attrs: DocAttrs, tokens: int) -> bool:
        """All conditions hold. A regex on an attribute the document lacks does not match:
        `{"mime": "image"}` must not catch documents with no MIME type at all."""
        for name, pattern in self.patterns:
            value = attrs.get(name)
            if value is None or not pattern.search(value):
                return False
        if self.sensitivity is not None and (attrs.sensitivity or "").strip().casefold() != self.sensitivity:
            return False
        return all(_OPS[op](tokens, bound) for op, bound in self.token_bounds)

    def decision(self) -> Decision:
        return Decision(self.action, self.reason, self.fields, self.space)


# ASCII bytes that are not letters, and those str.isspace() counts (\x1c-\x1f included).
_ASCII_NON_LETTERS = bytes(b for b in range(128) if not chr(b).isalpha())
_ASCII_SPACES = bytes(b for b in range(128) if chr(b).isspace())


def _looks_structured(text: str) -> bool:
    """Mostly digits and punctuation (ids, tables, codes): embeddings of such text are noise.

    Letters among the non-space characters, counted in C: a Python loop per character was
    the largest single cost of bulk ingest (~20% of its CPU). ASCII text (the common case)
    is counted by deleting bytes; other text by mapping the same str predicates."""
    if text.isascii():
        raw = text.encode("ascii")
        letters, chars = len(raw.translate(None, _ASCII_NON_LETTERS)), len(raw.translate(None, _ASCII_SPACES))
    else:
        letters, chars = sum(map(str.isalpha, text)), len(text) - sum(map(str.isspace, text))
    return letters < MIN_LETTER_RATIO * chars


def heuristic(text: str, tokens: int | None = None) -> Decision | None:
    """The heuristics for when neither policy nor writer says anything: skip tiny and structured documents. `tokens`:
    `token_count(text)` when the caller has it already."""
    if (token_count(text) if tokens is None else tokens) < MIN_TOKENS:
        return Decision("ignore", REASON_TOO_SHORT)
    if _looks_structured(text):
        return Decision("ignore", REASON_STRUCTURED)
    return None


class EligibilityPolicy:
    """The server-side rule engine, built once from Settings.index_policy."""

    def __init__(self, rules: Sequence[Mapping[str, Any]] | None = None) -> None:
        if rules is not None and (isinstance(rules, str | bytes) or not isinstance(rules, Sequence)):
            raise ValueError("index_policy must be a list of rules")
        self.rules: tuple[Rule, ...] = tuple(Rule.parse(r, i) for i, r in enumerate(rules or ()))

    def match(self, attrs: DocAttrs, tokens: int) -> Rule | None:
        """The first rule that matches: rule order is the operator's priority order."""
        return next((r for r in self.rules if r.matches(attrs, tokens)), None)

    def decide(self, collection: str, fields: Mapping[str, Any], intent: str | None, text: str,
               *, vibe: Mapping[str, Any] | None = None) -> Decision:
        """Policy > writer deny intent > heuristics > fallback.

        `text` is the document's extraction text (after the field allowlist); `vibe` is the
        document's `_vibe` object, consulted for a sensitivity label.
        """
        # Counted once; without rules only the heuristic's "at least MIN_TOKENS" is asked, so
        # counting stops there (a full count was ~7% of bulk ingest).
        tokens = token_count(text) if self.rules else token_count(text, at_most=MIN_TOKENS)
        rule = self.match(doc_attrs(collection, fields, vibe), tokens) if self.rules else None
        if rule is not None:
            return rule.decision()
        if intent == "deny":
            return Decision("ignore", REASON_WRITER_DENY)
        return heuristic(text, tokens) or Decision("embed", REASON_DEFAULT)

    def decide_doc(self, doc: StoredDoc, allow: Sequence[str] | None) -> Decision:
        """`decide` for a stored document, over its text after the collection's allowlist."""
        allowed = list(allow) if allow is not None else None
        text = doc_text(select_fields(doc.fields, allowed), allowed)
        return self.decide(doc.key.collection, doc.fields, doc.intent, text, vibe=doc.vibe)

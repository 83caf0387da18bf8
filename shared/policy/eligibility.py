"""Eligibility policy: should a document be embedded, ignored, or deferred?

Priority: **policy > writer deny intent > heuristics > fallback**. Operators configure the
policy in `VIBE_INDEX_POLICY` (Settings.index_policy), either as a list of rules or as the
whole object, e.g.

    {"default": {"action": "sample", "p": 0.1},
     "rules": [{"if": {"collection": "posts|notes", "tokenCount": {"gt": 40}},
                "then": {"action": "embed", "space": "core", "fields": ["title", "body"]}},
               {"if": {"certs": ["hr:confidential"]}, "then": {"action": "embed", "space": "private"}}]}

`default` is the fallback: it applies only when no rule matched, the writer did not deny and
the heuristics let the document through. `sample` embeds the share `p` of such documents,
chosen by a hash of tenant, collection and id, so deciding again never flips a document.

Rules are validated when the policy is built so a bad policy stops the service at start-up
instead of silently mis-classifying documents. Decision reasons are short, stable
snake_case strings because coverage reports group skipped documents by them.
"""

from __future__ import annotations

import hashlib
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from shared.edges import EDGE_NOT_EMBEDDED, EDGES
from shared.model import Decision, DocKey, StoredDoc
from shared.text.hashing import doc_text, token_count
from shared.text.redaction import select_fields

Action = Literal["embed", "ignore", "defer"]
ACTIONS: frozenset[str] = frozenset({"embed", "ignore", "defer"})
SAMPLE = "sample"  # embed the share `p` of the documents, the others are deferred

# Heuristic thresholds: tiny and structured documents are not worth an embedding.
MIN_TOKENS = 3
MIN_LETTER_RATIO = 0.4

REASON_WRITER_DENY = "writer_deny"
REASON_TOO_SHORT = "too_short"
REASON_STRUCTURED = "structured"
REASON_DEFAULT = "default"
REASON_SAMPLED_OUT = "sampled_out"

_REGEX_CONDITIONS = ("collection", "mime", "type", "app")
_CONDITIONS = frozenset({*_REGEX_CONDITIONS, "tokenCount", "sensitivity", "certs"})
_THEN_KEYS = frozenset({"action", "space", "fields", "p"})
_RULE_KEYS = frozenset({"if", "then", "comment"})  # "comment": operator notes, ignored
_POLICY_KEYS = frozenset({"default", "rules", "comment"})
MAX_RULES = 1000
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
    app: str | None = None  # the creating app, as the writer labels it in `_vibe.app`
    certs: tuple[str, ...] = ()  # the document's `_certs`

    def get(self, name: str) -> str | None:
        return cast("str | None", getattr(self, name))


def _text_attr(value: Any) -> str | None:
    # Only non-empty strings count: a number or an object under `type` is data, not a label.
    return value if isinstance(value, str) and value.strip() else None


def doc_attrs(collection: str, fields: Mapping[str, Any], vibe: Mapping[str, Any] | None = None,
              certs: Sequence[str] = ()) -> DocAttrs:
    """Rule inputs from the document: `mime` from `mime`, `_mime` or `contentType`; `type`
    from `type`; `sensitivity` from the field or, failing that, from `_vibe.sensitivity`;
    `app` from `_vibe.app`; `certs` from its `_certs`."""
    if vibe is None and isinstance(fields.get("_vibe"), Mapping):
        vibe = fields["_vibe"]  # callers that pass the raw body still get the label
    mimes = (_text_attr(fields.get(k)) for k in ("mime", "_mime", "contentType"))
    sensitivity = _text_attr(fields.get("sensitivity")) or _text_attr((vibe or {}).get("sensitivity"))
    return DocAttrs(collection, next((m for m in mimes if m), None), _text_attr(fields.get("type")), sensitivity,
                    _text_attr((vibe or {}).get("app")), tuple(certs))


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


CertMatch = bool | tuple[str, ...] | re.Pattern[str]


def _parse_certs(raw: Any, index: int) -> CertMatch | None:
    """`true`/`false`: the document carries certificates or none; a list of "issuer:name": it
    carries any of them; a string: a regex any of its certificates matches (`^hr:`)."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str):
        try:
            return re.compile(raw, re.IGNORECASE)
        except re.error as e:
            raise _fail(index, f"'certs' is not a valid regex ({e})") from None
    if isinstance(raw, Sequence) and raw and len(raw) <= 100 and all(isinstance(c, str) and c for c in raw):
        return tuple(raw)
    raise _fail(index, "'certs' must be true/false, a regex string or a non-empty list (at most 100) of "
                       "certificate names")


def _certs_match(cond: CertMatch, certs: tuple[str, ...]) -> bool:
    if isinstance(cond, bool):
        return bool(certs) == cond
    if isinstance(cond, tuple):
        return any(c in cond for c in certs)
    return any(cond.search(c) for c in certs)


def _parse_p(raw: Any, index: int) -> float:
    # bool is an int subclass: `p: true` is a typo, not a probability
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not 0.0 <= raw <= 1.0:
        raise _fail(index, "'sample' needs 'p', a number from 0 to 1")
    return float(raw)


@dataclass(frozen=True)
class Outcome:
    """What a rule's `then` (or the policy's `default`) decides: an action, or `sample` with `p`;
    optionally the space the document is embedded in and the fields embedded."""

    action: Action | Literal["sample"]
    p: float | None = None
    space: str | None = None
    fields: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, raw: Any, index: int, what: str = "then") -> Outcome:
        then = _mapping(raw, index, what)
        unknown = sorted(set(then) - _THEN_KEYS)
        if unknown:
            raise _fail(index, f"unknown '{what}' key(s) {unknown}; use {sorted(_THEN_KEYS)}")
        action = then.get("action")
        if action not in ACTIONS and action != SAMPLE:
            raise _fail(index, f"action {action!r} is not one of {sorted(ACTIONS | {SAMPLE})}")
        if "p" in then and action != SAMPLE:
            raise _fail(index, "'p' belongs to the action 'sample'")
        p = _parse_p(then.get("p"), index) if action == SAMPLE else None
        space = then.get("space")
        if space is not None and (not isinstance(space, str) or not space or len(space) > 64):
            raise _fail(index, f"'{what}.space' must be a non-empty string of at most 64 characters")
        return cls(cast("Action | Literal['sample']", action), p, space, _parse_fields(then.get("fields"), index))

    def decision(self, reason: str, sample_of: str) -> Decision:
        """`sample_of`: what the sample draw hashes (tenant, collection and id)."""
        if self.action != SAMPLE:
            return Decision(cast(Action, self.action), reason, self.fields, self.space)
        if _draw(sample_of) < (self.p or 0.0):
            return Decision("embed", reason, self.fields, self.space)
        return Decision("defer", REASON_SAMPLED_OUT)


def _draw(sample_of: str) -> float:
    """A number in [0, 1) fixed by `sample_of`: the same document always draws the same."""
    digest = hashlib.sha256(sample_of.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def sample_key(key: DocKey | None, text: str) -> str:
    """What a sample draws on: the document's identity, so an edit never flips it; without a key
    (a caller that has none), its text."""
    return f"{key.tenant}\x00{key.collection}\x00{key.doc_id}" if key is not None else f"text\x00{text}"


@dataclass(frozen=True)
class Rule:
    """One `{"if": ..., "then": ...}` rule. An empty `if` matches every document."""

    index: int
    then: Outcome
    patterns: tuple[tuple[str, re.Pattern[str]], ...] = ()
    token_bounds: tuple[tuple[str, float], ...] = ()
    sensitivity: str | None = None
    certs: CertMatch | None = None

    @property
    def action(self) -> str:
        return self.then.action

    @property
    def space(self) -> str | None:
        return self.then.space

    @property
    def fields(self) -> tuple[str, ...] | None:
        return self.then.fields

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
        then = Outcome.parse(rule["then"], index)
        bounds = _parse_token_bounds(cond["tokenCount"], index) if "tokenCount" in cond else ()
        return cls(index, then, _parse_patterns(cond, index), bounds,
                   _parse_sensitivity(cond.get("sensitivity"), index), _parse_certs(cond.get("certs"), index))

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
        if self.certs is not None and not _certs_match(self.certs, attrs.certs):
            return False
        return all(_OPS[op](tokens, bound) for op, bound in self.token_bounds)

    def decision(self, sample_of: str = "") -> Decision:
        return self.then.decision(self.reason, sample_of)


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


def _split_policy(policy: Any) -> tuple[Sequence[Any], Any]:
    """(rules, default) of either accepted shape: a list of rules, or the whole object
    `{"default": {...}, "rules": [...]}` (both keys optional)."""
    if policy is None:
        return (), None
    if isinstance(policy, Mapping):
        unknown = sorted(set(policy) - _POLICY_KEYS)
        if unknown:
            raise ValueError(f"index_policy must be a list of rules or an object with {sorted(_POLICY_KEYS)}; "
                             f"unknown key(s) {unknown}")
        rules = policy.get("rules") or ()
        if isinstance(rules, str | bytes) or not isinstance(rules, Sequence):
            raise ValueError("index_policy: 'rules' must be a list of rules")
        return rules, policy.get("default")
    if isinstance(policy, str | bytes) or not isinstance(policy, Sequence):
        raise ValueError("index_policy must be a list of rules or an object {\"default\", \"rules\"}")
    return policy, None


class EligibilityPolicy:
    """The server-side rule engine, built once from Settings.index_policy."""

    def __init__(self, rules: Sequence[Mapping[str, Any]] | Mapping[str, Any] | None = None) -> None:
        listed, default = _split_policy(rules)
        if len(listed) > MAX_RULES:
            raise ValueError(f"index_policy has {len(listed)} rules; at most {MAX_RULES}")
        self.rules: tuple[Rule, ...] = tuple(Rule.parse(r, i) for i, r in enumerate(listed))
        # The default names itself in errors as rule "default"; its decisions' reason is `default`.
        self.default: Outcome | None = None if default is None else _parse_default(default)

    def match(self, attrs: DocAttrs, tokens: int) -> Rule | None:
        """The first rule that matches: rule order is the operator's priority order."""
        return next((r for r in self.rules if r.matches(attrs, tokens)), None)

    def decide(self, collection: str, fields: Mapping[str, Any], intent: str | None, text: str,
               *, vibe: Mapping[str, Any] | None = None, key: DocKey | None = None,
               certs: Sequence[str] = ()) -> Decision:
        """Policy > writer deny intent > heuristics > fallback (the policy's `default`).

        `text` is the document's extraction text (after the field allowlist); `vibe` is the
        document's `_vibe` object, consulted for a sensitivity label and the creating app;
        `key` fixes what a `sample` draws on; `certs` are the document's certificates.
        """
        # Counted once; without rules only the heuristic's "at least MIN_TOKENS" is asked, so
        # counting stops there (a full count was ~7% of bulk ingest).
        if collection == EDGES:  # no rule may embed an edge (shared/edges.py): it is never sent to a provider
            return Decision("ignore", EDGE_NOT_EMBEDDED)
        tokens = token_count(text) if self.rules else token_count(text, at_most=MIN_TOKENS)
        rule = self.match(doc_attrs(collection, fields, vibe, certs), tokens) if self.rules else None
        if rule is not None:
            return rule.decision(sample_key(key, text))
        if intent == "deny":
            return Decision("ignore", REASON_WRITER_DENY)
        found = heuristic(text, tokens)
        if found is not None:
            return found
        if self.default is not None:
            return self.default.decision(REASON_DEFAULT, sample_key(key, text))
        return Decision("embed", REASON_DEFAULT)

    def decide_text(self, doc: StoredDoc, text: str) -> Decision:
        """`decide` for a stored document whose extraction text the caller has."""
        return self.decide(doc.key.collection, doc.fields, doc.intent, text, vibe=doc.vibe, key=doc.key,
                           certs=doc.certs)

    def decide_doc(self, doc: StoredDoc, allow: Sequence[str] | None) -> Decision:
        """`decide` for a stored document, over its text after the collection's allowlist."""
        allowed = list(allow) if allow is not None else None
        return self.decide_text(doc, doc_text(select_fields(doc.fields, allowed), allowed))

    def spaces(self) -> set[str]:
        """Every space a rule or the default routes documents to."""
        outcomes = [r.then for r in self.rules] + ([self.default] if self.default else [])
        return {o.space for o in outcomes if o.space}


def _parse_default(raw: Any) -> Outcome:
    try:
        return Outcome.parse(raw, -1, "default")
    except ValueError as e:
        raise ValueError(str(e).replace("index_policy rule -1:", "index_policy default:")) from None

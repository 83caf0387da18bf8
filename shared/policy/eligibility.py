"""Eligibility policy (V§5): policy > writer deny intent > heuristics > fallback."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shared.model import Decision
from shared.text.hashing import token_count

ACTIONS = {"embed", "ignore", "defer"}
_REGEX_KEYS = ("collection", "mime", "type")
_OPS = {"gt": lambda a, b: a > b, "gte": lambda a, b: a >= b, "lt": lambda a, b: a < b, "lte": lambda a, b: a <= b}


@dataclass(frozen=True)
class Rule:
    index: int
    regexes: dict[str, re.Pattern[str]]
    tokens: dict[str, int]
    sensitivity: str | None
    action: str
    space: str | None
    fields: tuple[str, ...] | None

    @classmethod
    def parse(cls, index: int, raw: dict[str, Any]) -> Rule:
        cond, then = raw.get("if", {}), raw.get("then", {})
        if not isinstance(cond, dict) or not isinstance(then, dict):
            raise ValueError(f"rule {index}: 'if' and 'then' must be objects")
        unknown = set(cond) - {*_REGEX_KEYS, "tokenCount", "sensitivity"}
        if unknown:
            raise ValueError(f"rule {index}: unknown condition(s) {sorted(unknown)}")
        if then.get("action") not in ACTIONS:
            raise ValueError(f"rule {index}: action must be one of {sorted(ACTIONS)}")
        try:
            regexes = {k: re.compile(str(cond[k]), re.I) for k in _REGEX_KEYS if k in cond}
        except re.error as e:
            raise ValueError(f"rule {index}: bad regex: {e}") from None
        tokens = dict(cond.get("tokenCount", {}))
        if set(tokens) - set(_OPS):
            raise ValueError(f"rule {index}: tokenCount operators are {sorted(_OPS)}")
        fields = tuple(then["fields"]) if then.get("fields") else None
        return cls(index, regexes, tokens, cond.get("sensitivity"), then["action"], then.get("space"), fields)

    def matches(self, attrs: dict[str, str], tokens: int) -> bool:
        if any(not p.search(attrs.get(k, "")) for k, p in self.regexes.items()):
            return False
        if self.sensitivity is not None and attrs.get("sensitivity") != self.sensitivity:
            return False
        return all(_OPS[op](tokens, v) for op, v in self.tokens.items())


def _attrs(collection: str, fields: dict[str, Any]) -> dict[str, str]:
    mime = fields.get("mime") or fields.get("_mime") or fields.get("contentType") or ""
    vibe = fields.get("_vibe") if isinstance(fields.get("_vibe"), dict) else {}
    sens = fields.get("sensitivity") or (vibe or {}).get("sensitivity") or ""
    return {"collection": collection, "mime": str(mime), "type": str(fields.get("type") or ""),
            "sensitivity": str(sens)}


def _structured(text: str) -> bool:
    letters = sum(ch.isalpha() for ch in text)
    return letters < 0.4 * max(1, len(text.replace(" ", "")))


class EligibilityPolicy:
    def __init__(self, rules: list[dict[str, Any]]):
        self.rules = [Rule.parse(i, r) for i, r in enumerate(rules)]

    def decide(self, collection: str, fields: dict[str, Any], intent: str | None, text: str) -> Decision:
        tokens = token_count(text)
        attrs = _attrs(collection, fields)
        for rule in self.rules:
            if rule.matches(attrs, tokens):
                return Decision(rule.action, f"policy:rule{rule.index}", rule.fields, rule.space)  # type: ignore[arg-type]
        if intent == "deny":
            return Decision("ignore", "writer_deny")
        if tokens < 3:
            return Decision("ignore", "too_short")
        if _structured(text):
            return Decision("ignore", "structured")
        return Decision("embed", "default")

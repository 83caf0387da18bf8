"""Citations for agents (SurfSense-compatible): the model cites tiny numbers `[n]`; the server owns
`[n]` → source through the per-conversation registry.

- `cite()` registers each passage (find-or-create) and returns its number.
- `render_context()` prints `<retrieved_context>` with `[n]` as the only integer the layout
  puts next to a passage (no chunk indexes, ids or ranks, which a model would cite instead).
- `CitationNormalizer` rewrites `[n]` → `[citation:n]` in streamed text, holding back a
  token split across chunks .
- `resolve_text()` maps the numbers in an answer back to sources; unknown numbers, and
  sources the caller can no longer read, resolve to nothing (abstention by
  construction).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from shared.agent_ports import CitationEntry, CitationRegistry

_MAX_DIGITS = 9
_TOKEN = re.compile(r"\[(\d{1,9})\]")
_CITED = re.compile(r"\[(?:citation:)?(\d{1,9})\]")
# A tail that may still become `[n]` once the next chunk arrives.
_PARTIAL = re.compile(r"\[\d{0,9}$")


@dataclass
class Passage:
    n: int
    document: str  # grouping label: a title or a path, never an id
    source: str  # short source label shown after the document title (may be empty)
    text: str


def escape(text: str) -> str:
    """Brackets in passage text become `\\[` and `\\]`, so a `[3]` inside a passage never reads
    as a citation number and `[n]` stays the only bracketed integer next to a passage."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def render_context(passages: Iterable[Passage], intro: str = "Excerpts retrieved for this query.") -> str:
    lines = ["<retrieved_context>", intro, "Cite a passage with its [n].", ""]
    current: str | None = None
    for p in passages:
        if p.document != current:
            current = p.document
            label = f'Document: "{escape(p.document)}"' + (f" ({escape(p.source)})" if p.source else "")
            lines.append(label)
        body = escape(" ".join(p.text.split()))
        lines.append(f"  [{p.n}] {body}")
    lines.append("</retrieved_context>")
    return "\n".join(lines)


class CitationNormalizer:
    """Streaming `[n]` → `[citation:n]`. `feed()` returns what can be emitted now; a trailing
    `[`, `[1` or `[12` is held until the next chunk (or `flush()`) shows whether it closes."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, chunk: str) -> str:
        text = self._held + chunk
        m = _PARTIAL.search(text)
        if m and len(text) - m.start() <= _MAX_DIGITS + 1:
            text, self._held = text[: m.start()], text[m.start():]
        else:
            self._held = ""
        return normalize(text)

    def flush(self) -> str:
        out, self._held = self._held, ""
        return normalize(out)


def normalize(text: str) -> str:
    return _TOKEN.sub(lambda m: f"[citation:{int(m.group(1))}]", text)


def cited_numbers(text: str) -> list[int]:
    """Numbers cited as `[n]` or `[citation:n]`, first occurrence order."""
    return list(dict.fromkeys(int(m.group(1)) for m in _CITED.finditer(text)))


def resolve_numbers(registry: CitationRegistry, owner: str, conversation: str, numbers: Iterable[int],
                    still_readable: Callable[[CitationEntry], bool]) -> dict[int, CitationEntry]:
    out: dict[int, CitationEntry] = {}
    for n in numbers:
        entry = registry.resolve(owner, conversation, n)
        if entry is not None and still_readable(entry):
            out[n] = entry
    return out


def cite(registry: CitationRegistry, owner: str, conversation: str, source_type: str,
         locator: dict[str, Any], display: dict[str, Any]) -> int:
    return registry.register(owner, conversation, source_type, locator, display)

"""Citations for agents (SurfSense-compatible): the model cites tiny numbers `[n]`; the server owns
`[n]` → source through the per-conversation registry.

- `cite()` registers each passage (find-or-create) and returns its number.
- `render_context()` prints `<retrieved_context>` with `[n]` as the only integer the layout
  puts next to a passage: the document line shows a title or a file path, never a document
  or chunk id (a model copies the nearest number it sees, and an id is a number it would cite
  instead); passages of different documents that share a title stay in separate groups.
- `normalize()` / `CitationNormalizer` rewrite a real citation `[n]` → `[citation:n]` in
  (streamed) text, holding back a token split across chunks. A real citation is `[n]` with
  n ≥ 1 written without leading zeros (registry numbers start at 1), not glued to what it
  follows: `a[1]`, `x_2[3]`, `f(x)[1]`, `m[1][2]` are indexes and `[0]`, `[007]` are not numbers
  the registry hands out, so they are left as written. Adjacent citations `[1][2]` are both
  rewritten.
- `resolve_numbers()` maps numbers back to sources; unknown numbers, and sources the caller
  can no longer read, resolve to nothing (abstention by construction).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from shared.agent_ports import CitationEntry, CitationRegistry

_MAX_DIGITS = 9
_TOKEN = re.compile(r"\[([1-9]\d{0,8})\]")
_ANY_NUMBER = re.compile(r"\[\d{1,9}\]")  # a bracketed integer, citation or not
_WIRE = re.compile(r"\[citation:([1-9]\d{0,8})\]")
# A tail that may still become `[n]` once the next chunk arrives.
_PARTIAL = re.compile(r"\[\d{0,9}$")
# How much already-emitted text the streaming normaliser keeps to judge what a token follows
# (a chain like `m[1][2]` is an index however it was split).
_CONTEXT_CHARS = 256


@dataclass
class Passage:
    n: int
    document: str  # grouping label: a title or a path, never an id
    source: str  # short source label shown after the document title (may be empty)
    text: str
    group: str | None = None  # what makes two passages one document (default: `document`)


def escape(text: str) -> str:
    """Brackets in passage text become `\\[` and `\\]`, so a `[3]` inside a passage never reads
    as a citation number and `[n]` stays the only bracketed integer next to a passage."""
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def render_context(passages: Iterable[Passage], intro: str = "Excerpts retrieved for this query.") -> str:
    lines = ["<retrieved_context>", intro, "Cite a passage with its [n].", ""]
    current: str | None = None
    for p in passages:
        group = p.document if p.group is None else p.group
        if group != current:
            current = group
            label = f'Document: "{escape(p.document)}"' + (f" ({escape(p.source)})" if p.source else "")
            lines.append(label)
        body = escape(" ".join(p.text.split()))
        lines.append(f"  [{p.n}] {body}")
    lines.append("</retrieved_context>")
    return "\n".join(lines)


class CitationNormalizer:
    """Streaming `[n]` → `[citation:n]`. `feed()` returns what can be emitted now; a trailing
    `[`, `[1` or `[12` is held until the next chunk (or `flush()`) shows whether it closes.
    The last raw characters already emitted are kept, so a token is judged by what it follows
    even across chunks."""

    def __init__(self) -> None:
        self._held = ""
        self._before = ""

    def feed(self, chunk: str) -> str:
        text = self._held + chunk
        m = _PARTIAL.search(text)
        if m and len(text) - m.start() <= _MAX_DIGITS + 1:
            text, self._held = text[: m.start()], text[m.start():]
        else:
            self._held = ""
        return self._emit(text)

    def flush(self) -> str:
        out, self._held = self._held, ""
        return self._emit(out)

    def _emit(self, text: str) -> str:
        out = normalize(text, self._before)
        self._before = (self._before + text)[-_CONTEXT_CHARS:]
        return out


def _is_index(text: str, start: int) -> bool:
    """Whether the bracket at `start` subscripts what precedes it: it follows a word
    character, `)` or an escaping backslash, possibly through a chain of bracketed integers
    (`m[1][2]`)."""
    i = start
    while i > 0 and text[i - 1] == "]":
        j = text.rfind("[", 0, i - 1)
        if j < 0 or not _ANY_NUMBER.fullmatch(text, j, i):
            break
        i = j
    if i == 0:
        return False
    prev = text[i - 1]
    return prev.isalnum() or prev in "_)\\"


def normalize(text: str, before: str = "") -> str:
    """Rewrite the real citations of `text` (`before`: text already emitted ahead of it, read
    only to judge what the first tokens follow)."""
    whole = before + text
    out, last = [], len(before)
    for m in _TOKEN.finditer(whole, last):
        real = not _is_index(whole, m.start())
        out += [whole[last:m.start()], f"[citation:{m.group(1)}]" if real else m.group(0)]
        last = m.end()
    out.append(whole[last:])
    return "".join(out)


def cited_numbers(text: str) -> list[int]:
    """Numbers cited as `[citation:n]` or as a real `[n]` (what `normalize` rewrites), in
    first occurrence order."""
    return list(dict.fromkeys(int(m.group(1)) for m in _WIRE.finditer(normalize(text))))


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

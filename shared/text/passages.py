"""Long documents as passages: what a document longer than the model's window is embedded as.

An embedding model reads a bounded window (all-MiniLM-L6-v2: 256 word pieces) and silently
drops the rest, so a long document embedded as one text is searchable only by its head. Its
text is split instead: on Markdown headings first (each passage carries its heading path, so
a section's passage still says what it is about), then on blank-line paragraphs packed up to
the size limit, then on sentence ends, then on whitespace. A piece cut inside a paragraph
starts a little before the cut (`overlap`), so a sentence that straddles it is whole in one of
the two. The document's semantic score is its best passage's (the vector index's max-sim).

A document whose text fits (the common case) is one passage whose text is exactly
`doc_text`: its vector is the one it always had. Offsets are character offsets into one
field's string, so a page can show the passage that matched.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from shared.text.hashing import _default_keys, _strings, doc_text

_HEADING = re.compile(r"^[ ]{0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"[.!?;:](?=\s)")
# A title this short is prefixed to every passage: it is the densest summary of the document.
TITLE_PREFIX_MAX = 200


@dataclass(frozen=True)
class PassageConfig:
    max_chars: int = 1000  # about 200-250 word pieces of English: inside a 256-piece window
    overlap: int = 120
    max_passages: int = 256  # a bound per document (usage and budgets count every passage)


@dataclass(frozen=True)
class Passage:
    text: str  # what is embedded: title, heading path and the piece
    field: str | None = None  # None: the whole document's text (it fits one window)
    start: int = 0
    end: int = 0
    headings: tuple[str, ...] = ()

    def locator(self) -> dict[str, object]:
        """Where the passage sits, as a read's hit shows it."""
        return {"field": self.field, "start": self.start, "end": self.end, "headings": list(self.headings)}


def split(fields: Mapping[str, Any], allow: Sequence[str] | None, cfg: PassageConfig) -> list[Passage]:
    """The passages `fields` are split into (at least one), in order; the embedder takes the first
    `cfg.max_passages`."""
    whole = doc_text(fields, allow)
    if len(whole) <= cfg.max_chars:
        return [Passage(whole)]
    keys = list(allow) if allow is not None else _default_keys(fields)
    title = next(iter(_strings(fields.get("title"))), "").strip()
    prefix = title if 0 < len(title) <= TITLE_PREFIX_MAX else ""
    out: list[Passage] = []
    short: list[tuple[str, str]] = []  # fields too small to split: packed into passages together
    for key in keys:
        values = _strings(fields.get(key))
        for i, value in enumerate(values):
            name = key if len(values) == 1 else f"{key}[{i}]"
            if prefix and key == "title":
                continue  # already in every passage
            if len(value) <= cfg.max_chars // 4:
                short.append((name, value))
                continue
            out.extend(_field_passages(name, value, prefix, cfg))
    out = _pack_short(short, prefix, cfg) + out
    return out or [Passage(whole[: cfg.max_chars])]


def _field_passages(name: str, value: str, prefix: str, cfg: PassageConfig) -> Iterator[Passage]:
    for headings, start, end in _sections(value):
        for a, b in _pieces(value, start, end, cfg):
            body = value[a:b].strip()
            if not body:
                continue
            text = "\n".join(p for p in (prefix, " > ".join(headings), body) if p)
            yield Passage(text, name, a, b, headings)


def _sections(text: str) -> Iterator[tuple[tuple[str, ...], int, int]]:
    """(heading path, start, end) of each Markdown section; the text before the first heading
    is a section with no path. A heading's own line belongs to its section."""
    path: list[tuple[int, str]] = []
    start, current = 0, cast(tuple[str, ...], ())
    for m in _HEADING.finditer(text):
        if m.start() > start:
            yield current, start, m.start()
        level = len(m.group(1))
        path = [(lv, t) for lv, t in path if lv < level] + [(level, m.group(2).strip())]
        current, start = tuple(t for _, t in path), m.start()
    if start < len(text):
        yield current, start, len(text)


def _pieces(text: str, start: int, end: int, cfg: PassageConfig) -> Iterator[tuple[int, int]]:
    """Spans of at most `cfg.max_chars` covering text[start:end]: whole paragraphs packed
    together where they fit, a longer paragraph cut at sentence ends (or whitespace)."""
    piece_start = start
    for p_start, p_end in _paragraphs(text, start, end):
        if p_end - piece_start <= cfg.max_chars:
            continue
        if p_start - piece_start > cfg.max_chars // 4:  # the paragraphs so far make a piece
            yield piece_start, p_start
            piece_start = p_start
        while p_end - piece_start > cfg.max_chars:
            cut = _cut(text, piece_start, piece_start + cfg.max_chars)
            yield piece_start, cut
            piece_start = max(_back_to_space(text, cut - cfg.overlap, piece_start + 1), piece_start + 1)
    if end > piece_start:
        yield piece_start, end


def _paragraphs(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    at = start
    for m in _PARAGRAPH_BREAK.finditer(text, start, end):
        yield at, m.start()
        at = m.end()
    yield at, end


def _cut(text: str, start: int, limit: int) -> int:
    """Where a piece starting at `start` ends, at most at `limit`: after the last sentence end
    in the second half of the window, else at the last whitespace, else at `limit`."""
    floor = start + (limit - start) // 2
    ends = [m.end() for m in _SENTENCE_END.finditer(text, floor, limit)]
    if ends:
        return ends[-1]
    space = text.rfind(" ", floor, limit)
    return space if space > floor else limit


def _back_to_space(text: str, at: int, floor: int) -> int:
    """`at` moved forward to the start of a word (an overlap never starts mid-word)."""
    at = max(at, floor)
    space = text.find(" ", at)
    return space + 1 if 0 <= space < at + 40 else at


def _pack_short(short: list[tuple[str, str]], prefix: str, cfg: PassageConfig) -> list[Passage]:
    """Small fields (a subtitle, tags, an abstract line) share passages, in field order."""
    out: list[Passage] = []
    group: list[tuple[str, str]] = []
    size = 0
    for name, value in short:
        if group and size + len(value) > cfg.max_chars:
            out.append(_short_passage(group, prefix))
            group, size = [], 0
        group.append((name, value))
        size += len(value) + 1
    if group:
        out.append(_short_passage(group, prefix))
    return out


def _short_passage(group: list[tuple[str, str]], prefix: str) -> Passage:
    name, first = group[0]
    text = "\n".join([prefix, *(v for _, v in group)] if prefix else [v for _, v in group])
    return Passage(text, name, 0, len(first))

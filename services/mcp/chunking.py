"""Text chunkers for the agent tools.

`markdown_chunks` (Rifflux's `reindex`, with chunk overlap): split by ATX headings
(outside fenced code), keep the heading breadcrumb, and cut long sections into windows of at
most `size` characters that overlap by about `overlap` characters, so a sentence cut at a
window edge is whole in one of the two windows.

`material_chunks` (extract_key_info): paragraphs (blank lines); a paragraph above the cap is split
into sentences packed up to the cap. Each chunk keeps its original text and a cleaned one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE = re.compile(r"^\s*(```|~~~)")
_PARAGRAPHS = re.compile(r"\n\s*\n")
_SENTENCES = re.compile(r"(?<=[.!?])\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u2060\ufeff]")
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class Chunk:
    index: int
    heading_path: str
    content: str


def heading(line: str) -> tuple[int, str] | None:
    """An ATX heading's (level, title), or None. Plain string scans, linear in the line: the
    regex this replaces (`^(#{1,6})\\s+(.*?)\\s*#*\\s*$`) backtracked cubically on a long
    line of spaces that does not end the way it hoped. As before, the
    '#'s start the line, whitespace follows them, and a closing run of '#'s is dropped; unlike
    before, only when a space precedes it (CommonMark), so `# C#` keeps its '#'."""
    level = len(line) - len(line.lstrip("#"))
    if not 1 <= level <= 6 or level == len(line) or not line[level].isspace():
        return None
    title = line[level:].strip()
    body = title.rstrip("#")
    if not body:
        return level, ""  # `## ##`: an empty heading
    if len(body) < len(title) and body[-1].isspace():
        title = body.rstrip()
    return level, title


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading breadcrumb, section text) in document order; the heading line stays in its
    section so the chunk reads naturally and BM25 sees the heading words."""
    stack: list[tuple[int, str]] = []
    out: list[tuple[str, list[str]]] = [("", [])]
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        h = None if fenced else heading(line)
        if h:
            level, title = h
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, title)]
            out.append((" > ".join(t for _, t in stack), []))
        out[-1][1].append(line)
    return [(h, "\n".join(lines).strip()) for h, lines in out if "\n".join(lines).strip()]


def _cut(text: str, start: int, size: int) -> int:
    """End of a window starting at `start`: the last paragraph, sentence or word boundary in
    the window's second half, else a hard cut."""
    end = start + size
    if end >= len(text):
        return len(text)
    window = text[start:end]
    for sep in ("\n\n", ". ", "\n", " "):
        at = window.rfind(sep)
        if at >= size // 2:
            return start + at + len(sep)
    return end


def windows(text: str, size: int, overlap: int) -> list[str]:
    if len(text) <= size:
        return [text]
    overlap = max(0, min(overlap, size // 2))
    out, start = [], 0
    while start < len(text):
        end = _cut(text, start, size)
        out.append(text[start:end].strip())
        if end >= len(text):
            break
        nxt = max(end - overlap, start + 1)
        space = text.find(" ", nxt, end)  # start the overlap on a word boundary
        start = space + 1 if space != -1 else nxt
    return [w for w in out if w]


def markdown_chunks(text: str, size: int = 1200, overlap: int = 200) -> list[Chunk]:
    out: list[Chunk] = []
    for heading, body in _sections(text):
        for piece in windows(body, size, overlap):
            out.append(Chunk(len(out), heading, piece))
    return out


def clean(text: str) -> str:
    """As extract_key_info clients expect: whitespace normalised and control characters stripped."""
    return _WS.sub(" ", _CONTROL.sub("", text)).strip()


@dataclass(frozen=True)
class Material:
    index: int
    original: str
    cleaned: str


def _pack(sentences: list[str], cap: int) -> list[str]:
    out: list[str] = []
    for s in sentences:
        for piece in ([s] if len(s) <= cap else windows(s, cap, 0)):
            if out and len(out[-1]) + 1 + len(piece) <= cap:
                out[-1] = out[-1] + " " + piece
            else:
                out.append(piece)
    return out


def material_chunks(materials: str, cap: int = 1500) -> list[Material]:
    pieces: list[str] = []
    for para in _PARAGRAPHS.split(materials.replace("\r\n", "\n")):
        para = para.strip()
        if not para:
            continue
        pieces += [para] if len(para) <= cap else _pack(_SENTENCES.split(para), cap)
    out: list[Material] = []
    for p in pieces:
        c = clean(p)
        if c:
            out.append(Material(len(out), p, c))
    return out

"""Long documents as passages: the split, and a read that finds a section deep in a document.

The embedder here reads only the first WINDOW characters of each text, as a real model reads
only its first 256 word pieces: a document embedded as one text is then found only by its head.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from services.api.render import answer_body
from services.planner.planner import ReadRequest
from shared.adapters.embedders.hash_embedder import HashEmbedder
from shared.model import DocKey, Principal, SemanticStatus
from shared.text.passages import PassageConfig, split
from tests.unit.test_scheduler_switch import embed_now, running

WINDOW = 300
CFG = PassageConfig(max_chars=400, overlap=60, max_passages=64)
TOPICS = [
    ("Glacier mass balance", "glacier ice melt accumulation ablation firn snowline moraine"),
    ("Sourdough fermentation", "sourdough starter yeast lactobacillus crumb proofing flour hydration"),
    ("Transformer attention", "attention heads queries keys softmax positional encoding layers"),
    ("Tidal energy", "tidal turbines estuary barrage currents lunar cycle generators"),
    ("Medieval cartography", "mappa mundi portolan charts compass rhumb lines parchment"),
    ("Bee colony collapse", "honeybee hive varroa mites pollination queen brood nectar"),
]

OPENING = [("Introduction", "this notebook collects observations gathered during the season by the team"),
           ("Methods", "samples were recorded daily with calibrated instruments and checked twice")]


class WindowedEmbedder(HashEmbedder):
    """The hash embedder over each text's first WINDOW characters only."""

    def __init__(self, dim: int = 32):
        super().__init__(dim)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += texts
        return super().embed([t[:WINDOW] for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return super().embed([text[:WINDOW]])[0]


def markdown(topics: Sequence[tuple[str, str]]) -> str:
    """A long Markdown document: one section per topic, each a few paragraphs of its words."""
    out = []
    for heading, words in topics:
        para = " ".join(words.split() * 3) + "."
        out.append(f"## {heading}\n\n{para}\n\n{para}")
    return "\n\n".join(out)


def test_a_short_document_is_one_passage_whose_text_is_the_documents() -> None:
    parts = split({"title": "T", "body": "a short body"}, None, CFG)
    assert [p.text for p in parts] == ["T\na short body"] and parts[0].field is None


def test_a_long_document_is_split_on_headings_within_the_size_with_offsets_into_its_field() -> None:
    body = markdown(TOPICS)
    parts = split({"title": "Notes", "body": body}, None, CFG)
    assert len(parts) >= len(TOPICS)
    assert all(len(p.text) <= CFG.max_chars + 80 for p in parts)  # + title and heading path
    for p in parts:
        assert p.field == "body" and p.text.startswith("Notes\n")
        piece = body[p.start:p.end].strip()
        assert piece and piece in p.text  # the offsets are the passage's place in its field
        assert p.headings and p.headings[-1] in {h for h, _ in TOPICS}
    covered = {h for p in parts for h in p.headings}
    assert covered == {h for h, _ in TOPICS}  # nothing past the window is dropped


def test_a_paragraph_longer_than_a_passage_is_cut_at_sentences_with_overlap() -> None:
    sentences = [f"Sentence number {i} talks about topic {i}." for i in range(60)]
    body = " ".join(sentences)
    parts = split({"body": body}, None, CFG)
    assert len(parts) > 3
    for a, b in zip(parts, parts[1:], strict=False):
        assert b.start < a.end  # the next one starts before this one ends: the overlap
        assert body[a.end - 1] in ".!?;: " or a.end == len(body)  # cut after a sentence or a word
    assert parts[-1].end == len(body) and parts[0].start == 0


def test_a_section_deep_in_a_long_document_is_found_and_its_passage_named(tmp_path: Path) -> None:
    """Six long documents: the same two opening sections, then a last section on a topic only
    that document has. A query for each topic finds its document first, and the hit says where
    the passage is. Fails with passages off (every document one text, cut at the embedder's
    window): the last sections are then invisible to the semantic leg."""
    emb = WindowedEmbedder()
    owner = Principal("t", ("user:o",), frozenset({"read", "write"}))
    with running(tmp_path, emb, per_tenant_per_min=100_000, passage_chars=CFG.max_chars,
                 passage_overlap=CFG.overlap) as c:
        keys = []
        for i in range(len(TOPICS)):
            doc = {"title": f"Notebook {i}", "body": markdown([*OPENING, TOPICS[i]]), "_acl": ["user:o"]}
            c.docs.put([c.docs.parse(owner, "notes", f"d{i}", doc)])
            keys.append(DocKey("t", "notes", f"d{i}"))
        embed_now(c, c.settings.space, *keys)
        assert all(s.status == SemanticStatus.READY for s in c.store.sidecars(keys, c.settings.space).values())
        assert len(emb.texts) > len(keys) * 5  # every passage was sent, not one text per document
        for i, (heading, words) in enumerate(TOPICS):
            session = c.planner.open(owner, ReadRequest("notes", words, "semantic", limit=3))  # type: ignore[arg-type]
            results = answer_body(session.answer(final=True))["results"]  # type: ignore[attr-defined]
            assert results[0]["id"] == f"d{i}", (heading, [r["id"] for r in results])
            where = results[0]["passage"]
            assert where["field"] == "body" and where["headings"] == [heading]
            body = c.store.get_doc(keys[i]).fields["body"]  # type: ignore[union-attr]
            assert heading in body[where["start"]:where["end"]] or words.split()[0] in body[where["start"]:where["end"]]

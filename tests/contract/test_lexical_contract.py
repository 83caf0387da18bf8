"""LexicalIndex contract: every adapter must pass it.

OpenSearch joins when VIBE_OPENSEARCH_URL points at a server (no server can run on the build
machines); each test then works in its own index prefix and deletes it afterwards. Without the
variable its cases are skipped with the reason shown by `pytest -rs`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shared.adapters.opensearch_lexical import OpenSearchLexicalIndex
from shared.adapters.tantivy_lexical import TantivyLexicalIndex
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from shared.ports import LexicalIndex, SearchFilter

OPENSEARCH_URL = os.environ.get("VIBE_OPENSEARCH_URL")
NO_OPENSEARCH = "VIBE_OPENSEARCH_URL is not set: no OpenSearch server to run the lexical contract against"


def _opensearch(_: Path) -> LexicalIndex:
    from opensearchpy import OpenSearch

    # A prefix outside `vibe-lex-*`: a test never touches (or overlaps the template of) real indices.
    prefix = f"vibe-contract-{uuid.uuid4().hex[:12]}-"
    return OpenSearchLexicalIndex(OpenSearch(hosts=[OPENSEARCH_URL], timeout=30), prefix=prefix)


Factory = Callable[[Path], LexicalIndex]
ADAPTERS: dict[str, Factory] = {"tantivy": TantivyLexicalIndex, "opensearch": _opensearch}
PARAMS = [pytest.param("tantivy"),
          pytest.param("opensearch", marks=pytest.mark.skipif(not OPENSEARCH_URL, reason=NO_OPENSEARCH))]


@pytest.fixture(params=PARAMS)
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LexicalIndex]:
    idx = ADAPTERS[request.param](tmp_path / "lex")
    yield idx
    if isinstance(idx, OpenSearchLexicalIndex):
        idx.drop()
    idx.close()


def doc(tenant: str, coll: str, i: str, title: str, body: str, acl: list[str] | None = None) -> StoredDoc:
    return StoredDoc(DocKey(tenant, coll, i), {"title": title, "body": body}, acl or [PUBLIC_PRINCIPAL], None, "h", 0.0)


def flt(tenant: str = "t", acl: tuple[str, ...] = (PUBLIC_PRINCIPAL,),
        cols: tuple[str, ...] | None = None) -> SearchFilter:
    return SearchFilter(tenant, cols, acl)


def test_bm25_ranks_and_stems(index: LexicalIndex) -> None:
    index.apply([doc("t", "c", "1", "Flying wings", "wings fly through turbulent air"),
                 doc("t", "c", "2", "Boats", "boats float on water"),
                 doc("t", "c", "3", "Wing flutter", "a wing fluttered once")], [])
    hits = index.search(flt(), "wing", 10)
    assert [h.key.doc_id for h in hits][:2] == ["1", "3"] or [h.key.doc_id for h in hits][:2] == ["3", "1"]
    assert {h.key.doc_id for h in hits} == {"1", "3"}
    assert all(h.score > 0 for h in hits)
    assert index.search(flt(), "the of and", 10) == []


def test_acl_and_collection_filters_are_inside_the_query(index: LexicalIndex) -> None:
    index.apply([doc("t", "a", "pub", "engine", "engine"), doc("t", "a", "eng", "engine", "engine", ["g:eng"]),
                 doc("t", "b", "other", "engine", "engine")], [])
    assert {h.key.doc_id for h in index.search(flt(acl=("*",)), "engine", 10)} == {"pub", "other"}
    assert {h.key.doc_id for h in index.search(flt(acl=("*", "g:eng")), "engine", 10)} == {"pub", "eng", "other"}
    assert {h.key.doc_id for h in index.search(flt(acl=("*", "g:eng"), cols=("a",)), "engine", 10)} == {"pub", "eng"}
    assert index.search(flt(acl=("g:none",)), "engine", 10) == []


def test_filter_does_not_change_scores(index: LexicalIndex) -> None:
    index.apply([doc("t", "a", "1", "x", "rotor blade rotor"), doc("t", "a", "2", "x", "rotor hub", ["g:x"])], [])
    wide = {h.key.doc_id: h.score for h in index.search(flt(acl=("*", "g:x")), "rotor", 10)}
    narrow = {h.key.doc_id: h.score for h in index.search(flt(acl=("*",)), "rotor", 10)}
    assert narrow["1"] == pytest.approx(wide["1"], rel=1e-9)


def test_tenants_share_no_statistics(index: LexicalIndex) -> None:
    index.apply([doc("a", "c", str(i), "turbine", "turbine fatigue " * (i + 1)) for i in range(5)], [])
    before = [(h.key.doc_id, h.score) for h in index.search(flt("a"), "turbine fatigue", 10)]
    index.apply([doc("b", "c", str(i), "noise", "turbine " * 30) for i in range(200)], [])
    after = [(h.key.doc_id, h.score) for h in index.search(flt("a"), "turbine fatigue", 10)]
    assert before == after and len(before) == 5
    assert all(h.key.tenant == "b" for h in index.search(flt("b"), "turbine", 300))


def test_update_and_delete(index: LexicalIndex) -> None:
    index.apply([doc("t", "c", "1", "alpha", "alpha")], [])
    index.apply([doc("t", "c", "1", "beta", "beta")], [])
    assert index.search(flt(), "alpha", 10) == []
    assert [h.key.doc_id for h in index.search(flt(), "beta", 10)] == ["1"]
    index.apply([], [DocKey("t", "c", "1")])
    assert index.search(flt(), "beta", 10) == []


def test_highlights_only_for_permitted_docs(index: LexicalIndex) -> None:
    docs = [doc("t", "c", "1", "Icing", "rotor icing test"), doc("t", "c", "2", "Icing", "secret icing", ["g:x"])]
    index.apply(docs, [])
    hl = index.highlights(flt(acl=("*",)), "icing", docs)
    assert set(hl) == {DocKey("t", "c", "1")}
    assert any("<b>icing</b>" in s.lower() for s in hl[DocKey("t", "c", "1")])


def test_highlights_escape_the_documents_html(index: LexicalIndex) -> None:
    """Finding 6 (issue 12): a snippet is HTML a page may render, so the document's own markup
    comes back escaped and the only tags are the highlight's `<b>` (no stored XSS)."""
    d = doc("t", "c", "x", "Icing <script>alert(1)</script>",
            "rotor icing <img src=x onerror=alert(2)> & \"quoted\" icing")
    index.apply([d], [])
    hl = index.highlights(flt(), "icing", [d])
    snippets = hl[DocKey("t", "c", "x")]
    assert any("<b>icing</b>" in s.lower() for s in snippets)
    for s in snippets:
        bare = s.replace("<b>", "").replace("</b>", "")
        assert "<" not in bare and ">" not in bare, s
        assert "&lt;" in bare, s
    assert any("&amp;" in s for s in snippets)


def test_many_tenants_keep_few_writers_open(tmp_path: Path) -> None:
    idx = TantivyLexicalIndex(tmp_path / "lex", max_writers=2)
    for t in ("a", "b", "c", "a"):
        idx.apply([doc(t, "c", "1", "rotor", f"rotor {t}")], [])
    open_writers = [t for t, ti in idx._tenants.items() if ti.writer is not None]
    assert sorted(open_writers) == ["a", "c"]
    idx.apply([doc("b", "c", "2", "rotor", "rotor again")], [])  # a closed writer reopens on demand
    assert {h.key.doc_id for h in idx.search(flt("b"), "rotor", 10)} == {"1", "2"}
    idx.close()

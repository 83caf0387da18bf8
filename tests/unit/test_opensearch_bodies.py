"""The exact HTTP requests the OpenSearch adapter sends, without a server.

The stand-in is the lowest layer only: a real opensearch-py `OpenSearch` client whose connection
class records each request (method, path, query parameters, the serialized body) and answers
with canned JSON. Everything above it (client API, serializer, bulk NDJSON, error mapping) is the
real library. What the server does with them is tested against a real node: the shared lexical
contract suite, tests/contract/test_opensearch_adapter.py and tests/integration/test_opensearch_profile.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch
from opensearchpy.connection import Connection
from opensearchpy.exceptions import RequestError

from shared.adapters import analysis
from shared.adapters import opensearch_lexical as osl
from shared.adapters import tantivy_lexical as tl
from shared.adapters.opensearch_lexical import OpenSearchBulkError, OpenSearchLexicalIndex, index_name
from shared.config import Settings
from shared.model import PUBLIC_PRINCIPAL, DocKey, StoredDoc
from shared.ports import FieldCondition, LexicalIndex, SearchFilter

Responder = Callable[[str, str, dict[str, Any], Any], tuple[int, dict[str, Any]]]


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, Any]
    body: Any


def _decode(path: str, body: bytes | str | None) -> Any:
    if body is None:
        return None
    text = body.decode() if isinstance(body, bytes) else body
    if path.endswith("/_bulk"):
        assert text.endswith("\n"), "bulk bodies end with a newline"
        return [json.loads(line) for line in text.splitlines()]
    return json.loads(text)


def _bulk_ok(lines: list[dict[str, Any]]) -> dict[str, Any]:
    items = []
    for line in lines:
        op = next(iter(line))
        if op in ("index", "delete"):
            items.append({op: {"_index": line[op]["_index"], "_id": line[op]["_id"], "status": 200}})
    return {"took": 1, "errors": False, "items": items}


def default_responder(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
    if path.endswith("/_bulk"):
        return 200, _bulk_ok(body)
    if path.endswith("/_search"):
        return 200, {"hits": {"hits": []}}
    return 200, {"acknowledged": True}


def recording_client(responder: Responder = default_responder) -> tuple[OpenSearch, list[Call]]:
    calls: list[Call] = []

    class RecordingConnection(Connection):
        def perform_request(self, method: str, url: str, params: Any = None, body: Any = None,
                            timeout: Any = None, ignore: Any = (), headers: Any = None) -> Any:
            # The client escapes query parameters to bytes before this layer; compare as text.
            query = {k: v.decode() if isinstance(v, bytes) else v for k, v in (params or {}).items()}
            call = Call(method, url, query, _decode(url, body))
            calls.append(call)
            status, payload = responder(call.method, call.path, call.params, call.body)
            raw = json.dumps(payload)
            if not 200 <= status < 300 and status not in ignore:
                self._raise_error(status, raw, "application/json")
            return status, {"content-type": "application/json"}, raw

    client = OpenSearch(hosts=[{"host": "opensearch.invalid", "port": 9200}], connection_class=RecordingConnection,
                        max_retries=0)
    return client, calls


def doc(tenant: str, coll: str, i: str, fields: dict[str, Any], acl: list[str] | None = None) -> StoredDoc:
    return StoredDoc(DocKey(tenant, coll, i), fields, acl or [PUBLIC_PRINCIPAL], None, "h", 0.0)


IDX_T = index_name("t")

TEMPLATE = {
    "index_patterns": ["vibe-lex-*"],
    "priority": 200,
    "template": {
        "settings": {
            "number_of_shards": 1,
            "auto_expand_replicas": "0-1",
            "refresh_interval": "1s",
            "analysis": {
                # the tantivy analyzer's pipeline (shared/adapters/analysis.py), step by step
                "tokenizer": {"vibe_tokens": {"type": "pattern", "pattern": r"[\p{IsAlphabetic}\p{N}]+", "group": 0}},
                "filter": {
                    "vibe_long": {"type": "length", "max": 39},  # tantivy drops tokens of >= 40 bytes
                    "vibe_stop": {"type": "stop", "stopwords": list(analysis.STOPWORDS)},
                    "vibe_stem": {"type": "snowball", "language": "English"},
                },
                "analyzer": {
                    "vibe_en": {"type": "custom", "tokenizer": "vibe_tokens",
                                "filter": ["vibe_long", "lowercase", "vibe_stop", "vibe_stem"]},
                },
            },
            "similarity": {"default": {"type": "BM25", "k1": 1.2, "b": 0.75}},
        },
        "mappings": {
            "_meta": {"schema_version": osl.SCHEMA_VERSION},
            "dynamic": "strict",
            "properties": {
                "tenant": {"type": "keyword"},
                "collection": {"type": "keyword"},
                "doc_id": {"type": "keyword"},
                "acl": {"type": "keyword", "ignore_above": 1024},
                "facet": {"type": "keyword"},
                "certs": {"type": "keyword"},  # a document's certificates, and how many
                "certs_n": {"type": "integer"},
                "title": {"type": "text", "analyzer": "vibe_en", "copy_to": "all"},
                "body": {"type": "text", "analyzer": "vibe_en", "copy_to": "all"},
                "all": {"type": "text", "analyzer": "vibe_en", "index_options": "freqs"},
            },
        },
    },
}


# The certificate clause of a caller holding none: only documents requiring none pass.
NO_CERTS = {"bool": {"must_not": [{"exists": {"field": "certs_n"}}]}}


def _keys_anywhere(obj: Any) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys_anywhere(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys_anywhere(v)}
    return set()


def test_implements_the_port() -> None:
    client, _ = recording_client()
    assert isinstance(OpenSearchLexicalIndex(client), LexicalIndex)


def test_first_write_installs_template_creates_tenant_index_then_bulk_waits_for_refresh() -> None:
    client, calls = recording_client()
    idx = OpenSearchLexicalIndex(client)
    d1 = doc("t", "c", "1", {"title": "Rotor icing", "body": "ice on blades", "tags": ["wind", "cold"], "n": 3},
             ["g:eng"])
    idx.apply([d1], [DocKey("t", "c", "old")])
    assert [(c.method, c.path, c.params) for c in calls] == [
        ("PUT", "/_index_template/vibe-lex-template", {}),
        ("PUT", f"/{IDX_T}", {}),
        ("POST", "/_bulk", {"refresh": "wait_for"}),
    ]
    assert calls[0].body == TEMPLATE
    assert calls[1].body is None  # settings and mappings come from the template
    assert calls[2].body == [
        {"delete": {"_index": IDX_T, "_id": "c/old", "routing": "t"}},
        {"index": {"_index": IDX_T, "_id": "c/1", "routing": "t"}},
        # body = every other text field in doc_text order (as tantivy); numbers carry no prose
        {"tenant": "t", "collection": "c", "doc_id": "1", "acl": ["g:eng"], "title": "Rotor icing",
         "body": "ice on blades\nwind\ncold",
         # metadata filter tokens: field, kind, value; 3 as its order-preserving 64-bit key (0x4008... with
         # the sign bit flipped), so a keyword `range` over these tokens is a numeric range
         "facet": ["title\x1fs\x1fRotor icing", "body\x1fs\x1fice on blades", "tags\x1fs\x1fwind",
                   "tags\x1fs\x1fcold", "n\x1fr0\x1fc008000000000000"]},
    ]
    calls.clear()
    idx.apply([doc("t", "c", "2", {"title": "x"})], [])
    assert [(c.method, c.path) for c in calls] == [("POST", "/_bulk")]  # index known: no more setup


def test_only_each_indexs_last_bulk_waits_for_the_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """One refresh shows every earlier write of its index: an apply split into several bulks
    waits once per index, on the last bulk that writes to it."""
    monkeypatch.setattr(osl, "BULK_ACTIONS", 2)
    client, calls = recording_client()
    docs = [doc("a", "c", str(i), {"title": "x"}) for i in range(3)] + [doc("b", "c", str(i), {"title": "y"})
                                                                        for i in range(3)]
    OpenSearchLexicalIndex(client).apply(docs, [])
    bulks = [(c.params["refresh"], {line["index"]["_index"] for line in c.body if "index" in line})
             for c in calls if c.path == "/_bulk"]
    assert bulks == [("false", {index_name("a")}), ("wait_for", {index_name("a"), index_name("b")}),
                     ("wait_for", {index_name("b")})]


def test_index_already_created_by_another_process_is_fine_other_errors_are_not() -> None:
    def exists(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        if method == "PUT" and path == f"/{IDX_T}":
            return 400, {"error": {"type": "resource_already_exists_exception", "reason": "exists"}, "status": 400}
        return default_responder(method, path, params, body)

    client, calls = recording_client(exists)
    OpenSearchLexicalIndex(client).apply([doc("t", "c", "1", {"title": "a"})], [])
    assert calls[-1].path == "/_bulk"
    # an index made before certificates gets their fields (a no-op when it has them)
    assert (calls[-2].method, calls[-2].path) == ("PUT", f"/{IDX_T}/_mapping")
    assert calls[-2].body == {"properties": {"certs": {"type": "keyword"}, "certs_n": {"type": "integer"}}}

    def broken(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        if method == "PUT" and path == f"/{IDX_T}":
            return 400, {"error": {"type": "illegal_argument_exception", "reason": "bad"}, "status": 400}
        return default_responder(method, path, params, body)

    client, calls = recording_client(broken)
    with pytest.raises(RequestError):
        OpenSearchLexicalIndex(client).apply([doc("t", "c", "1", {"title": "a"})], [])
    assert all(c.path != "/_bulk" for c in calls)


def test_search_body_acl_in_bool_filter_never_post_filter() -> None:
    client, calls = recording_client()
    idx = OpenSearchLexicalIndex(client)
    idx.search(SearchFilter("t", ("a", "b"), ("*", "g:eng")), "wing flutter", 50)
    (call,) = calls
    assert (call.method, call.path) == ("POST", f"/{IDX_T}/_search")
    assert call.params == {"routing": "t", "ignore_unavailable": "true"}
    assert call.body == {
        "size": 50,
        "track_total_hits": False,
        "_source": False,
        "docvalue_fields": ["collection", "doc_id"],
        "query": {"bool": {
            "should": [{"match": {"title": {"query": "wing flutter", "boost": 0.5}}},
                       {"match": {"all": {"query": "wing flutter", "boost": 1.0}}}],
            "minimum_should_match": 1,
            "filter": [{"term": {"tenant": "t"}}, {"terms": {"acl": ["*", "g:eng"]}}, NO_CERTS,
                       {"terms": {"collection": ["a", "b"]}}],
        }},
    }
    assert "post_filter" not in _keys_anywhere(call.body)


def test_search_without_collections_filters_tenant_and_acl_only() -> None:
    client, calls = recording_client()
    OpenSearchLexicalIndex(client).search(SearchFilter("t", None, ("*",)), "rotor", 5)
    assert calls[0].body["query"]["bool"]["filter"] == [{"term": {"tenant": "t"}}, {"terms": {"acl": ["*"]}},
                                                        NO_CERTS]


def test_search_reads_keys_from_doc_values_not_from_id() -> None:
    def answer(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        hits = [{"_id": "~abc", "_score": 3.5, "fields": {"collection": ["c/x"], "doc_id": ["id/with/slash"]}},
                {"_id": "c/2", "_score": 1.25, "fields": {"collection": ["c"], "doc_id": ["2"]}}]
        return 200, {"hits": {"hits": hits}}

    client, _ = recording_client(answer)
    hits = OpenSearchLexicalIndex(client).search(SearchFilter("t", None, ("*",)), "rotor", 5)
    assert [(h.key, h.score) for h in hits] == [(DocKey("t", "c/x", "id/with/slash"), 3.5),
                                               (DocKey("t", "c", "2"), 1.25)]


def test_empty_query_or_acl_sends_nothing() -> None:
    client, calls = recording_client()
    idx = OpenSearchLexicalIndex(client)
    assert idx.search(SearchFilter("t", None, ("*",)), "   ", 5) == []
    assert idx.search(SearchFilter("t", None, ()), "rotor", 5) == []
    assert calls == []


def test_highlight_request_carries_the_filter_and_only_permitted_ids() -> None:
    def answer(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        hits = [{"_id": "a/1", "_score": 1.0, "fields": {"collection": ["a"], "doc_id": ["1"]},
                 "highlight": {"title": ["Rotor <b>icing</b>"], "body": ["the <b>icing</b> test"]}},
                {"_id": "a/4", "_score": 0.5, "fields": {"collection": ["a"], "doc_id": ["4"]}}]
        return 200, {"hits": {"hits": hits}}

    client, calls = recording_client(answer)
    docs = [doc("t", "a", "1", {"title": "Rotor icing"}), doc("t", "a", "2", {"title": "icing"}, ["g:secret"]),
            doc("t", "b", "3", {"title": "icing"}), doc("u", "a", "9", {"title": "icing"}),
            doc("t", "a", "4", {"title": "icing"}, ["g:eng"])]
    hl = OpenSearchLexicalIndex(client).highlights(SearchFilter("t", ("a",), ("*", "g:eng")), "icing", docs)
    assert hl == {DocKey("t", "a", "1"): ["Rotor <b>icing</b>", "the <b>icing</b> test"]}
    (call,) = calls
    assert (call.path, call.params) == (f"/{IDX_T}/_search", {"routing": "t", "ignore_unavailable": "true"})
    assert call.body == {
        "size": 2,
        "track_total_hits": False,
        "_source": False,
        "docvalue_fields": ["collection", "doc_id"],
        "query": {"bool": {
            "should": [{"match": {"title": {"query": "icing", "boost": 0.5}}},
                       {"match": {"all": {"query": "icing", "boost": 1.0}}}],
            "minimum_should_match": 1,
            "filter": [{"term": {"tenant": "t"}}, {"terms": {"acl": ["*", "g:eng"]}}, NO_CERTS,
                       {"terms": {"collection": ["a"]}}, {"ids": {"values": ["a/1", "a/4"]}}],
        }},
        "highlight": {"pre_tags": ["<b>"], "post_tags": ["</b>"], "encoder": "html", "require_field_match": False,
                      "max_analyzer_offset": 999_999, "fields": {
            "title": {"number_of_fragments": 0}, "body": {"fragment_size": 150, "number_of_fragments": 1}}},
    }
    assert "post_filter" not in _keys_anywhere(call.body)


def test_highlights_of_only_unreadable_docs_send_nothing() -> None:
    client, calls = recording_client()
    docs = [doc("t", "a", "2", {"title": "icing"}, ["g:secret"]), doc("u", "a", "9", {"title": "icing"})]
    assert OpenSearchLexicalIndex(client).highlights(SearchFilter("t", None, ("*",)), "icing", docs) == {}
    assert calls == []


def test_bulk_item_failures_raise_and_are_logged_without_text(caplog: pytest.LogCaptureFixture) -> None:
    def partial(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        if not path.endswith("/_bulk"):
            return default_responder(method, path, params, body)
        items = [
            {"delete": {"_index": IDX_T, "_id": "c/gone", "status": 404, "result": "not_found"}},
            {"index": {"_index": IDX_T, "_id": "c/1", "status": 201, "result": "created"}},
            {"index": {"_index": IDX_T, "_id": "c/2", "status": 429,
                       "error": {"type": "es_rejected_execution_exception", "reason": "queue full"}}},
        ]
        return 200, {"took": 1, "errors": True, "items": items}

    client, _ = recording_client(partial)
    idx = OpenSearchLexicalIndex(client)
    with caplog.at_level(logging.ERROR, logger="vibe.opensearch"), pytest.raises(OpenSearchBulkError) as info:
        idx.apply([doc("t", "c", "1", {"title": "secret words"}), doc("t", "c", "2", {"title": "secret words"})],
                  [DocKey("t", "c", "gone")])
    assert info.value.items == [("c/2", 429, "es_rejected_execution_exception")]
    assert [(r.__dict__["doc"], r.__dict__["status"]) for r in caplog.records] == [("c/2", 429)]
    assert "secret" not in caplog.text and "secret" not in str(info.value)


def test_large_batches_are_split_on_action_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(osl, "BULK_ACTIONS", 2)
    client, calls = recording_client()
    docs = [doc("t", "c", str(i), {"title": f"d{i}"}) for i in range(3)]
    OpenSearchLexicalIndex(client).apply(docs, [DocKey("t", "c", "x")])
    bulks = [c.body for c in calls if c.path == "/_bulk"]
    assert [[next(iter(line)) for line in b] for b in bulks] == [
        ["delete", "index", "tenant"], ["index", "tenant", "index", "tenant"]]


def test_bulk_requests_are_sized_by_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few documents with large ACLs or bodies must not make one bulk
    request over the size OpenSearch accepts; each request stays under BULK_MAX_BYTES (a
    single larger action goes alone) and the order of actions is kept."""
    monkeypatch.setattr(osl, "BULK_MAX_BYTES", 4_000)
    client, calls = recording_client()
    docs = [doc("t", "c", str(i), {"title": f"d{i}", "body": "x" * 1_500}) for i in range(6)]
    docs.append(doc("t", "c", "huge", {"body": "y" * 9_000}))
    OpenSearchLexicalIndex(client).apply(docs, [DocKey("t", "c", "gone")])
    bulks = [c.body for c in calls if c.path == "/_bulk"]
    assert len(bulks) > 2
    for b in bulks:
        size = osl.ndjson_size(b)
        assert size <= 4_000 or len([line for line in b if "index" in line or "delete" in line]) == 1
    sent = [line for b in bulks for line in b]
    assert sent == [line for g in osl.bulk_actions(docs, [DocKey("t", "c", "gone")], osl.INDEX_PREFIX) for line in g]


def test_ndjson_size_is_the_bytes_sent() -> None:
    client, calls = recording_client()
    OpenSearchLexicalIndex(client).apply([doc("t", "c", "é", {"title": "Ünï <b>", "body": "ß" * 10})], [])
    (bulk,) = [c for c in calls if c.path == "/_bulk"]
    sent = "".join(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n" for line in bulk.body)
    assert osl.ndjson_size(bulk.body) == len(sent.encode())


def test_acl_ignore_above_agrees_with_the_api_bound() -> None:
    """A principal longer than `ignore_above` is not indexed, so it can never match (fail
    closed); the API refuses principals that long, so no accepted ACL loses a token."""
    acl_mapping = osl.template_body()["template"]["mappings"]["properties"]["acl"]
    bound = Settings.model_fields["acl_max_principal_bytes"]
    most = max(m.le for m in bound.metadata if hasattr(m, "le") and m.le is not None)
    # ignore_above counts characters; a principal of N UTF-8 bytes has at most N characters.
    assert acl_mapping == {"type": "keyword", "ignore_above": osl.ACL_IGNORE_ABOVE}
    assert Settings().acl_max_principal_bytes <= most <= osl.ACL_IGNORE_ABOVE
    with pytest.raises(ValueError):
        Settings(acl_max_principal_bytes=osl.ACL_IGNORE_ABOVE + 1)
    # ... and a principal of ACL_IGNORE_ABOVE 4-byte characters stays under Lucene's term limit.
    assert osl.ACL_IGNORE_ABOVE * 4 < 32_766


def test_index_names_are_valid_and_collision_free() -> None:
    names = {index_name(t) for t in ("Acme", "acme", "a b", "a_b", "x" * 300, "Ünï/*?")}
    assert len(names) == 6
    for n in names:
        assert n == n.lower() and n.startswith("vibe-lex-") and len(n.encode()) < 255
        assert not set(n) & set(' "*\\<|,>/?#:')


def test_long_refs_get_a_hashed_id_within_the_limit() -> None:
    long_key = DocKey("t", "c", "é" * 256)
    assert len(osl.doc_id(long_key).encode()) <= 512 and osl.doc_id(long_key).startswith("~")
    assert osl.doc_id(DocKey("t", "c", "1")) == "c/1"


def test_from_settings_needs_a_url() -> None:
    with pytest.raises(RuntimeError, match="VIBE_OPENSEARCH_URL"):
        OpenSearchLexicalIndex.from_settings(Settings(lexical="opensearch", opensearch_url=None))
    idx = OpenSearchLexicalIndex.from_settings(Settings(opensearch_url="http://opensearch.invalid:9200"))
    assert isinstance(idx, OpenSearchLexicalIndex)
    idx.close()


def test_metadata_filters_and_id_allow_list_are_bool_filter_clauses() -> None:
    """Metadata conditions sit in `bool.filter` next to the ACL (selected before scoring,
    never a post_filter on a top-k): eq/in as `terms` on the facet tokens, a range as a keyword
    `range` over the fixed-width number tokens, the allow-list as an `ids` query."""
    client, calls = recording_client()
    where = (FieldCondition("lang", "eq", ("en",)), FieldCondition("tags", "in", ("wind", True, 2)),
             FieldCondition("year", "range", gte=2000, lt=2010.5))
    ids = (DocKey("t", "c", "1"), DocKey("t", "c", "2"), DocKey("other", "c", "3"))
    OpenSearchLexicalIndex(client).search(SearchFilter("t", ("c",), ("*",), where, ids), "rotor", 7)
    (call,) = calls
    assert call.body["query"]["bool"]["filter"] == [
        {"term": {"tenant": "t"}}, {"terms": {"acl": ["*"]}}, NO_CERTS, {"terms": {"collection": ["c"]}},
        {"terms": {"facet": ["lang\x1fs\x1fen"]}},
        {"terms": {"facet": ["tags\x1fs\x1fwind", "tags\x1fb\x1f1", "tags\x1fr0\x1fc000000000000000"]}},
        # 2000 = 0x409F400000000000 and the double just below 2010.5 (0x409F6A0000000000 - 1),
        # each with the sign bit flipped: the range is exact, an exclusive bound included
        {"range": {"facet": {"gte": "year\x1fr0\x1fc09f400000000000", "lte": "year\x1fr0\x1fc09f69ffffffffff"}}},
        {"ids": {"values": ["c/1", "c/2"]}},  # another tenant's key is never asked for
    ]
    assert "post_filter" not in _keys_anywhere(call.body)
    assert call.body["size"] == 7


def test_a_filter_nothing_can_meet_sends_nothing() -> None:
    client, calls = recording_client()
    idx = OpenSearchLexicalIndex(client)
    assert idx.search(SearchFilter("t", None, ("*",), ids=()), "rotor", 5) == []
    assert idx.search(SearchFilter("t", None, ("*",), ids=(DocKey("u", "c", "1"),)), "rotor", 5) == []
    assert idx.search(SearchFilter("t", None, ("*",), (FieldCondition("n", "range", gt=5, lt=5),)), "rotor", 5) == []
    assert idx.search(SearchFilter("t", None, ("*",), (FieldCondition("n", "in", ()),)), "rotor", 5) == []
    assert calls == []


def test_highlights_skip_documents_outside_the_metadata_filter() -> None:
    client, calls = recording_client()
    docs = [doc("t", "c", "1", {"title": "rotor", "lang": "en"}), doc("t", "c", "2", {"title": "rotor", "lang": "de"})]
    flt = SearchFilter("t", None, ("*",), (FieldCondition("lang", "eq", ("en",)),))
    OpenSearchLexicalIndex(client).highlights(flt, "rotor", docs)
    (call,) = calls
    filters = call.body["query"]["bool"]["filter"]
    assert {"terms": {"facet": ["lang\x1fs\x1fen"]}} in filters
    assert filters[-1] == {"ids": {"values": ["c/1"]}}


def test_schema_version_check_and_reset() -> None:
    """An older template (no `_meta.schema_version`) with tenant indices present is outdated; the reset
    deletes the prefix's indices and the template, then puts the current template at once."""
    mappings: dict[str, Any] = TEMPLATE["template"]["mappings"]  # type: ignore[index]
    old = {k: v for k, v in mappings.items() if k != "_meta"}

    def answer(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path == "/_index_template/vibe-lex-template":
            return 200, {"index_templates": [{"name": "vibe-lex-template",
                                              "index_template": {"template": {"mappings": old}}}]}
        if method == "GET" and path == "/vibe-lex-*":
            return 200, {IDX_T: {}}
        return default_responder(method, path, params, body)

    client, calls = recording_client(answer)
    idx = OpenSearchLexicalIndex(client)
    assert idx.schema_outdated()
    calls.clear()
    idx.reset_schema()
    assert [(c.method, c.path) for c in calls] == [
        ("DELETE", "/vibe-lex-*"), ("DELETE", "/_index_template/vibe-lex-template"),
        ("PUT", "/_index_template/vibe-lex-template")]
    assert calls[-1].body == TEMPLATE

    def current(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        if method == "GET" and path == "/_index_template/vibe-lex-template":
            return 200, {"index_templates": [{"name": "vibe-lex-template", "index_template": TEMPLATE}]}
        return default_responder(method, path, params, body)

    assert not OpenSearchLexicalIndex(recording_client(current)[0]).schema_outdated()


def test_both_profiles_analyse_alike() -> None:
    """The OpenSearch analyzer is built from the constants tantivy's is (shared/adapters/analysis.py),
    and tantivy's token stream on a fixed text is what that pipeline must give: possessives lose the
    `s`, hyphens split, digits stay, single letters, stop words and tokens over 39 UTF-16 units go
    (Lucene's `length` unit: "ж" * 39 stays, 78 bytes), İ lowercases to i, stems are Snowball English.
    Against a real server, the lexical contract compares `_analyze` with tantivy word by word."""
    text = ("The engine's cross-section at Mach 2.5, x-ray O'Brien's flows; " + "a" * 39 + " " + "b" * 40
            + " " + "ж" * 39 + " " + "ж" * 40 + " İSTANBUL")
    assert analysis.tantivy_analyzer().analyze(text) == [
        "engin", "cross", "section", "mach", "2", "5", "ray", "brien", "flow", "a" * 39, "ж" * 39, "istanbul"]
    os_an = osl.template_body()["template"]["settings"]["analysis"]
    assert os_an["tokenizer"]["vibe_tokens"]["pattern"] == analysis.TOKEN_PATTERN
    assert os_an["filter"]["vibe_stop"]["stopwords"] == list(analysis.STOPWORDS)
    assert os_an["analyzer"]["vibe_en"]["filter"] == ["vibe_long", "lowercase", "vibe_stop", "vibe_stem"]
    assert osl.SCHEMA_VERSION == tl.SCHEMA_VERSION  # both change together


def test_the_deployed_template_file_is_what_the_adapter_installs() -> None:
    """deploy/opensearch/vibe-lex-template.json (for operators: inspect it, or PUT it ahead of the
    first write) never drifts from the template the adapter puts itself."""
    path = Path(__file__).resolve().parents[2] / "deploy" / "opensearch" / "vibe-lex-template.json"
    assert json.loads(path.read_text()) == osl.template_body()


FR = analysis.LanguageMap.parse("en", {"docs_fr": "french"})
FR_STAMP = FR.stamp()


def test_a_french_collection_gets_its_analyzer_fields_and_stamp() -> None:
    """Languages, as sent: the template carries one analyzer per language in use (the
    tantivy pipeline with the French stop list and Snowball French), `title_fr`/`body_fr` copied
    to `all_fr`, and the map's stamp beside the schema version; a French document fills only
    those fields."""
    client, calls = recording_client()
    idx = OpenSearchLexicalIndex(client, languages=FR)
    idx.apply([doc("t", "docs_fr", "1", {"title": "Les chevaux", "body": "au galop"}),
               doc("t", "docs_en", "2", {"title": "Horses", "body": "galloping"})], [])
    template = calls[0].body["template"]
    fr_stop = list(analysis.LANGUAGES["fr"].stopwords)
    assert template["settings"]["analysis"] == {
        "tokenizer": {"vibe_tokens": {"type": "pattern", "pattern": analysis.TOKEN_PATTERN, "group": 0}},
        "filter": {
            "vibe_long": {"type": "length", "max": analysis.MAX_TOKEN_UNITS},
            "vibe_stop": {"type": "stop", "stopwords": list(analysis.STOPWORDS)},
            "vibe_stem": {"type": "snowball", "language": "English"},
            "vibe_stop_fr": {"type": "stop", "stopwords": fr_stop},
            "vibe_stem_fr": {"type": "snowball", "language": "French"},
        },
        "analyzer": {
            "vibe_en": {"type": "custom", "tokenizer": "vibe_tokens",
                        "filter": ["vibe_long", "lowercase", "vibe_stop", "vibe_stem"]},
            "vibe_fr": {"type": "custom", "tokenizer": "vibe_tokens",
                        "filter": ["vibe_long", "lowercase", "vibe_stop_fr", "vibe_stem_fr"]},
        },
    }
    assert {"les", "de", "l", "q"} <= set(fr_stop)
    mappings = template["mappings"]
    assert mappings["_meta"] == {"schema_version": osl.SCHEMA_VERSION, "languages": FR_STAMP}
    props = mappings["properties"]
    assert props["title_fr"] == {"type": "text", "analyzer": "vibe_fr", "copy_to": "all_fr"}
    assert props["body_fr"] == {"type": "text", "analyzer": "vibe_fr", "copy_to": "all_fr"}
    assert props["all_fr"] == {"type": "text", "analyzer": "vibe_fr", "index_options": "freqs"}
    assert props["title"] == {"type": "text", "analyzer": "vibe_en", "copy_to": "all"}
    bulk = calls[2].body
    fr_src, en_src = bulk[1], bulk[3]
    assert (fr_src["title_fr"], fr_src["body_fr"]) == ("Les chevaux", "au galop")
    assert not {"title", "body", "all"} & set(fr_src)
    assert (en_src["title"], en_src["body"]) == ("Horses", "galloping") and "title_fr" not in en_src


def test_a_simple_collection_has_no_stop_or_stem_filter() -> None:
    simple = analysis.LanguageMap.parse("en", {"parts": "simple"})
    template = osl.template_body(languages=simple)["template"]
    an = template["settings"]["analysis"]
    assert an["analyzer"]["vibe_simple"] == {"type": "custom", "tokenizer": "vibe_tokens",
                                             "filter": ["vibe_long", "lowercase"]}
    assert set(an["filter"]) == {"vibe_long", "vibe_stop", "vibe_stem"}  # English's only
    assert template["mappings"]["properties"]["all_simple"] == {
        "type": "text", "analyzer": "vibe_simple", "index_options": "freqs"}


def test_queries_and_highlights_ask_each_language_in_scope() -> None:
    only_fr = SearchFilter("t", ("docs_fr",), ("*",))
    both = SearchFilter("t", None, ("*",))
    assert osl.search_body(only_fr, "chevaux", 5, FR)["query"]["bool"]["should"] == [
        {"match": {"title_fr": {"query": "chevaux", "boost": 0.5}}},
        {"match": {"all_fr": {"query": "chevaux", "boost": 1.0}}},
    ]
    assert osl.search_body(both, "chevaux", 5, FR)["query"]["bool"]["should"] == [
        {"match": {"title": {"query": "chevaux", "boost": 0.5}}},
        {"match": {"all": {"query": "chevaux", "boost": 1.0}}},
        {"match": {"title_fr": {"query": "chevaux", "boost": 0.5}}},
        {"match": {"all_fr": {"query": "chevaux", "boost": 1.0}}},
    ]
    assert osl.search_body(both, "x", 5)["query"]["bool"]["should"] == [  # English only: as before
        {"match": {"title": {"query": "x", "boost": 0.5}}}, {"match": {"all": {"query": "x", "boost": 1.0}}}]
    hl = osl.highlight_body(both, "chevaux", ["docs_fr/1"], FR)["highlight"]["fields"]
    assert hl == {"title": {"number_of_fragments": 0}, "body": {"fragment_size": 150, "number_of_fragments": 1},
                  "title_fr": {"number_of_fragments": 0},
                  "body_fr": {"fragment_size": 150, "number_of_fragments": 1}}

    def answer(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        if path.endswith("/_search"):
            return 200, {"hits": {"hits": [{"_id": "docs_fr/1", "_score": 1.0,
                                            "fields": {"collection": ["docs_fr"], "doc_id": ["1"]},
                                            "highlight": {"title_fr": ["Les <b>chevaux</b>"]}}]}}
        return default_responder(method, path, params, body)

    idx = OpenSearchLexicalIndex(recording_client(answer)[0], languages=FR)
    d = doc("t", "docs_fr", "1", {"title": "Les chevaux"})
    assert idx.highlights(both, "chevaux", [d]) == {d.key: ["Les <b>chevaux</b>"]}


def test_a_changed_language_map_outdates_the_server_template() -> None:
    def server(meta: dict[str, Any]) -> Responder:
        def answer(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
            if method == "GET" and path == "/_index_template/vibe-lex-template":
                tpl = {"template": {"mappings": {"_meta": meta}}}
                return 200, {"index_templates": [{"name": "vibe-lex-template", "index_template": tpl}]}
            if method == "GET":
                return 200, {IDX_T: {}}
            return default_responder(method, path, params, body)
        return answer

    english = {"schema_version": osl.SCHEMA_VERSION}
    french = {"schema_version": osl.SCHEMA_VERSION, "languages": FR_STAMP}
    assert not OpenSearchLexicalIndex(recording_client(server(english))[0]).schema_outdated()
    assert OpenSearchLexicalIndex(recording_client(server(english))[0], languages=FR).schema_outdated()
    assert not OpenSearchLexicalIndex(recording_client(server(french))[0], languages=FR).schema_outdated()
    assert OpenSearchLexicalIndex(recording_client(server(french))[0]).schema_outdated()
    client, calls = recording_client(server(english))
    OpenSearchLexicalIndex(client, languages=FR).reset_schema()
    put = [c for c in calls if c.method == "PUT" and c.path == "/_index_template/vibe-lex-template"]
    assert put and put[-1].body["template"]["mappings"]["_meta"] == french


def test_from_settings_takes_the_language_map() -> None:
    s = Settings(opensearch_url="http://opensearch.invalid:9200", collection_languages={"docs_fr": "fr"})
    idx = OpenSearchLexicalIndex.from_settings(s)
    assert idx.languages.of("docs_fr") is analysis.LANGUAGES["fr"] and idx.languages.of("x") is analysis.ENGLISH
    idx.close()


def test_tantivy_text_keeps_the_length_in_characters() -> None:
    """What tantivy is given instead of the text: İ folded to I, tokens over the bound blanked,
    every character where it was (highlights are drawn on the original at the same offsets)."""
    text = "İzmir " + "x" * 40 + " ok, " + "𝐀" * 20 + " " + "𝐀" * 19 + " ç" + "ü" * 38
    seen = analysis.tantivy_text(text)
    assert len(seen) == len(text)
    assert seen == "Izmir " + " " * 40 + " ok, " + " " * 20 + " " + "𝐀" * 19 + " ç" + "ü" * 38
    assert analysis.tantivy_text("plain text") == "plain text"


def test_snippets_of_a_changed_text_render_as_tantivy_would() -> None:
    """A snippet drawn from `tantivy_text` and rendered on the original is tantivy's own HTML when
    nothing was changed (the same escaping and tags), and shows the document's İ when it was."""
    import tantivy

    schema_builder = tantivy.SchemaBuilder()
    schema_builder.add_text_field("all", stored=False, tokenizer_name="vibe_en")
    schema = schema_builder.build()
    index = tantivy.Index(schema)
    index.register_tokenizer("vibe_en", analysis.tantivy_analyzer().engine)
    writer = index.writer(15_000_000, 1)
    writer.add_document(tantivy.Document(all="rotor icing istanbul"))
    writer.commit()
    index.reload()
    query = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(schema, "all", t))
                                         for t in ("ice", "istanbul")])
    gen = tantivy.SnippetGenerator.create(index.searcher(), query, schema, "all")
    for text in ['a & <b> "x" it\'s icing', "padding words " * 20 + "icing & more " * 5, "nothing here"]:
        snippet = gen.snippet_from_doc(tantivy.Document(all=text))
        assert tl.render_snippet(snippet, text, text) == snippet.to_html()
    assert tl._snippet_html(gen, "all", "İSTANBUL & <icing>") == "<b>İSTANBUL</b> &amp; &lt;<b>icing</b>"


def test_dutch_stems_with_lucenes_kraaij_pohlmann() -> None:
    """Snowball 3.0 (tantivy) replaced Dutch with an algorithm close to Kraaij-Pohlmann; Lucene's
    Snowball Dutch is the old one (36% of tokens apart on real text, 0.5% with `Kp`)."""
    nl = analysis.opensearch_analysis([analysis.LANGUAGES["nl"], analysis.LANGUAGES["de"]])["filter"]
    assert nl["vibe_stem_nl"] == {"type": "snowball", "language": "Kp"}
    assert nl["vibe_stem_de"] == {"type": "snowball", "language": "German"}


def test_the_index_prefix_is_a_setting() -> None:
    """Deployments or test runs sharing a cluster keep apart by prefix (VIBE_OPENSEARCH_PREFIX)."""
    idx = OpenSearchLexicalIndex.from_settings(Settings(opensearch_url="http://opensearch.invalid:9200",
                                                        opensearch_prefix="vibe-x-"))
    assert idx.prefix == "vibe-x-" and OpenSearchLexicalIndex.from_settings(
        Settings(opensearch_url="http://opensearch.invalid:9200")).prefix == osl.INDEX_PREFIX
    for bad in ("Vibe-", "vibe", "vibe*-", "-vibe-"):
        with pytest.raises(ValueError):
            Settings(opensearch_prefix=bad)


def test_a_busy_or_unavailable_server_is_not_a_refusal() -> None:
    """Items refused for now (429 queue full, 503) and a server answering 503 raise IndexUnavailable,
    which the index follower retries whole instead of quarantining; a 400 item is a refusal."""
    from shared.errors import IndexUnavailable

    def items(status: int, kind: str) -> Responder:
        def answer(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
            if not path.endswith("/_bulk"):
                return default_responder(method, path, params, body)
            item = {"index": {"_id": "c/1", "status": status, "error": {"type": kind}}}
            return 200, {"errors": True, "items": [item]}
        return answer

    one = [doc("t", "c", "1", {"title": "x"})]
    with pytest.raises(IndexUnavailable) as busy:
        OpenSearchLexicalIndex(recording_client(items(429, "es_rejected_execution_exception"))[0]).apply(one, [])
    assert isinstance(busy.value, OpenSearchBulkError) and busy.value.items == [("c/1", 429,
                                                                                 "es_rejected_execution_exception")]
    with pytest.raises(OpenSearchBulkError) as refused:
        OpenSearchLexicalIndex(recording_client(items(400, "mapper_parsing_exception"))[0]).apply(one, [])
    assert not isinstance(refused.value, IndexUnavailable)

    def down(method: str, path: str, params: dict[str, Any], body: Any) -> tuple[int, dict[str, Any]]:
        return 503, {"error": {"type": "cluster_block_exception"}}

    with pytest.raises(IndexUnavailable):
        OpenSearchLexicalIndex(recording_client(down)[0]).apply(one, [])

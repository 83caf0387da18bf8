"""Documents: PUT, bulk, GET (optionally with `__semantic`), DELETE.

Who may change an existing document: a key with the `write` scope
may overwrite or delete a document only if it can read it under the document's CURRENT
ACL. A writer outside that ACL is refused and nothing changes:
- PUT (and each bulk item) answers 403 `forbidden` with one fixed message, whatever the
  document holds (content, ACL, semantic state, age). Any refusal of a PUT tells the caller
  that *something* exists at that id (an absent id would have been created); that one bit is
  the residual signal README "Security" documents. Nothing else about the document is told.
- DELETE answers 404 `not_found`, exactly as for an absent document (no signal at all).
A new id may be created by any writer, with any ACL (even one that leaves the writer out).

The check and the write run under a per-document lock of this process, so a concurrent ACL
change through this process cannot slip between them. (Across processes the store would
need a conditional write; see README "Security".)
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from services.api.auth import require
from services.api.bodies import json_body, parse_model
from services.api.render import semantic_projection
from services.api.schemas import COLLECTION_NAME, MgetAnswer, MgetIn, body, component, errors, ok
from services.api.writes import WriteResult, check_collection, check_doc_id
from services.container import Container
from services.core.edge_access import edge_visible, visible_edges
from services.core.overwrite import delete_checked, locked, put_checked
from services.core.overwrite import refused as overwrite_refused
from shared.errors import ErrorCode, VibeError, invalid
from shared.model import DocKey, Principal, StoredDoc
from shared.names import MAX_DOC_FIELDS

router = APIRouter()

# -- OpenAPI declarations (/openapi.json declares every request, response and
# error body). They describe what the handlers below already accept and answer; validation
# stays in the handlers, so declaring changes no behaviour.

_ERROR: dict[str, Any] = {"type": "object", "required": ["error"], "additionalProperties": False, "properties": {
    "error": {"type": "object", "required": ["code", "message"], "properties": {
        "code": {"type": "string"}, "message": {"type": "string"}, "details": {"type": "object"}}}}}


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return errors(*statuses)  # the shared error model, plus 429, 500 and 4XX (services/api/schemas.py)


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_NAME: dict[str, Any] = COLLECTION_NAME  # also refuses the reserved `mcp-task-` prefix
_DOC_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 256, "pattern": r"^[^\x00-\x1f]+$"}
_ACL: dict[str, Any] = {"type": ["array", "null"], "minItems": 1, "maxItems": 1000,
        "items": {"type": "string", "minLength": 1, "maxLength": 512},
        "description": "principals who may read (and so overwrite or delete); absent or null = every principal of "
                       "the tenant. At most 512 UTF-8 bytes each and 65,536 in all (VIBE_ACL_MAX_*)"}
_VIBE: dict[str, Any] = {"type": ["object", "null"], "properties": {"semantic": {"type": "object", "properties": {
    # null = no intent, as if absent (the policy and heuristics decide)
    "intent": {"enum": ["deny", "allow", None]}}}}}
_CERTS: dict[str, Any] = {"type": ["array", "null"], "maxItems": 32, "items": {
    "type": "string", "maxLength": 128, "pattern": r"^[A-Za-z0-9._~@+/=-]{1,64}:[A-Za-z0-9._~@+/=:-]{1,63}$"},
    "description": "certificates (\"issuer:name\") a reader must hold, every one of them, besides the ACL; "
                   "absent, null or empty = none"}
# shared/names.py: 1 to 64 characters without control characters, at most 1000 fields a document
_FIELD_NAME: dict[str, Any] = {"pattern": r"^(_acl|_vibe|_certs|[^_\x00-\x1f][^\x00-\x1f]{0,63})$"}
_DOC: dict[str, Any] = {"type": "object", "properties": {"_acl": _ACL, "_vibe": _VIBE, "_certs": _CERTS},
        "propertyNames": _FIELD_NAME,
        "maxProperties": MAX_DOC_FIELDS,
        "description": "the document's JSON fields (no other field may start with '_'; no string may hold "
                       "U+0000) plus optional `_acl`, `_vibe` and `_certs`"}
_BULK_DOC: dict[str, Any] = {**_DOC, "required": ["_id"], "properties": {"_id": _DOC_ID, "_acl": _ACL, "_vibe": _VIBE,
                                                                     "_certs": _CERTS},
             "propertyNames": {"pattern": r"^(_acl|_vibe|_certs|_id|[^_\x00-\x1f][^\x00-\x1f]{0,63})$"}}
_WRITTEN: dict[str, Any] = {"type": "object", "required": ["_id", "collection", "result"], "properties": {
    "_id": {"type": "string"}, "collection": {"type": "string"}, "result": {"enum": ["created", "updated"]}}}
_DELETED: dict[str, Any] = {**_WRITTEN, "properties": {**_WRITTEN["properties"], "result": {"const": "deleted"}}}
_ITEM: dict[str, Any] = component("BulkItem", {"type": "object", "required": ["_id", "status"], "properties": {
    "_id": {"type": "string"}, "status": {"type": "integer"}, "result": {"enum": ["created", "updated"]},
    "error": _ERROR["properties"]["error"]}, "description": "one bulk document's outcome, in the order sent"})
_BULK_OUT: dict[str, Any] = {"type": "object", "required": ["errors", "accepted", "rejected", "results"],
                             "properties": {
    "errors": {"type": "boolean"}, "accepted": {"type": "integer"}, "rejected": {"type": "integer"},
    "results": {"type": "array", "items": _ITEM}}}
_GOT: dict[str, Any] = {"type": "object", "required": ["_id"], "properties": {
    "_id": {"type": "string"}, "_vibe": {"type": "object"},
    "__semantic": {"type": "object", "required": ["status", "lastEmbeddedAt", "space"], "properties": {
        "status": {"type": "string"}, "lastEmbeddedAt": {"type": ["string", "null"]},
        "space": {"type": "string"}, "reason": {"type": "string"}}}}}


WRITTEN = component("Written", _WRITTEN)


def _body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


COLLECTION = Path(json_schema_extra=_NAME)
DOC_ID = Path(json_schema_extra=_DOC_ID)



def _guard(body: Any) -> None:
    """Refuse, as invalid, what DocumentService.parse does not expect (a non-string intent
    raised TypeError there: a 500 found by schema fuzzing, tests/security/test_schema_fuzz.py)."""
    vibe = body.get("_vibe") if isinstance(body, dict) else None
    sem = vibe.get("semantic") if isinstance(vibe, dict) else None
    intent = sem.get("intent") if isinstance(sem, dict) else None
    if intent is not None and not isinstance(intent, str):
        raise invalid("_vibe.semantic.intent must be 'deny' or 'allow'", field="_vibe.semantic.intent")


def _put_one(c: Container, p: Principal, doc: StoredDoc) -> str:
    [result] = put_checked(c.store, c.docs, p, [doc])
    return result


def _c(request: Request) -> Container:
    return request.app.state.container  # type: ignore[no-any-return]


@router.put("/v1/collections/{collection}/docs/{doc_id:path}", openapi_extra=_body(_DOC), responses={
    200: _json(WRITTEN, "replaced an existing document"), 201: _json(WRITTEN, "created"),
    **_errors(400, 401, 403, 413)})
async def put_doc(request: Request, collection: str = COLLECTION, doc_id: str = DOC_ID,
                  p: Principal = Depends(require("write"))) -> JSONResponse:
    c = _c(request)
    check_collection(collection)
    check_doc_id(doc_id)
    body = await json_body(request, c.settings.max_doc_bytes * 2)
    if isinstance(body, dict) and "_id" in body and body["_id"] != doc_id:
        raise invalid("_id in the body differs from the id in the path", field="_id")
    _guard(body)
    doc = c.docs.parse(p, collection, doc_id, body)
    result = await run_in_threadpool(_put_one, c, p, doc)
    return JSONResponse({"_id": doc_id, "collection": collection, "result": result},
                        status_code=201 if result == "created" else 200)


@router.post("/v1/collections/{collection}/docs:bulk", responses={
    200: _json(component("BulkAnswer", _BULK_OUT), "per-document results"), **_errors(400, 401, 403, 413)},
    openapi_extra=_body(
    {"type": "object", "required": ["docs"], "properties": {"docs": {"type": "array", "items": {"anyOf": [
        _BULK_DOC, {"description": "any other item gets its own error result; the others go ahead"}]}}}}))
async def bulk(request: Request, collection: str = COLLECTION,
               p: Principal = Depends(require("write"))) -> JSONResponse:
    c = _c(request)
    check_collection(collection)
    body = await json_body(request, c.settings.max_bulk_bytes)
    items = body.get("docs") if isinstance(body, dict) else None
    if not isinstance(items, list):
        raise invalid("bulk body must be {\"docs\": [...]}", field="docs")
    if len(items) > c.settings.max_bulk_docs:
        raise VibeError(ErrorCode.PAYLOAD_TOO_LARGE, f"at most {c.settings.max_bulk_docs} documents per bulk")
    results = await run_in_threadpool(_bulk, c, p, collection, items)
    failed = sum(1 for r in results if r.error)
    return JSONResponse({"errors": failed > 0, "accepted": len(results) - failed, "rejected": failed,
                         "results": [r.body() for r in results]})


def _bulk(c: Container, p: Principal, collection: str, items: list[Any]) -> list[WriteResult]:
    """Validate each document on its own; store every valid one the caller may write, in
    chunks (`DocumentService.put`). Items apply as if sent one by one: the last accepted write of an
    id wins, and an item is checked against the ACL the id has after the items before it."""
    results: list[WriteResult] = []
    parsed: list[tuple[WriteResult, StoredDoc]] = []
    for i, item in enumerate(items):
        raw_id = item.get("_id") if isinstance(item, dict) else None
        try:
            doc_id = check_doc_id(raw_id)
            _guard(item)
            doc = c.docs.parse(p, collection, doc_id, item)
        except VibeError as e:
            results.append(WriteResult(str(raw_id) if raw_id is not None else f"#{i}", e.code.status,
                                       error={"code": e.code.code, "message": e.message}))
            continue
        r = WriteResult(doc_id, 0)
        results.append(r)
        parsed.append((r, doc))
    if not parsed:
        return results
    keys = list(dict.fromkeys(d.key for _, d in parsed))
    with locked(keys):
        stored = c.store.get_docs(keys)
        current: dict[DocKey, StoredDoc] = dict(stored)
        final: dict[DocKey, StoredDoc] = {}
        accepted: list[tuple[WriteResult, StoredDoc, bool]] = []  # (result, doc, first accepted for its id)
        for r, doc in parsed:
            cur = current.get(doc.key)
            if cur is not None and not cur.readable_by(p):
                refused = overwrite_refused()
                r.status, r.error = refused.code.status, {"code": refused.code.code, "message": refused.message}
                continue
            accepted.append((r, doc, doc.key not in final))
            current[doc.key] = final[doc.key] = doc
        over = c.docs.fanout.refused(list(final.values())) if c.docs.fanout is not None else {}
        if over:  # an edge past a node's bound gets its own error; the others go ahead
            for r, doc, _ in accepted:
                if (why := over.get(doc.key)) is not None:
                    r.status, r.error = why.code.status, {"code": why.code.code, "message": why.message}
            accepted = [(r, doc, first) for r, doc, first in accepted if doc.key not in over]
            final = {k: d for k, d in final.items() if k not in over}
        docs = list(final.values())
        # in transactions of VIBE_BULK_WRITE_CHUNK documents (DocumentService.put)
        outcome = dict(zip(final, c.docs.put(docs, chunk=c.settings.bulk_write_chunk, fanout_checked=True),
                           strict=True))
    for r, doc, first in accepted:
        r.result = outcome[doc.key] if first else "updated"
        r.status = 201 if r.result == "created" else 200
    return results


def _readable(c: Container, p: Principal, collection: str, doc_id: str) -> Any:
    doc = c.store.get_doc(DocKey(p.tenant, collection, doc_id))
    if doc is None or not edge_visible(c.store, p, doc):  # a forbidden document (or edge end) looks absent
        raise VibeError(ErrorCode.NOT_FOUND, "document not found")
    return doc


def _delete_one(c: Container, p: Principal, collection: str, doc_id: str) -> None:
    """Unreadable looks absent: 404 either way, and nothing changes."""
    if not delete_checked(c.store, c.docs, p, DocKey(p.tenant, collection, doc_id)):
        raise VibeError(ErrorCode.NOT_FOUND, "document not found")


@router.get("/v1/collections/{collection}/docs/{doc_id:path}", responses={
    200: _json(component("StoredDocument", _GOT), "the document's fields, `_id`, `_vibe` if set, `__semantic` "
                                                 "if asked"),
    **_errors(400, 401, 403, 404)})
async def get_doc(request: Request, collection: str = COLLECTION, doc_id: str = DOC_ID, include: str | None = None,
                  p: Principal = Depends(require("read"))) -> JSONResponse:
    c = _c(request)
    doc = await run_in_threadpool(_readable, c, p, collection, doc_id)
    out: dict[str, Any] = {"_id": doc_id, **doc.fields}
    if doc.vibe:
        out["_vibe"] = doc.vibe
    if include and "semantic" in include.split(","):
        space = await run_in_threadpool(c.spaces.active, doc.key.tenant)
        side = await run_in_threadpool(c.store.sidecar, doc.key, space)
        out["__semantic"] = semantic_projection(side, space)
    return JSONResponse(out)


def _mget(c: Container, p: Principal, collection: str, ids: list[str]) -> list[dict[str, Any]]:
    """One store read for every id. A document the caller may not read is answered exactly like
    a missing one: same shape, same `found: false`."""
    keys = [DocKey(p.tenant, collection, i) for i in ids]
    docs = c.store.get_docs(list(dict.fromkeys(keys)))
    seen = visible_edges(c.store, p, docs.values())  # an edge also needs both its ends readable
    out: list[dict[str, Any]] = []
    for k in keys:
        doc = docs.get(k)
        if doc is None or k not in seen:
            out.append({"_id": k.doc_id, "found": False, "_found": False})
            continue
        item: dict[str, Any] = {"_id": k.doc_id, **doc.fields, "_found": True}
        if doc.vibe:
            item["_vibe"] = doc.vibe
        out.append(item)
    return out


@router.post("/v1/collections/{collection}/docs:mget", openapi_extra=body(MgetIn), responses={
    **ok(MgetAnswer, "each id in the order asked: the document, or `found: false`"), **_errors(400, 401, 403, 413)})
async def mget(request: Request, collection: str = COLLECTION,
               p: Principal = Depends(require("read"))) -> JSONResponse:
    """Several documents by id in one request (the page behind a result list)."""
    c = _c(request)
    check_collection(collection)
    raw = await json_body(request, 65_536)
    parsed: MgetIn = parse_model(MgetIn, raw)
    if len(parsed.ids) > c.settings.max_mget_ids:
        raise invalid(f"ids takes at most {c.settings.max_mget_ids} ids", field="ids")
    for doc_id in parsed.ids:
        check_doc_id(doc_id)
    return JSONResponse({"docs": await run_in_threadpool(_mget, c, p, collection, list(parsed.ids))})


@router.delete("/v1/collections/{collection}/docs/{doc_id:path}", responses={
    200: _json(component("Deleted", _DELETED), "deleted"), **_errors(400, 401, 403, 404)})
async def delete_doc(request: Request, collection: str = COLLECTION, doc_id: str = DOC_ID,
                     p: Principal = Depends(require("write"))) -> JSONResponse:
    check_collection(collection)  # a reserved name holds no document to delete: refused as a write to it
    c = _c(request)
    await run_in_threadpool(_delete_one, c, p, collection, doc_id)
    return JSONResponse({"_id": doc_id, "collection": collection, "result": "deleted"})

"""Documents (DESIGN.md §5): PUT, bulk, GET (optionally with `__semantic`), DELETE."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from services.api.auth import require
from services.api.bodies import json_body
from services.api.writes import WriteResult, check_collection, check_doc_id
from services.planner.planner import semantic_projection
from shared.errors import ErrorCode, VibeError, invalid
from shared.model import DocKey, Principal, StoredDoc
from services.wiring import Container

router = APIRouter()


def _c(request: Request) -> Container:
    return request.app.state.container  # type: ignore[no-any-return]


@router.put("/v1/collections/{collection}/docs/{doc_id}")
async def put_doc(collection: str, doc_id: str, request: Request,
                  p: Principal = Depends(require("write"))) -> JSONResponse:
    c = _c(request)
    check_collection(collection)
    check_doc_id(doc_id)
    body = await json_body(request, c.settings.max_doc_bytes * 2)
    if isinstance(body, dict) and "_id" in body and body["_id"] != doc_id:
        raise invalid("_id in the body differs from the id in the path", field="_id")
    doc = c.docs.parse(p, collection, doc_id, body)
    [result] = await run_in_threadpool(c.docs.put, [doc])
    return JSONResponse({"_id": doc_id, "collection": collection, "result": result},
                        status_code=201 if result == "created" else 200)


@router.post("/v1/collections/{collection}/docs:bulk")
async def bulk(collection: str, request: Request, p: Principal = Depends(require("write"))) -> JSONResponse:
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
    """Validate each document on its own; store every valid one in one transaction."""
    results: list[WriteResult] = []
    good: list[StoredDoc | None] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        raw_id = item.get("_id") if isinstance(item, dict) else None
        try:
            doc_id = check_doc_id(raw_id)
            doc = c.docs.parse(p, collection, doc_id, item)
        except VibeError as e:
            results.append(WriteResult(str(raw_id) if raw_id is not None else f"#{i}", e.code.status,
                                       error={"code": e.code.code, "message": e.message}))
            continue
        if doc_id in seen:  # last write wins within one bulk, as if sent one by one
            good[seen[doc_id]] = None
        seen[doc_id] = len(good)
        good.append(doc)
        results.append(WriteResult(doc_id, 0))
    docs = [d for d in good if d is not None]
    outcome = dict(zip([d.key.doc_id for d in docs], c.docs.put(docs), strict=True)) if docs else {}
    for r in results:
        if r.error is None:
            r.result = outcome[r.id]
            r.status = 201 if r.result == "created" else 200
    return results


def _readable(c: Container, p: Principal, collection: str, doc_id: str) -> Any:
    doc = c.store.get_doc(DocKey(p.tenant, collection, doc_id))
    if doc is None or not doc.readable_by(p):  # a forbidden document looks absent
        raise VibeError(ErrorCode.NOT_FOUND, "document not found")
    return doc


@router.get("/v1/collections/{collection}/docs/{doc_id}")
async def get_doc(collection: str, doc_id: str, request: Request, include: str | None = None,
                  p: Principal = Depends(require("read"))) -> JSONResponse:
    c = _c(request)
    doc = await run_in_threadpool(_readable, c, p, collection, doc_id)
    out: dict[str, Any] = {"_id": doc_id, **doc.fields}
    if doc.vibe:
        out["_vibe"] = doc.vibe
    if include and "semantic" in include.split(","):
        side = await run_in_threadpool(c.store.sidecar, doc.key, c.settings.space)
        out["__semantic"] = semantic_projection(side, c.settings.space)
    return JSONResponse(out)


@router.delete("/v1/collections/{collection}/docs/{doc_id}")
async def delete_doc(collection: str, doc_id: str, request: Request,
                     p: Principal = Depends(require("write"))) -> JSONResponse:
    c = _c(request)
    doc = await run_in_threadpool(_readable, c, p, collection, doc_id)
    await run_in_threadpool(c.docs.delete, doc.key)
    return JSONResponse({"_id": doc_id, "collection": collection, "result": "deleted"})

"""Collections (docs/collections.md): list, delete, delete by filter, settings.

- `GET /v1/collections` (any key): the tenant's collections with their settings. Counts of
  documents are for admin keys only: a reader learns no count of documents it may not read.
  The names themselves are the tenant's own metadata, shown to every key of the tenant;
  reserved collections (`mcp-task-*`) are never listed.
- `DELETE /v1/collections/{collection}` (admin): removes the collection by pages
  (services/core/collections.py). 200 `state: deleted` when it is gone before the answer; 202
  `state: deleting` with the progress otherwise (repeat the DELETE to see it, or to resume).
- `POST /v1/collections/{collection}/docs:deleteByFilter` (write): the documents the caller may
  read and the filter matches, a bounded number per call; `more` and `after` say how to go on.
- `GET|PUT /v1/collections/{collection}/settings` (admin).
"""

from __future__ import annotations

import threading
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from services.api.auth import require
from services.api.backfills import _start_backfill
from services.api.bodies import json_body, optional_object
from services.api.routes_docs import COLLECTION
from services.api.schemas import AUTHENTICATED, FILTER, _as, body, errors, ok
from services.api.writes import check_collection
from services.container import Container
from services.core.collections import CollectionDeleter, Deletion, delete_matching
from services.core.overwrite import locked
from services.core.reserved import is_reserved_collection
from shared.collection_settings import CollectionSettings
from shared.errors import ErrorCode, VibeError, invalid
from shared.filters import FilterError, parse_filter
from shared.model import DocKey, Principal
from shared.names import MAX_FIELD_CHARS, MAX_SETTINGS_FIELDS, check_collection_name, check_field_list
from shared.text.languages import LANGUAGES, language

router = APIRouter(dependencies=AUTHENTICATED)
MAX_LIST = 1000
_DELETERS: dict[int, CollectionDeleter] = {}
_DELETERS_LOCK = threading.Lock()


async def named_collection(request: Request) -> None:
    """Every route with `{collection}` in its path: the name rule before anything reads it."""
    name = request.path_params.get("collection")
    if name is not None:
        check_collection_name(name)


NAMED = [Depends(named_collection)]


def _c(request: Request) -> Container:
    return request.app.state.container  # type: ignore[no-any-return]


# -- declarations -------------------------------------------------------------------------------


class CollectionItem(BaseModel):
    model_config = ConfigDict(title="CollectionItem", extra="allow")
    name: str
    documents: int | None = Field(default=None, description="documents in the collection (admin keys only)")
    language: str = Field(description="the lexical analysis language (ISO code, or `simple`)")
    eager: bool = Field(description="embedded on write (promoted); see /semantic/promote")
    embedFields: list[str] | None = Field(description="the fields whose text is embedded (null: every field)")
    filterableFields: list[str] | None = Field(description="fields with vector payload indexes (null: default)")
    rerank: bool = Field(default=False, description=(
        "its reads rerank (with the `default` reranker) unless a read says `rerank` itself"))


class CollectionList(BaseModel):
    model_config = ConfigDict(title="CollectionList")
    collections: list[CollectionItem]
    next: str | None = Field(description="pass as `after` for the next page (null: this was the last)")


class CollectionDeleted(BaseModel):
    model_config = ConfigDict(title="CollectionDeleted")
    collection: str
    state: Literal["deleted", "deleting"]
    deleted: int = Field(description="documents removed by this process's deletion so far")
    remaining: int = Field(description="documents of the collection still stored")


# shared/names.py's field rule, `_` reserved: what `embedFields` and `filterableFields` name
_FIELD = Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS, pattern="^[^_\x00-\x1f][^\x00-\x1f]*$")]
_FIELDS = Annotated[list[_FIELD], Field(max_length=MAX_SETTINGS_FIELDS)]
_LANGUAGE_NAMES = sorted({n for code, lang in LANGUAGES.items() for n in (code, lang.name)})


class DeleteByFilterIn(BaseModel):
    model_config = ConfigDict(title="DeleteByFilterRequest", extra="forbid")
    filter: dict[str, Any] | None = Field(json_schema_extra=_as(FILTER))
    # The JSON-safe integer bound: a body's larger integers reach the handler as floats (orjson),
    # which no integer field accepts, so the schema declares where integers end.
    limit: int | None = Field(default=None, ge=1, le=2**53 - 1, description=(
        "documents to delete at most (default and bound: VIBE_DELETE_BY_FILTER_MAX; larger values mean it)"))
    after: str | None = Field(default=None, max_length=256, description="the `after` of the previous answer")


class DeletedByFilter(BaseModel):
    model_config = ConfigDict(title="DeletedByFilter")
    collection: str
    deleted: int
    examined: int = Field(description="documents looked at by this call")
    more: bool = Field(description="true: call again with `after` to go on")
    after: str | None = Field(description="where the next call goes on")


class CollectionSettingsIn(BaseModel):
    model_config = ConfigDict(title="CollectionSettingsRequest", extra="forbid")
    language: Literal[tuple(_LANGUAGE_NAMES)] | None = Field(  # type: ignore[valid-type]
        default=None, description="null: the deployment's default for it; 409 when this deployment's keyword "
                                  "indexes do not analyse it, or when the collection has documents")
    embedFields: _FIELDS | None = Field(default=None, description="null: VIBE_EMBED_FIELDS or every field")
    filterableFields: _FIELDS | None = Field(default=None, description="null: the vector index's default")
    eager: bool | None = Field(default=None, description="the promotion state (as /semantic/promote)")
    rerank: bool | None = Field(default=None, description=(
        "true: a read of this collection that does not say `rerank` is reranked by the `default` reranker "
        "(VIBE_RERANK_URL; 400 when none is configured); a read's own `rerank: false` wins. null/false: off"))


class CollectionSettingsOut(BaseModel):
    model_config = ConfigDict(title="CollectionSettingsAnswer")
    collection: str
    language: str
    embedFields: list[str] | None
    filterableFields: list[str] | None
    eager: bool
    rerank: bool = Field(default=False, description=(
        "its reads rerank (with the `default` reranker) unless a read says `rerank` itself"))
    updatedAt: float | None = Field(description="when the stored settings last changed (null: never set)")


# -- helpers ---------------------------------------------------------------------------------------


def _eager(c: Container, tenant: str) -> set[str]:
    return {m.collection for m in c.store.collection_modes(tenant) if m.mode == "eager"}


def _describe(c: Container, tenant: str, name: str, eager: set[str]) -> dict[str, Any]:
    d = c.collection_directory()
    row = d.row(tenant, name)
    return {"language": d.language(tenant, name), "eager": name in eager,
            "embedFields": d.embed_fields(tenant, name),
            "filterableFields": None if row is None or row.filterable_fields is None else list(row.filterable_fields),
            "rerank": d.rerank(tenant, name)}


def _list(c: Container, p: Principal, after: str, limit: int) -> dict[str, Any]:
    names = [n for n in c.store.collection_names(p.tenant, after, limit + 1) if not is_reserved_collection(n)]
    page, more = names[:limit], len(names) > limit
    eager = _eager(c, p.tenant)
    items = []
    for n in page:
        item: dict[str, Any] = {"name": n, **_describe(c, p.tenant, n, eager)}
        if p.may("admin"):
            item["documents"] = c.store.collection_doc_count(p.tenant, n)
        items.append(item)
    return {"collections": items, "next": page[-1] if more and page else None}


def _deleter(c: Container) -> CollectionDeleter:
    with _DELETERS_LOCK:
        d = _DELETERS.get(id(c))
        if d is None or d.store is not c.store:
            wait = c.settings.write_sync_wait_seconds
            d = CollectionDeleter(c.store, c.handler.cold, lambda: c.follower.catch_up(wait=wait),
                                  c.settings.collection_delete_page)
            _DELETERS[id(c)] = d
        return d


def _deletion_body(c: Container, job: Deletion) -> dict[str, Any]:
    remaining = 0 if job.done else c.store.collection_doc_count(job.tenant, job.collection)
    return {"collection": job.collection, "state": "deleted" if job.done else "deleting",
            "deleted": job.deleted, "remaining": remaining}


# -- routes ------------------------------------------------------------------------------------------


@router.get("/v1/collections", responses={**ok(CollectionList, "the tenant's collections"), **errors(400)})
async def list_collections(request: Request, after: str = Query("", max_length=128, description="a name: "
                                                                "the page after it"),
                           limit: int = Query(MAX_LIST, ge=1, le=MAX_LIST),
                           p: Principal = Depends(require(None))) -> JSONResponse:
    c = _c(request)
    return JSONResponse(await run_in_threadpool(_list, c, p, after, limit))


@router.delete("/v1/collections/{collection}", dependencies=NAMED, responses={
    **ok(CollectionDeleted, "the collection is gone"), **ok(CollectionDeleted, "deleting: progress so far", 202),
    **errors(400)})
async def delete_collection(request: Request, collection: str = COLLECTION,
                            p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    check_collection(collection)
    job = await run_in_threadpool(_deleter(c).delete, p.tenant, collection)
    out = await run_in_threadpool(_deletion_body, c, job)
    c.collection_directory().forget(p.tenant)
    return JSONResponse(out, status_code=200 if job.done else 202)


def _delete_keys(c: Container, keys: list[DocKey], still: Any) -> int:
    """Each key under this process's document locks (as a single DELETE), re-checked there: a
    concurrent write that made it unreadable to the caller keeps it."""
    gone = 0
    with locked(keys):
        for k in keys:
            if still(k) and c.store.delete_doc(k):
                gone += 1
    c.follower.catch_up(wait=c.settings.write_sync_wait_seconds)
    return gone


@router.post("/v1/collections/{collection}/docs:deleteByFilter", dependencies=NAMED,
             openapi_extra=body(DeleteByFilterIn),
             responses={**ok(DeletedByFilter, "the matching readable documents deleted (a bounded page)"),
                        **errors(400, 413)})
async def delete_by_filter(request: Request, collection: str = COLLECTION,
                           p: Principal = Depends(require("write"))) -> JSONResponse:
    c = _c(request)
    check_collection(collection)
    raw = await json_body(request, 65_536)
    try:
        parsed = DeleteByFilterIn.model_validate(raw)
    except Exception as e:  # noqa: BLE001 - pydantic's message, as a 400
        raise invalid(str(e).splitlines()[0] if str(e) else "invalid body") from None
    try:
        where = parse_filter(parsed.filter or {})
    except FilterError as e:
        raise invalid(str(e), field="filter") from None
    cap = c.settings.delete_by_filter_max
    limit = min(parsed.limit or cap, cap)
    res = await run_in_threadpool(delete_matching, c.store, p, collection, (*where, *p.filter), parsed.after,
                                  limit, limit * 10, lambda keys, still: _delete_keys(c, list(keys), still))
    return JSONResponse({"collection": collection, "deleted": res.deleted, "examined": res.examined,
                         "more": res.after is not None, "after": res.after})


def _settings_body(c: Container, tenant: str, collection: str) -> dict[str, Any]:
    row = c.collection_directory().row(tenant, collection)
    return {"collection": collection, **_describe(c, tenant, collection, _eager(c, tenant)),
            "updatedAt": row.updated_at if row is not None else None}


@router.get("/v1/collections/{collection}/settings", dependencies=NAMED, responses={
    **ok(CollectionSettingsOut, "the collection's settings as every process applies them"), **errors(400)})
async def get_settings(request: Request, collection: str = COLLECTION,
                       p: Principal = Depends(require("admin"))) -> JSONResponse:
    c = _c(request)
    check_collection(collection)
    return JSONResponse(await run_in_threadpool(_settings_body, c, p.tenant, collection))


def _language(c: Container, tenant: str, collection: str, raw: object) -> str | None:
    """A stored language: one the lexical indexes analyse already, changed only while the
    collection holds no documents (its entries would stay in the old language's index)."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise invalid("language must be a string", field="language")
    try:
        code = language(raw).code
    except ValueError as e:
        raise invalid(str(e), field="language") from None
    known = [lang.code for lang in c.settings.language_map().languages()]
    if code not in known:  # a language, but this deployment's indexes have no analyzer for it
        raise VibeError(ErrorCode.CONFLICT, f"language {code!r} is not analysed by this deployment's keyword "
                        f"indexes; one of: {', '.join(known)} (add it to VIBE_COLLECTION_LANGUAGES first)",
                        {"field": "language"})
    if code != c.collection_directory().language(tenant, collection) and c.store.collection_doc_count(tenant,
                                                                                                     collection):
        raise VibeError(ErrorCode.CONFLICT, "the collection has documents: its language changes only while it is "
                        "empty (delete the collection, set the language, write again)", {"field": "language"})
    return code


def _rerank_default(c: Container, raw: object) -> bool | None:
    """A collection's rerank default: on only where a read could honour it (a reranker configured)."""
    if raw is not None and not isinstance(raw, bool):
        raise invalid("rerank must be true, false or null", field="rerank")
    if raw and c.planner.reranker is None:
        raise invalid("rerank needs a reranker: set VIBE_RERANK_URL (none is configured)", field="rerank")
    return raw


def _put_settings(c: Container, p: Principal, collection: str, raw: dict[str, Any]) -> dict[str, Any]:
    d = c.collection_directory()
    d.forget(p.tenant)
    old = d.row(p.tenant, collection) or CollectionSettings(p.tenant, collection)
    lang = _language(c, p.tenant, collection, raw["language"]) if "language" in raw else old.language
    fields = {k: (None if raw[k] is None else tuple(check_field_list(raw[k], k)))
              for k in ("embedFields", "filterableFields") if k in raw}
    eager = raw.get("eager")
    if eager is not None and not isinstance(eager, bool):
        raise invalid("eager must be true or false", field="eager")
    rerank = _rerank_default(c, raw["rerank"]) if "rerank" in raw else old.rerank
    if {"language", "embedFields", "filterableFields", "rerank"} & set(raw):
        c.store.put_collection_settings(CollectionSettings(
            p.tenant, collection, lang, fields.get("embedFields", old.embed_fields),
            fields.get("filterableFields", old.filterable_fields), c.store.clock(), rerank))
    if eager is not None and eager != (collection in _eager(c, p.tenant)):
        c.lifecycle.set_mode(p.tenant, collection, eager)
        if eager:
            _start_backfill(c, p.tenant, collection, "promote", False)
    d.forget(p.tenant)
    return _settings_body(c, p.tenant, collection)


@router.put("/v1/collections/{collection}/settings", dependencies=NAMED,
            openapi_extra=body(CollectionSettingsIn, required=False),
            responses={**ok(CollectionSettingsOut, "the settings now stored"), **errors(400, 409, 413)})
async def put_settings(request: Request, collection: str = COLLECTION,
                       p: Principal = Depends(require("admin"))) -> JSONResponse:
    """Only the keys sent change; `null` returns a setting to the deployment's default."""
    c = _c(request)
    check_collection(collection)
    raw = await optional_object(request, CollectionSettingsIn)
    return JSONResponse(await run_in_threadpool(_put_settings, c, p, collection, raw))

/** Request and answer types, taken from the generated `schema.ts` (openapi-typescript over the
 * committed `openapi.json`, the app's `/openapi.json`): regenerate with `npm run snapshot && npm
 * run gen`, never edit by hand. Where the API declares no body schema, a loose fallback. */

import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

/** `T`, or `F` where the document declares nothing (`unknown`/`never`). */
type Or<T, F> = [T] extends [never] ? F : unknown extends T ? F : T;

type Op<P extends keyof paths, M extends "get" | "put" | "post" | "delete"> = NonNullable<paths[P][M]>;

type JsonBody<R> = R extends { content: { "application/json": infer T } } ? T : never;

/** The JSON answer of a route's 2xx statuses. */
type Ok<P extends keyof paths, M extends "get" | "put" | "post" | "delete"> =
  Op<P, M> extends { responses: infer Rs }
    ? JsonBody<Rs[Extract<keyof Rs, 200 | 201 | 202 | "200" | "201" | "202">]>
    : never;

/** The JSON request body of a route. */
type In<P extends keyof paths, M extends "get" | "put" | "post" | "delete"> =
  Op<P, M> extends { requestBody?: infer B } ? JsonBody<NonNullable<B>> : never;

/** `POST /v1/read`'s body: `{collection, q, semantic: {strategy, query, k}, limit, include, ...}`. */
export type ReadBody = In<"/v1/read", "post">;
export type Strategy = "auto" | "keyword" | "semantic" | "hybrid";
/** One answer with what is ready now (`Accept: application/json`), and each ranking event's data. */
export type ReadAnswer = Schemas["ReadAnswer"];
export type Hit = Schemas["Hit"];
export type Warming = Schemas["Warming"];
export type ErrorDetail = Schemas["ErrorDetail"];
/** `explain`: why a hit is where it is. Written out here (it mirrors the OpenAPI schemas
 * `Explanation`, `LegContribution` and the four reasons) so that `reasons` is a union narrowed by
 * `type`, which the generated types do not give for a discriminated list. */
export type Explanation = {
  id: string;
  collection: string;
  strategy: "keyword" | "semantic" | "hybrid";
  /** the ranking's own score: the contributions' sum */
  score: number;
  /** the hybrid fusion used; "none" for one leg */
  fusion: "zscore" | "rrf" | "none";
  /** `score` as the answer showed it, in (0, 1] */
  shownScore: number;
  /** each leg's weight in the fusion */
  weights: Record<string, number>;
  contributions: LegContribution[];
  reasons: ExplainReason[];
  /** Unix time (seconds) after which the id answers 404 */
  expiresAt: number;
};
/** What one leg put into the score: `contribution` = `weight` x `normalised` (its z-score,
 * 1/(k + rank) for RRF, or the raw score alone). `standIn`: no vector yet, the semantic share is
 * estimated from the keyword one. */
export type LegContribution = {
  leg: "keyword" | "semantic";
  rank: number | null;
  raw: number | null;
  normalised: number;
  weight: number;
  contribution: number;
  standIn?: boolean;
};
/** A leg found the document; for the keyword leg, per `field`, the highlight fragments (matched
 * terms in <b>, HTML-escaped). */
export type MatchReason = {
  type: "match"; leg: "keyword" | "semantic"; rank: number; score: number; field?: string; highlights?: string[];
};
/** Reached through the graph overlay: `collection/id` of each document on the way. */
export type EdgeReason = { type: "edge"; path: string[] };
/** A certificate (`issuer:name`) the document requires, which the caller holds. */
export type CertReason = { type: "cert"; issuer: string; name: string; rule: "required" };
/** Why the document has no vector in the ranking's space (the sidecar's status and reason). */
export type NotEmbeddedReason = { type: "not_embedded"; status: string; reason: string | null; space: string };
export type ExplainReason = MatchReason | EdgeReason | CertReason | NotEmbeddedReason;

/** One event of the POST SSE stream (`Accept: text/event-stream`), in the order sent:
 * `lexical` (first ranking), `semantic` (each re-ranking), `rerank` (a read that reranks: the page
 * of the ranking event just before it, re-ordered by the reranker), `warming` (progress), `done`
 * (final ranking and diagnostics) or `error`. `id` is the SSE event id when the server sends one. */
export type ReadEvent =
  | { event: "lexical"; data: Schemas["LexicalEvent"]; id?: string }
  | { event: "semantic"; data: Schemas["SemanticEvent"]; id?: string }
  | { event: "rerank"; data: Schemas["ReadAnswer"]; id?: string }
  | { event: "done"; data: Schemas["DoneEvent"]; id?: string }
  | { event: "warming"; data: Schemas["WarmingEvent"]; id?: string }
  | { event: "error"; data: Schemas["ErrorEvent"]; id?: string };

/** A stored document: its JSON fields, `_acl` (principals who may read), `_vibe` (hints). */
export type DocFields = Record<string, unknown> & { _acl?: string[]; _vibe?: Record<string, unknown> };
export type PutAnswer = Or<Ok<"/v1/collections/{collection}/docs/{doc_id}", "put">,
  { _id: string; collection: string; result: string }>;
export type GotDoc = Or<Ok<"/v1/collections/{collection}/docs/{doc_id}", "get">,
  { _id: string; [field: string]: unknown }> & Record<string, unknown>;
export type DeleteAnswer = Or<Ok<"/v1/collections/{collection}/docs/{doc_id}", "delete">,
  { _id: string; collection: string; result: string }>;
export type BulkDoc = DocFields & { _id: string };
export type BulkItem = { _id: string; status: number; result?: string; error?: ErrorDetail };
export type BulkAnswer = { errors: boolean; accepted: number; rejected: number; results: BulkItem[] };
/** `POST /v1/collections/{c}/docs:mget`: each id's document (`_found: true`), or
 * `{_id, _found: false}` (a document the key may not read is answered exactly like a missing one). */
export type MgetAnswer = Schemas["MgetAnswer"];
export type MgetDoc = Schemas["MgetDoc"];

export type Coverage = Schemas["Coverage"];
export type Promotions = Schemas["Promotions"];
export type SchedulerView = Schemas["SchedulerView"];
export type Promoted = Schemas["Promoted"];
export type Demoted = Schemas["Demoted"];
export type QueueDepth = Schemas["QueueDepth"];
export type Lag = Schemas["Lag"];
export type SemanticState = Schemas["SemanticState"];
export type DocStatus = Schemas["DocStatus"];
export type Reindexing = Schemas["Reindexing"];
export type ReindexBody = In<"/semantic/reindex", "post">;
export type Usage = Schemas["Usage"];
/** `GET /semantic/ledger`: one row per provider call per document (never its text). */
export type LedgerEntry = Schemas["LedgerEntry"];
export type LedgerPage = Schemas["LedgerPage"];
export type Spaces = Schemas["Spaces"];
export type Health = Schemas["Health"];
export type Evicted = Schemas["Evicted"];
export type EvictBody = In<"/semantic/evict", "post">;
/** `POST /v1/keys`'s body and answer (the secret `key` is in this answer only). */
export type KeyBody = In<"/v1/keys", "post">;
export type KeyCreated = Schemas["KeyCreated"];
export type Keys = Schemas["Keys"];
/** `POST /v1/tokens`'s body and answer. */
export type TokenBody = In<"/v1/tokens", "post">;
export type TokenCreated = Schemas["TokenCreated"];
export type Migrating = Schemas["Migrating"];
export type CreateSpaceBody = In<"/semantic/spaces", "post">;
export type Activated = Schemas["Activated"];
export type Mismatch = Schemas["Mismatch"];
export type Backfills = Schemas["Backfills"];
export type DeadLetters = Schemas["DeadLetters"];
export type FollowUpView = Schemas["FollowUpView"];
/** Collections: the list, a delete's progress, delete by filter, settings. */
export type CollectionList = Schemas["CollectionList"];
export type CollectionDeleted = Schemas["CollectionDeleted"];
export type DeleteByFilterBody = In<"/v1/collections/{collection}/docs:deleteByFilter", "post">;
export type DeletedByFilter = Schemas["DeletedByFilter"];
export type CollectionSettingsBody = In<"/v1/collections/{collection}/settings", "put">;
export type CollectionSettings = Schemas["CollectionSettingsOut"];

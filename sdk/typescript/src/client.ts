/** `Client`: documents, readOnce (JSON and the POST SSE stream), explain and admin calls over
 * `fetch`. Only web APIs (fetch, AbortController, TextDecoder, ReadableStream), so the same
 * build runs in Node >= 20 and in browsers. */

import { errorFrom, VibeError } from "./errors.js";
import { sseEvents } from "./sse.js";
import type {
  Activated, Backfills, BulkAnswer, BulkDoc, BulkItem, Coverage, CreateSpaceBody, DeadLetters, DeleteAnswer,
  DocFields, Evicted, EvictBody, Explanation, GotDoc, Health, Lag, MgetAnswer, Migrating, Mismatch, Promoted,
  Demoted, Promotions, PutAnswer, SchedulerView, QueueDepth, ReadAnswer, ReadBody, ReadEvent, ReindexBody, Reindexing,
  DocStatus, FollowUpView, Spaces, Usage, LedgerPage, KeyBody, KeyCreated, Keys, TokenBody, TokenCreated,
  CollectionList, CollectionDeleted, DeleteByFilterBody, DeletedByFilter, CollectionSettingsBody, CollectionSettings,
} from "./types.js";

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** The service's base URL, e.g. `http://127.0.0.1:8080` (a trailing `/` is ignored); in a
   * page served by the API, `location.origin`. */
  baseUrl: string;
  /** The API key, sent as `Authorization: Bearer <key>` (never in a URL). */
  apiKey: string;
  /** A `fetch` to use instead of the global one (tests, proxies, instrumentation). */
  fetch?: FetchLike;
  /** Retries after 429 (any call: the request was refused before it ran), 503 and network
   * errors (idempotent calls only). Default 3. */
  retries?: number;
  /** The first backoff delay when the answer has no `Retry-After`; doubles per try, with
   * jitter. Default 250 ms. */
  backoffMs?: number;
  /** Upper bound of any single wait, `Retry-After` included. Default 30 s. */
  maxRetryDelayMs?: number;
  /** Time limit of a JSON call (the stream has none: its end is `done`). Default 60 s; 0 = none. */
  timeoutMs?: number;
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this call. */
  timeoutMs?: number;
}

export interface BulkProgress {
  /** Documents sent so far (answered, accepted or rejected). */
  done: number;
  total: number;
  accepted: number;
  rejected: number;
}

export interface BulkOptions extends CallOptions {
  /** Documents per request (the API accepts up to 5,000). Default 500. */
  batchSize?: number;
  onProgress?: (progress: BulkProgress) => void;
}

type Method = "GET" | "PUT" | "POST" | "DELETE";

interface Request {
  method: Method;
  path: string;
  body?: unknown;
  accept?: string;
  /** Safe to send twice (GET/PUT/DELETE, reads, upserts by id). */
  idempotent: boolean;
  signal?: AbortSignal | undefined;
  timeoutMs?: number | undefined;
}

const TERMINAL = new Set(["done", "error"]);

export class Client {
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly fetchImpl: FetchLike;
  private readonly retries: number;
  private readonly backoffMs: number;
  private readonly maxRetryDelayMs: number;
  private readonly timeoutMs: number;

  constructor(options: ClientOptions) {
    if (!options || !options.baseUrl) throw new TypeError("Client: baseUrl is required");
    if (!options.apiKey) throw new TypeError("Client: apiKey is required");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    // bound to globalThis at call time: browsers refuse `fetch` called on another `this`
    this.fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.retries = Math.max(0, options.retries ?? 3);
    this.backoffMs = options.backoffMs ?? 250;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
    this.timeoutMs = options.timeoutMs ?? 60_000;
  }

  // -- documents ------------------------------------------------------------------------

  /** Create or replace a document (`_acl`: principals who may read it; absent = the tenant). */
  put(collection: string, id: string, doc: DocFields, options: CallOptions = {}): Promise<PutAnswer> {
    return this.json({ method: "PUT", path: docPath(collection, id), body: doc, idempotent: true, ...options });
  }

  /** A document; `includeSemantic` adds `__semantic: {status, lastEmbeddedAt, space}`. */
  get(collection: string, id: string, options: CallOptions & { includeSemantic?: boolean } = {}): Promise<GotDoc> {
    const q = options.includeSemantic ? "?include=semantic" : "";
    return this.json({ method: "GET", path: docPath(collection, id) + q, idempotent: true, ...options });
  }

  delete(collection: string, id: string, options: CallOptions = {}): Promise<DeleteAnswer> {
    return this.json({ method: "DELETE", path: docPath(collection, id), idempotent: true, ...options });
  }

  /** Several documents in one request, in the order asked. */
  mget(collection: string, ids: string[], options: CallOptions = {}): Promise<MgetAnswer> {
    return this.json({ method: "POST", path: `/v1/collections/${seg(collection)}/docs:mget`, body: { ids },
                       idempotent: true, ...options });
  }

  /** Upsert many documents (each with `_id`) in batches of `batchSize`; a rejected document
   * does not sink the others (see `results[i].error`). `onProgress` is called after each batch. */
  async bulk(collection: string, docs: BulkDoc[], options: BulkOptions = {}): Promise<BulkAnswer> {
    const size = Math.max(1, Math.floor(options.batchSize ?? 500));
    const out: BulkAnswer = { errors: false, accepted: 0, rejected: 0, results: [] as BulkItem[] };
    for (let start = 0; start < docs.length; start += size) {
      const answer = await this.json<BulkAnswer>({
        method: "POST", path: `/v1/collections/${seg(collection)}/docs:bulk`, body: { docs: docs.slice(start, start + size) },
        idempotent: true, signal: options.signal, timeoutMs: options.timeoutMs, // upserts by id: sending twice is harmless
      });
      out.accepted += answer.accepted;
      out.rejected += answer.rejected;
      out.errors ||= answer.errors;
      out.results.push(...answer.results);
      options.onProgress?.({ done: Math.min(start + size, docs.length), total: docs.length,
                             accepted: out.accepted, rejected: out.rejected });
    }
    return out;
  }

  // -- reads ----------------------------------------------------------------------------

  /** One JSON answer with what is ready now (`results`, `warming`, `strategy`, `diagnostics`). */
  read(body: ReadBody, options: CallOptions = {}): Promise<ReadAnswer> {
    return this.json({ method: "POST", path: "/v1/read", body, accept: "application/json", idempotent: true, ...options });
  }

  /** Every page of a read, one JSON answer each, following `nextCursor` until the last page
   * (`limit` is the page size). Stop early with `break`. */
  async *pages(body: ReadBody, options: CallOptions = {}): AsyncGenerator<ReadAnswer, void, undefined> {
    let cursor: string | null | undefined = (body as { cursor?: string | null }).cursor;
    for (;;) {
      const answer = await this.read({ ...body, cursor } as ReadBody, options);
      yield answer;
      cursor = (answer as { nextCursor?: string | null }).nextCursor;
      if (!cursor || answer.results.length === 0) return;
    }
  }

  /** The stream of one read: `lexical` first, then `warming`/`semantic` as the backfill
   * progresses (each ranking followed by a `rerank` event when the read reranks), and `done` (or
   * `error`) last; iteration ends after it. Breaking out of the loop
   * or aborting `signal` closes the connection. Errors before the stream starts (bad body,
   * key, 429 after the retries) are thrown as `VibeError`; an error after it started arrives
   * as an `error` event. */
  readOnce(body: ReadBody, options: { signal?: AbortSignal } = {}): AsyncIterable<ReadEvent> {
    const self = this;
    return {
      async *[Symbol.asyncIterator]() {
        const [response, scope] = await self.send({ method: "POST", path: "/v1/read", body, accept: "text/event-stream",
                                                    idempotent: true, signal: options.signal, timeoutMs: 0 });
        try {
          if (!response.body) throw new VibeError("bad_response", "the stream has no body", response.status);
          for await (const e of sseEvents(response.body, TERMINAL)) {
            // events already received in the same chunk are not handed out after an abort
            options.signal?.throwIfAborted();
            yield e as ReadEvent;
          }
        } catch (e) {
          if (options.signal?.aborted || e instanceof VibeError) throw e;
          throw new VibeError("stream_interrupted", "the stream broke: " + String((e as Error)?.message ?? e), 0,
                              undefined, undefined, { cause: e });
        } finally {
          scope.end();
        }
      },
    };
  }

  /** Why a result is where it is (`explainId` of a hit). */
  explain(explainId: string, options: CallOptions = {}): Promise<Explanation> {
    return this.json({ method: "GET", path: `/v1/explain/${seg(explainId)}`, idempotent: true, ...options });
  }

  // -- admin (scope `admin`) -------------------------------------------------------------

  coverage(collection?: string, options: CallOptions = {}): Promise<Coverage> {
    return this.json({ method: "GET", path: "/semantic/coverage" + query({ collection }), idempotent: true, ...options });
  }

  status(collection: string, id: string, options: CallOptions = {}): Promise<DocStatus> {
    return this.json({ method: "GET", path: "/semantic/status" + query({ collection, _id: id }), idempotent: true, ...options });
  }

  promotions(options: CallOptions = {}): Promise<Promotions> {
    return this.json({ method: "GET", path: "/semantic/promotions", idempotent: true, ...options });
  }

  /** The lifecycle scheduler's policy, its last tick and what it last changed for the tenant. */
  scheduler(options: CallOptions = {}): Promise<SchedulerView> {
    return this.json({ method: "GET", path: "/semantic/scheduler", idempotent: true, ...options });
  }

  /** Make a collection eager (every document embedded at ingest). */
  promote(collection: string, options: CallOptions = {}): Promise<Promoted> {
    return this.json({ method: "POST", path: "/semantic/promote", body: { collection }, idempotent: true, ...options });
  }

  /** Back to lazy (embedded on touch). */
  demote(collection: string, options: CallOptions = {}): Promise<Demoted> {
    return this.json({ method: "DELETE", path: "/semantic/promote" + query({ collection }), idempotent: true, ...options });
  }

  queueDepth(options: CallOptions = {}): Promise<QueueDepth> {
    return this.json({ method: "GET", path: "/semantic/queueDepth", idempotent: true, ...options });
  }

  lag(options: CallOptions = {}): Promise<Lag> {
    return this.json({ method: "GET", path: "/semantic/lag", idempotent: true, ...options });
  }

  /** Re-embed a collection (or a space); answers at once (202), the work is queued. */
  reindex(body: ReindexBody = {} as ReindexBody, options: CallOptions = {}): Promise<Reindexing> {
    return this.json({ method: "POST", path: "/semantic/reindex", body, idempotent: false, ...options });
  }

  /** Provider calls, tokens and estimated cost by day, `days` back (default 30), of a collection or the tenant. */
  usage(collection?: string, options: CallOptions & { days?: number } = {}): Promise<Usage> {
    const { days, ...call } = options;
    const path = "/semantic/usage" + query({ collection, days: days?.toString() });
    return this.json({ method: "GET", path, idempotent: true, ...call });
  }

  /** The tenant's provider calls, oldest first; `since` is ISO 8601 or epoch seconds, `cursor` a
   * page's `nextCursor`. */
  ledger(
    filter: { collection?: string; id?: string; since?: string | number; limit?: number; cursor?: string } = {},
    options: CallOptions = {},
  ): Promise<LedgerPage> {
    const path = "/semantic/ledger" + query({
      collection: filter.collection, _id: filter.id, since: filter.since?.toString(),
      limit: filter.limit?.toString(), cursor: filter.cursor,
    });
    return this.json({ method: "GET", path, idempotent: true, ...options });
  }

  spaces(options: CallOptions = {}): Promise<Spaces> {
    return this.json({ method: "GET", path: "/semantic/spaces", idempotent: true, ...options });
  }

  /** Evict idle vectors of a collection to the cold store now (as the scheduler would). */
  evict(body: EvictBody, options: CallOptions = {}): Promise<Evicted> {
    return this.json({ method: "POST", path: "/semantic/evict", body, idempotent: true, ...options });
  }

  /** Start a rolling re-embed into a new space (reads keep using the active one). */
  createSpace(body: CreateSpaceBody, options: CallOptions = {}): Promise<Migrating> {
    return this.json({ method: "POST", path: "/semantic/spaces", body, idempotent: false, ...options });
  }

  /** Cut reads over to a space (`force`: although documents are still to embed), or re-activate a
   *  retired one (model rollback: its vectors come back from the cold store). */
  activateSpace(space: string, activate: { force?: boolean } = {}, options: CallOptions = {}): Promise<Activated> {
    return this.json({ method: "POST", path: `/semantic/spaces/${seg(space)}/activate`, body: activate,
                       idempotent: true, ...options });
  }

  mismatch(options: CallOptions = {}): Promise<Mismatch> {
    return this.json({ method: "GET", path: "/semantic/mismatch", idempotent: true, ...options });
  }

  backfills(options: CallOptions = {}): Promise<Backfills> {
    return this.json({ method: "GET", path: "/semantic/backfills", idempotent: true, ...options });
  }

  deadLetters(options: CallOptions = {}): Promise<DeadLetters> {
    return this.json({ method: "GET", path: "/semantic/deadLetters", idempotent: true, ...options });
  }

  /** Each of the tenant's collections' touch "auto" follow-up state (unknown, agree, disagree), by
   * name, a page at a time (`after`: the previous page's `next`). */
  touch(page: { after?: string; limit?: number } = {}, options: CallOptions = {}): Promise<FollowUpView> {
    const path = "/semantic/touch" + query({ after: page.after, limit: page.limit?.toString() });
    return this.json({ method: "GET", path, idempotent: true, ...options });
  }

  // -- collections ------------------------------------------------------------------------

  /** The tenant's collections by name with their settings (`documents` for admin keys only). */
  listCollections(page: { after?: string; limit?: number } = {}, options: CallOptions = {}): Promise<CollectionList> {
    const path = "/v1/collections" + query({ after: page.after, limit: page.limit?.toString() });
    return this.json({ method: "GET", path, idempotent: true, ...options });
  }

  /** Remove a collection (admin): `state` "deleted", or "deleting" with progress (call again to follow). */
  deleteCollection(collection: string, options: CallOptions = {}): Promise<CollectionDeleted> {
    return this.json({ method: "DELETE", path: `/v1/collections/${seg(collection)}`, idempotent: true, ...options });
  }

  /** Delete the readable documents of a filter, a bounded page a call (`more`: call again with `after`). */
  deleteByFilter(collection: string, body: DeleteByFilterBody, options: CallOptions = {}): Promise<DeletedByFilter> {
    return this.json({ method: "POST", path: `/v1/collections/${seg(collection)}/docs:deleteByFilter`, body,
                       idempotent: false, ...options });
  }

  collectionSettings(collection: string, options: CallOptions = {}): Promise<CollectionSettings> {
    return this.json({ method: "GET", path: `/v1/collections/${seg(collection)}/settings`, idempotent: true,
                       ...options });
  }

  /** Change the settings named (null: back to the default); the others stay (admin). */
  putCollectionSettings(collection: string, body: CollectionSettingsBody,
                        options: CallOptions = {}): Promise<CollectionSettings> {
    return this.json({ method: "PUT", path: `/v1/collections/${seg(collection)}/settings`, body, idempotent: true,
                       ...options });
  }

  // -- keys (scope `admin`) and end-user tokens (any key); never retried: a second call makes a second one --

  /** A new key of the tenant; its secret `key` is in this answer only. */
  createKey(body: KeyBody, options: CallOptions = {}): Promise<KeyCreated> {
    return this.json({ method: "POST", path: "/v1/keys", body, idempotent: false, ...options });
  }

  /** The tenant's keys (bootstrap ones flagged), never a secret. */
  listKeys(options: CallOptions = {}): Promise<Keys> {
    return this.json({ method: "GET", path: "/v1/keys", idempotent: true, ...options });
  }

  /** Revoke a key: it and its tokens are refused everywhere within a second (204, no body). */
  async revokeKey(id: string, options: CallOptions = {}): Promise<void> {
    const [response, scope] = await this.send({ method: "DELETE", path: `/v1/keys/${seg(id)}`, idempotent: false,
                                                ...options });
    try {
      await response.arrayBuffer();
    } finally {
      scope.end();
    }
  }

  /** A signed, expiring token for one end user (use it as another client's `apiKey`); `filter` is
   * ANDed to every read made with it. */
  createToken(body: TokenBody = {}, options: CallOptions = {}): Promise<TokenCreated> {
    return this.json({ method: "POST", path: "/v1/tokens", body, idempotent: false, ...options });
  }

  health(options: CallOptions = {}): Promise<Health> {
    return this.json({ method: "GET", path: "/healthz", idempotent: true, ...options });
  }

  // -- transport ------------------------------------------------------------------------

  private async json<T>(req: Request): Promise<T> {
    const [response, scope] = await this.send({ accept: "application/json", ...req });
    try {
      return (await response.json()) as T;
    } catch (cause) {
      if (req.signal?.aborted) throw req.signal.reason ?? cause;
      if (scope.timedOut) throw new VibeError("timeout", "the answer did not arrive in time", 0, undefined, undefined, { cause });
      throw new VibeError("bad_response", "the answer is not JSON", response.status, undefined, undefined, { cause });
    } finally {
      scope.end(); // the time limit covers the body too
    }
  }

  /** One call with its retries: a 2xx response and its live abort scope (the caller ends it
   * once the body is read), or a thrown `VibeError` (or the caller's abort reason). */
  private async send(req: Request): Promise<[Response, Scope]> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.apiKey}`, Accept: req.accept ?? "application/json" };
    if (req.body !== undefined) headers["Content-Type"] = "application/json";
    const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
    const timeoutMs = req.timeoutMs ?? this.timeoutMs;
    for (let attempt = 0; ; attempt++) {
      const scope = new Scope(req.signal, timeoutMs);
      let response: Response;
      try {
        response = await this.fetchImpl(this.baseUrl + req.path, {
          // answers depend on the key: never stored by a browser cache for another caller
          method: req.method, headers, body: payload, signal: scope.signal, cache: "no-store",
        });
      } catch (cause) {
        scope.end();
        if (req.signal?.aborted) throw req.signal.reason ?? cause;
        const err = scope.timedOut
          ? new VibeError("timeout", `no answer within ${timeoutMs} ms`, 0, undefined, undefined, { cause })
          : new VibeError("network_error", `request failed: ${String((cause as Error)?.message ?? cause)}`, 0,
                          undefined, undefined, { cause });
        if (req.idempotent && attempt < this.retries && !scope.timedOut) {
          await sleep(this.delay(attempt, undefined), req.signal);
          continue;
        }
        throw err;
      }
      if (response.ok) return [response, scope];
      const err = await errorFrom(response);
      scope.end();
      const retryable = response.status === 429 || (response.status === 503 && req.idempotent);
      if (retryable && attempt < this.retries) {
        await sleep(this.delay(attempt, err.retryAfter), req.signal);
        continue;
      }
      throw err;
    }
  }

  private delay(attempt: number, retryAfter: number | undefined): number {
    const ms = retryAfter !== undefined
      ? retryAfter * 1000
      : this.backoffMs * 2 ** attempt * (0.5 + Math.random() / 2); // jitter spreads retrying clients apart
    return Math.min(ms, this.maxRetryDelayMs);
  }
}

/** The caller's signal and a timeout as one signal (AbortSignal.any is not everywhere yet). */
class Scope {
  private readonly controller = new AbortController();
  private readonly timer: ReturnType<typeof setTimeout> | undefined;
  private readonly onAbort: () => void;
  timedOut = false;

  constructor(private readonly parent: AbortSignal | undefined, timeoutMs: number) {
    this.onAbort = () => this.controller.abort(parent?.reason);
    if (parent?.aborted) this.onAbort();
    else parent?.addEventListener("abort", this.onAbort, { once: true });
    this.timer = timeoutMs > 0
      ? setTimeout(() => { this.timedOut = true; this.controller.abort(); }, timeoutMs)
      : undefined;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  end(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.parent?.removeEventListener("abort", this.onAbort);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => { clearTimeout(t); reject(signal?.reason); };
    const t = setTimeout(() => { signal?.removeEventListener("abort", onAbort); resolve(); }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function seg(s: string): string {
  return encodeURIComponent(s);
}

function docPath(collection: string, id: string): string {
  return `/v1/collections/${seg(collection)}/docs/${seg(id)}`;
}

function query(params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

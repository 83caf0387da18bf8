// The SDK against the REAL served app (tests/sdk/test_typescript_sdk.py serves it with uvicorn
// and passes VIBE_BASE_URL and the keys), plus a local stand-in for 429/503 answers.
// Run: VIBE_BASE_URL=http://127.0.0.1:8080 VIBE_ADMIN_KEY=... node --test test/
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";

import { Client, VibeError } from "../dist/index.js";

const BASE = process.env.VIBE_BASE_URL;
const ADMIN = process.env.VIBE_ADMIN_KEY; // tenant ta: read, write, admin
const READER = process.env.VIBE_READER_KEY; // tenant ta: read only (user:bob)
const OTHER = process.env.VIBE_OTHER_KEY; // tenant tb admin
if (!BASE || !ADMIN || !READER || !OTHER) {
  throw new Error("set VIBE_BASE_URL, VIBE_ADMIN_KEY, VIBE_READER_KEY, VIBE_OTHER_KEY (tests/sdk/test_typescript_sdk.py does)");
}

const admin = new Client({ baseUrl: BASE, apiKey: ADMIN });
const reader = new Client({ baseUrl: BASE + "/", apiKey: READER });
const other = new Client({ baseUrl: BASE, apiKey: OTHER });
const COLL = "ts-" + randomUUID().slice(0, 8);

const DOCS = [
  { _id: "d1", title: "Roadside puncture repair", body: "Patch the inner tube of a bike tyre and pump it up." },
  { _id: "d2", title: "Sourdough basics", body: "Feed the starter, fold the dough and bake in a hot oven." },
  { _id: "d3", title: "Tyre pressure", body: "Check the tyre pressure of your bike before every ride." },
  { _id: "d4", title: "Quarterly VAT", body: "Submit the VAT return before the deadline." },
  { _id: "d5", title: "Chain care", body: "Clean and oil the bike chain every month." },
];

async function rejectsWith(promise, code, status) {
  const err = await promise.then(() => null, (e) => e);
  assert.ok(err instanceof VibeError, `expected a VibeError, got ${err}`);
  assert.equal(err.code, code, err.message);
  assert.equal(err.status, status);
  assert.equal(typeof err.message, "string");
  return err;
}

describe("documents", () => {
  test("bulk in batches reports progress and aggregates per-document results", async () => {
    const seen = [];
    const bad = { _id: "bad", title: "x", _acl: "not-a-list" }; // rejected alone, the others land
    const docs = [...DOCS.slice(0, 2), bad, ...DOCS.slice(2)];
    const answer = await admin.bulk(COLL, docs, { batchSize: 2, onProgress: (p) => seen.push({ ...p }) });
    assert.deepEqual(seen.map((p) => p.done), [2, 4, 6]);
    assert.ok(seen.every((p) => p.total === 6));
    assert.equal(answer.accepted, 5);
    assert.equal(answer.rejected, 1);
    assert.equal(answer.errors, true);
    assert.equal(answer.results.length, 6);
    const rejected = answer.results.find((r) => r._id === "bad");
    assert.equal(rejected.status, 400);
    assert.equal(rejected.error.code, "invalid_params");
    assert.deepEqual(seen.at(-1), { done: 6, total: 6, accepted: 5, rejected: 1 });
  });

  test("put, get (with the semantic state), delete", async () => {
    const put = await admin.put(COLL, "p 1+x", { title: "Odd id", body: "ids are path-encoded", _acl: ["user:admin"] });
    assert.equal(put._id, "p 1+x");
    const got = await admin.get(COLL, "p 1+x", { includeSemantic: true });
    assert.equal(got.title, "Odd id");
    assert.equal(typeof got.__semantic.status, "string");
    assert.equal((await admin.get(COLL, "p 1+x")).__semantic, undefined);
    // the ACL excludes bob: answered exactly like a missing document
    await rejectsWith(reader.get(COLL, "p 1+x"), "not_found", 404);
    assert.equal((await admin.delete(COLL, "p 1+x")).result, "deleted");
    await rejectsWith(admin.get(COLL, "p 1+x"), "not_found", 404);
  });

  test("mget answers each id in order, a missing or unreadable one as _found: false", async (t) => {
    let answer;
    try {
      answer = await admin.mget(COLL, ["d1", "nope", "d2"]);
    } catch (e) {
      if (e instanceof VibeError && e.code === "not_found" && /route/.test(e.message)) {
        t.skip("the API has no docs:mget route yet");
        return;
      }
      throw e;
    }
    assert.deepEqual(answer.docs.map((d) => d._id), ["d1", "nope", "d2"]);
    assert.equal(answer.docs[0].title, DOCS[0].title);
    assert.equal(answer.docs[0]._found, true);
    assert.equal(answer.docs[1]._found, false);
    // a document bob may not read is answered exactly like a missing one
    await admin.put(COLL, "secret", { title: "Salaries", body: "private", _acl: ["user:admin"] });
    const asBob = await reader.mget(COLL, ["secret", "nope"]);
    assert.deepEqual(Object.keys(asBob.docs[0]).sort(), Object.keys(asBob.docs[1]).sort());
    assert.equal(asBob.docs[0]._found, false);
    assert.equal(asBob.docs[0].title, undefined);
    await admin.delete(COLL, "secret");
  });

  test("typed errors carry the stable code and status", async () => {
    const badKey = new Client({ baseUrl: BASE, apiKey: "no-such-key" });
    await rejectsWith(badKey.get(COLL, "d1"), "unauthorized", 401);
    await rejectsWith(reader.put(COLL, "x", { title: "t" }), "forbidden", 403);
    await rejectsWith(admin.get(COLL, "missing"), "not_found", 404);
    await rejectsWith(admin.read({ collection: COLL, q: "tyre", limit: 0 }), "invalid_params", 400);
    await rejectsWith(reader.coverage(COLL), "forbidden", 403);
    // another tenant sees nothing of ta's collection
    await rejectsWith(other.get(COLL, "d1"), "not_found", 404);
  });
});

describe("reads", () => {
  test("read answers JSON with ranked results and an explain record per hit", async () => {
    const answer = await admin.read({ collection: COLL, q: "bike tyre", semantic: { strategy: "keyword" }, limit: 10 });
    assert.equal(answer.strategy, "keyword");
    const ids = answer.results.map((r) => r.id);
    assert.ok(ids.includes("d1") && ids.includes("d3"), JSON.stringify(ids));
    assert.ok(!ids.includes("d2"));
    for (const r of answer.results) assert.equal(r.collection, COLL);
    const why = await admin.explain(answer.results[0].explainId);
    assert.equal(why.id, answer.results[0].id);
    assert.ok(Array.isArray(why.reasons));
    // one leg: its contribution is the whole score; the keyword match names its field
    assert.equal(why.fusion, "none");
    assert.equal(why.shownScore, answer.results[0].score);
    assert.equal(why.contributions.reduce((sum, c) => sum + c.contribution, 0), why.score);
    assert.ok(why.reasons.some((r) => r.type === "match" && r.leg === "keyword"), JSON.stringify(why.reasons));
  });

  test("pages follows nextCursor: pages disjoint, complete, in rank order", async () => {
    const many = Array.from({ length: 23 }, (_, i) => ({ _id: `pg${i}`, title: `gearbox manual ${i}`, body: "gearbox oil" }));
    await admin.bulk(COLL, many);
    const seen = [];
    const sizes = [];
    for await (const page of admin.pages({ collection: COLL, q: "gearbox", semantic: { strategy: "keyword" }, limit: 10 })) {
      sizes.push(page.results.length);
      seen.push(...page.results.map((r) => r.id));
    }
    assert.deepEqual(sizes, [10, 10, 3]);
    assert.equal(new Set(seen).size, 23);
    assert.deepEqual([...seen].sort(), many.map((d) => d._id).sort());
  });

  test("readOnce yields the stream's events in order: lexical first, done last", async () => {
    const events = [];
    for await (const e of admin.readOnce({ collection: COLL, q: "bike tyre", semantic: { strategy: "hybrid" }, limit: 10 })) {
      events.push(e);
    }
    const names = events.map((e) => e.event);
    assert.equal(names[0], "lexical", names.join(","));
    assert.equal(names.at(-1), "done", names.join(","));
    for (const n of names.slice(1, -1)) assert.ok(n === "warming" || n === "semantic", n);
    const lexical = events[0].data.results.map((r) => r.id);
    assert.ok(lexical.includes("d1") && lexical.includes("d3"), JSON.stringify(lexical));
    const done = events.at(-1).data;
    assert.ok(Array.isArray(done.results) && done.results.length > 0);
    assert.equal(typeof done.diagnostics, "object");
    for (const e of events.filter((e) => e.event === "warming")) assert.equal(typeof e.data.queued, "number");
    // event ids, where the server sends them, increase
    const ids = events.map((e) => e.id).filter((id) => id !== undefined).map(Number);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], JSON.stringify(ids));
  });

  test("readOnce follows the ACL and the tenant: another tenant's stream finds nothing", async () => {
    const events = [];
    for await (const e of other.readOnce({ collection: COLL, q: "bike tyre", limit: 10 })) events.push(e);
    assert.equal(events[0].event, "lexical");
    for (const e of events) if (e.data.results) assert.deepEqual(e.data.results, []);
  });

  test("readOnce throws a typed error when the stream cannot start", async () => {
    const it = admin.readOnce({ collection: COLL, q: "", limit: 10 })[Symbol.asyncIterator]();
    await rejectsWith(it.next(), "invalid_params", 400);
  });

  test("breaking out of readOnce or aborting its signal ends the stream", async () => {
    let n = 0;
    for await (const e of admin.readOnce({ collection: COLL, q: "bike", semantic: { strategy: "hybrid" } })) {
      assert.equal(e.event, "lexical");
      n++;
      break;
    }
    assert.equal(n, 1);
    const ctl = new AbortController();
    const seen = [];
    const err = await (async () => {
      for await (const e of admin.readOnce({ collection: COLL, q: "bike", semantic: { strategy: "hybrid" } }, { signal: ctl.signal })) {
        seen.push(e.event);
        ctl.abort();
      }
    })().then(() => null, (e) => e);
    assert.deepEqual(seen, ["lexical"]);
    assert.ok(err && err.name === "AbortError", String(err));
    // an already aborted signal never sends the request
    const pre = AbortSignal.abort();
    await assert.rejects(admin.read({ collection: COLL, q: "bike" }, { signal: pre }), (e) => e.name === "AbortError");
  });
});

describe("admin", () => {
  test("coverage, promotions, promote/demote and queue depth", async () => {
    const cov = await admin.coverage(COLL);
    assert.equal(typeof cov, "object");
    assert.equal(cov.eager, false);
    const promoted = await admin.promote(COLL);
    assert.equal(promoted.collection, COLL);
    const promos = await admin.promotions();
    const mine = promos.collections.find((c) => c.collection === COLL);
    assert.equal(mine.state, "eager");
    assert.equal((await admin.coverage(COLL)).eager, true);
    await admin.demote(COLL);
    assert.equal((await admin.coverage(COLL)).eager, false);
    const depth = await admin.queueDepth();
    assert.equal(typeof depth, "object");
    assert.ok(Object.values(depth).some((v) => typeof v === "number"), JSON.stringify(depth));
    const state = await admin.status(COLL, "d1");
    assert.equal(typeof state.status, "string");
    assert.equal(typeof state.lifecycle.eager, "boolean");
    const sched = await admin.scheduler();
    assert.equal(typeof sched.intervalSeconds, "number");
    assert.equal(typeof sched.policy.evictIdleSeconds, "number");
    const spaces = await admin.spaces();
    assert.ok(spaces.spaces.some((sp) => sp.state === "active"), JSON.stringify(spaces));
    const evicted = await admin.evict({ collection: COLL, idleSeconds: 0 });
    assert.equal(typeof evicted, "object");
    for (const call of [() => admin.lag(), () => admin.mismatch(), () => admin.backfills(), () => admin.deadLetters(),
                        () => admin.usage(COLL)]) {
      assert.equal(typeof (await call()), "object");
    }
    // usage's `days` reaches the server (as Python's `usage(collection, days=...)`): a bad one is refused by name
    const usage = await admin.usage(COLL, { days: 2 });
    assert.equal(usage.collection, COLL);
    assert.ok(usage.days.length <= 2 && typeof usage.today.tokens === "number", JSON.stringify(usage));
    const badDays = await rejectsWith(admin.usage(COLL, { days: 0 }), "invalid_params", 400);
    assert.match(badDays.message, /days/);
    await rejectsWith(admin.activateSpace("no-such-space"), "not_found", 404);
    await rejectsWith(reader.spaces(), "forbidden", 403);
    // GET /semantic/touch: the page's parameters reach the server (a bad one is refused)
    const touch = await admin.touch({ limit: 5 });
    assert.ok(["auto", true, false].includes(touch.followUp), JSON.stringify(touch));
    assert.ok(touch.collections.length <= 5, JSON.stringify(touch));
    assert.deepEqual((await admin.touch({ after: "zzzz" })).collections, []);
    await rejectsWith(admin.touch({ after: "not a name!" }), "invalid_params", 400);
    await rejectsWith(admin.touch({ limit: 0 }), "invalid_params", 400);
    await rejectsWith(reader.touch(), "forbidden", 403);
  });
});

describe("keys and end-user tokens", () => {
  test("createKey, listKeys, createToken (a filtered token reads within its filter), revokeKey", async () => {
    const coll = COLL + "-kt";
    await admin.put(coll, "red", { team: "red", title: "lantern red" });
    await admin.put(coll, "blue", { team: "blue", title: "lantern blue" });
    const made = await admin.createKey({ name: "ts bot", principals: ["user:bot"], scopes: ["read"] });
    assert.ok(made.key.startsWith("vsk_"));
    const listed = await admin.listKeys();
    assert.ok(listed.keys.some((k) => k.id === made.id && !k.bootstrap));
    assert.ok(!JSON.stringify(listed).includes(made.key));
    const bot = new Client({ baseUrl: BASE, apiKey: made.key });
    const minted = await bot.createToken({ filter: { team: "red" }, ttlSeconds: 600 });
    await rejectsWith(bot.createToken({ principals: ["user:admin"] }), "forbidden", 403);
    const user = new Client({ baseUrl: BASE, apiKey: minted.token });
    const answer = await user.read({ collection: coll, q: "lantern", semantic: { strategy: "keyword" } });
    assert.deepEqual(answer.results.map((r) => r.id), ["red"]);
    await admin.revokeKey(made.id);
    await rejectsWith(admin.revokeKey(made.id), "not_found", 404);
    await rejectsWith(new Client({ baseUrl: BASE, apiKey: made.key, retries: 0 }).listKeys(), "unauthorized", 401);
    const boot = listed.keys.find((k) => k.bootstrap);
    await rejectsWith(admin.revokeKey(boot.id), "forbidden", 403);
  });
});

describe("collections", () => {
  test("listCollections, deleteByFilter, settings, deleteCollection", async () => {
    const coll = COLL + "-c";
    await admin.bulk(coll, [1, 2, 3, 4].map((i) => ({ _id: `n${i}`, title: `note ${i}`, kind: i % 2 ? "draft" : "final" })));
    const listed = await admin.listCollections();
    assert.equal(listed.collections.find((c) => c.name === coll).documents, 4);
    const seen = (await reader.listCollections()).collections.find((c) => c.name === coll);
    assert.equal(seen.documents, undefined); // counts for admin keys only
    await rejectsWith(reader.deleteByFilter(coll, { filter: { kind: "draft" } }), "forbidden", 403);
    const deleted = await admin.deleteByFilter(coll, { filter: { kind: "draft" } });
    assert.equal(deleted.deleted, 2);
    assert.equal(deleted.more, false);
    const settings = await admin.putCollectionSettings(coll, { embedFields: ["title"] });
    assert.deepEqual(settings.embedFields, ["title"]);
    assert.deepEqual((await admin.collectionSettings(coll)).embedFields, ["title"]);
    await rejectsWith(admin.putCollectionSettings(coll, { language: "klingon" }), "invalid_params", 400);
    const gone = await admin.deleteCollection(coll);
    assert.equal(gone.state, "deleted");
    assert.equal(gone.remaining, 0);
  });
});

describe("retries against a stand-in (429 and 503 with Retry-After)", () => {
  let server;
  let url;
  let script = [];
  const hits = [];

  before(async () => {
    server = createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        hits.push({ method: req.method, url: req.url, at: performance.now(), auth: req.headers.authorization, body });
        const [status, headers] = script.shift() ?? [200, {}];
        if (status === 200) {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ results: [], warming: { queued: 0, message: "" }, strategy: "keyword", diagnostics: {} }));
          return;
        }
        const code = status === 429 ? "rate_limited" : "embedder_unavailable";
        res.writeHead(status, { "content-type": "application/json", ...headers });
        res.end(JSON.stringify({ error: { code, message: "slow down" } }));
      });
    });
    await new Promise((r) => server.listen(0, "127.0.0.1", r));
    url = `http://127.0.0.1:${server.address().port}`;
  });
  after(() => new Promise((r) => server.close(r)));

  test("an idempotent call waits Retry-After and retries until it succeeds", async () => {
    hits.length = 0;
    script = [[429, { "retry-after": "1" }], [503, { "retry-after": "0" }]];
    const c = new Client({ baseUrl: url, apiKey: "k", backoffMs: 1 });
    const answer = await c.read({ collection: "c", q: "x" });
    assert.equal(answer.strategy, "keyword");
    assert.equal(hits.length, 3);
    assert.ok(hits.every((h) => h.auth === "Bearer k" && h.url === "/v1/read"));
    assert.deepEqual(JSON.parse(hits[2].body), { collection: "c", q: "x" });
    // a sleep is never shorter than asked: the 1 s Retry-After was honoured
    assert.ok(hits[1].at - hits[0].at >= 990, `retried after ${hits[1].at - hits[0].at} ms`);
  });

  test("retries give up after `retries` and throw the last error with retryAfter", async () => {
    hits.length = 0;
    script = [[429, { "retry-after": "0" }], [429, { "retry-after": "0" }], [429, { "retry-after": "0" }]];
    const c = new Client({ baseUrl: url, apiKey: "k", retries: 2 });
    const err = await rejectsWith(c.get("c", "d"), "rate_limited", 429);
    assert.equal(err.retryAfter, 0);
    assert.equal(hits.length, 3);
  });

  test("a non-idempotent call retries a 429 (never run) but not a 503", async () => {
    hits.length = 0;
    script = [[429, { "retry-after": "0" }], [200, {}]];
    const c = new Client({ baseUrl: url, apiKey: "k" });
    await c.reindex({ collection: "c" });
    assert.equal(hits.length, 2);
    hits.length = 0;
    script = [[503, { "retry-after": "0" }], [200, {}]];
    await rejectsWith(c.reindex({ collection: "c" }), "embedder_unavailable", 503);
    assert.equal(hits.length, 1);
    script = [];
  });

  test("readOnce retries a 429 before its stream starts", async () => {
    hits.length = 0;
    script = [[429, { "retry-after": "0" }]];
    const streamServer = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        hits.push({ url: req.url, accept: req.headers.accept });
        if (hits.length === 1) {
          res.writeHead(429, { "content-type": "application/json", "retry-after": "0" });
          res.end(JSON.stringify({ error: { code: "rate_limited", message: "slow down" } }));
          return;
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        // CRLF, a comment, a retry hint and a data line split across chunks: the SSE grammar
        res.write(": keep-alive\r\nretry: 3000\r\n\r\nid: 1\r\nevent: lexical\r\ndata: {\"results\":");
        setTimeout(() => {
          res.write("[],\"strategy\":\"keyword\"}\r\n\r\nid: 2\nevent: done\ndata: {\"results\":[]}\n\n");
          res.end();
        }, 20);
      });
    });
    await new Promise((r) => streamServer.listen(0, "127.0.0.1", r));
    try {
      const c = new Client({ baseUrl: `http://127.0.0.1:${streamServer.address().port}`, apiKey: "k" });
      const events = [];
      for await (const e of c.readOnce({ collection: "c", q: "x" })) events.push(e);
      assert.deepEqual(events, [
        { event: "lexical", id: "1", data: { results: [], strategy: "keyword" } },
        { event: "done", id: "2", data: { results: [] } },
      ]);
      assert.equal(hits.length, 2);
      assert.equal(hits[1].accept, "text/event-stream");
    } finally {
      await new Promise((r) => streamServer.close(r));
    }
  });

  test("a stream cut before done is a stream_interrupted error", async () => {
    const cut = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end("event: lexical\ndata: {\"results\":[]}\n\n");
      });
    });
    await new Promise((r) => cut.listen(0, "127.0.0.1", r));
    try {
      const c = new Client({ baseUrl: `http://127.0.0.1:${cut.address().port}`, apiKey: "k" });
      const seen = [];
      const err = await (async () => {
        for await (const e of c.readOnce({ collection: "c", q: "x" })) seen.push(e.event);
      })().then(() => null, (e) => e);
      assert.deepEqual(seen, ["lexical"]);
      assert.ok(err instanceof VibeError && err.code === "stream_interrupted", String(err));
    } finally {
      await new Promise((r) => cut.close(r));
    }
  });
});

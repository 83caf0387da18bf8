// What the TypeScript SDK adds to a read over raw fetch (issue 13: target <= 0.3 ms at p50).
//
//   cd sdk/typescript && npm run build && node bench/overhead.mjs [--pairs 1000] [--docs 2000]
//
// Serves the app itself (../../.venv/bin/python -m services.cli serve: embedded profile, hash
// embedder, keyword strategy so the server does the same work each time, rate limit off), then
// sends the same queries through `client.read` and through a raw `fetch` + `.json()` (the
// baseline, same run), interleaved pair by pair in a random order so a shared machine's drift
// hits both alike; likewise `client.readOnce` (the SSE stream parsed into events) against a raw
// `fetch` + `.text()` of the same stream. Reported: p50/p95 per side and the p50 of the per-pair
// difference (the added latency). Results: bench/results/sdk_overhead_typescript.json.
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { Client } from "../dist/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const { values: args } = parseArgs({ options: { pairs: { type: "string", default: "1000" }, docs: { type: "string", default: "2000" } } });
const PAIRS = Number(args.pairs);
const NDOCS = Number(args.docs);
const KEY = "bench-key";
const TARGET_MS = 0.3;
const WORDS = "tyre wheel patch pump chain brake saddle gear frame spoke rim valve tube lever bolt cable pedal crank fork hub".split(" ");

const freePort = () => new Promise((ok) => { const s = createServer().listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => ok(p)); }); });
const pct = (xs, p) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const rand = (n) => Math.floor(Math.random() * n);

const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const dataDir = mkdtempSync(join(tmpdir(), "vibe-ts-bench-"));
const server = spawn(join(repo, ".venv/bin/python"), ["-m", "services.cli", "serve"], {
  cwd: repo, stdio: "ignore",
  env: { ...process.env, VIBE_PROFILE: "embedded", VIBE_DATA_DIR: join(dataDir, "data"), VIBE_EMBEDDER: "hash",
         VIBE_HOST: "127.0.0.1", VIBE_PORT: String(port), HF_HUB_OFFLINE: "1", VIBE_PER_TENANT_REQUESTS_PER_SECOND: "0",
         VIBE_API_KEYS: JSON.stringify([{ key: KEY, tenant: "t", principals: ["user:b"], scopes: ["read", "write", "admin"] }]) },
});
try {
  for (let i = 0; ; i++) {
    try { if ((await fetch(`${base}/healthz`)).ok) break; } catch { /* not up yet */ }
    if (i > 600) throw new Error("server did not start");
    await new Promise((r) => setTimeout(r, 200));
  }
  const client = new Client({ baseUrl: base, apiKey: KEY });
  const docs = Array.from({ length: NDOCS }, (_, i) => ({
    _id: `d${i}`, title: `${WORDS[rand(WORDS.length)]} ${WORDS[rand(WORDS.length)]}`,
    body: Array.from({ length: 30 }, () => WORDS[rand(WORDS.length)]).join(" "),
  }));
  await client.bulk("syn", docs, { batchSize: 1000 });
  const queries = Array.from({ length: 50 }, () => `${WORDS[rand(WORDS.length)]} ${WORDS[rand(WORDS.length)]}`);
  const body = (q) => ({ collection: "syn", q, semantic: { strategy: "keyword" }, limit: 10 });
  const headers = (accept) => ({ Authorization: `Bearer ${KEY}`, Accept: accept, "Content-Type": "application/json" });

  const sides = {
    read: {
      sdk: (q) => client.read(body(q)),
      raw: async (q) => (await fetch(`${base}/v1/read`, { method: "POST", headers: headers("application/json"), body: JSON.stringify(body(q)) })).json(),
    },
    readOnce: {
      sdk: async (q) => { const evs = []; for await (const e of client.readOnce(body(q))) evs.push(e); return evs; },
      raw: async (q) => (await fetch(`${base}/v1/read`, { method: "POST", headers: headers("text/event-stream"), body: JSON.stringify(body(q)) })).text(),
    },
  };
  const result = { pairs: PAIRS, docs: NDOCS, target_ms: TARGET_MS, node: process.version, calls: {} };
  for (const [name, side] of Object.entries(sides)) {
    for (let i = 0; i < 50; i++) { await side.sdk(queries[i % 50]); await side.raw(queries[i % 50]); } // warm-up
    const sdk = [], raw = [], diff = [];
    for (let i = 0; i < PAIRS; i++) {
      const q = queries[rand(queries.length)];
      const order = Math.random() < 0.5 ? ["sdk", "raw"] : ["raw", "sdk"];
      const t = {};
      for (const which of order) {
        const t0 = performance.now();
        await side[which](q);
        t[which] = performance.now() - t0;
      }
      sdk.push(t.sdk); raw.push(t.raw); diff.push(t.sdk - t.raw);
    }
    result.calls[name] = {
      sdk_p50_ms: pct(sdk, 0.5), sdk_p95_ms: pct(sdk, 0.95), raw_p50_ms: pct(raw, 0.5), raw_p95_ms: pct(raw, 0.95),
      added_p50_ms: pct(diff, 0.5), ratio_p50: pct(sdk, 0.5) / pct(raw, 0.5), meets_target: pct(diff, 0.5) <= TARGET_MS,
    };
    console.log(name, JSON.stringify(result.calls[name]));
  }
  const out = join(repo, "bench", "results");
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "sdk_overhead_typescript.json"), JSON.stringify(result, null, 2) + "\n");
  console.log(`wrote ${join(out, "sdk_overhead_typescript.json")}`);
} finally {
  server.kill("SIGTERM");
  await new Promise((r) => server.once("exit", r));
  rmSync(dataDir, { recursive: true, force: true });
}

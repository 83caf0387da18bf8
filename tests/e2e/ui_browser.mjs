// The /ui page in headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core):
// run by tests/e2e/test_ui_browser.py against the served app with the local model embedder.
// Env: VIBE_BASE_URL, VIBE_KEY, VIBE_CHROMIUM, VIBE_ARTIFACTS, VIBE_SDK_DIR. Exits non-zero on
// the first failed expectation; screenshots and report.json go to VIBE_ARTIFACTS.
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const { VIBE_BASE_URL: BASE, VIBE_KEY: KEY, VIBE_CHROMIUM: CHROMIUM, VIBE_ARTIFACTS: OUT, VIBE_SDK_DIR: SDK } = process.env;
for (const [k, v] of Object.entries({ BASE, KEY, CHROMIUM, OUT, SDK })) if (!v) throw new Error(`missing env ${k}`);
mkdirSync(OUT, { recursive: true });

// playwright-core and the SDK live in sdk/typescript/node_modules and dist
const { chromium } = createRequire(join(SDK, "package.json"))("playwright-core");
const { Client } = await import(pathToFileURL(join(SDK, "dist", "index.js")).href);

const QUESTION = "how can I mend a flat bicycle tire";
const report = { steps: [] };
const step = (name, data = {}) => {
  report.steps.push({ name, ...data });
  console.log(`ok - ${name}`, JSON.stringify(data));
};

const api = new Client({ baseUrl: BASE, apiKey: KEY });
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"],
});
const requests = [];
const problems = [];
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.setDefaultTimeout(90_000);
  // what the list showed at each ranking: the page sets #results[data-phase] after rendering an
  // event, and an observer's callback runs before the next event is rendered (microtask order)
  await page.addInitScript(() => {
    window.__renders = [];
    document.addEventListener("DOMContentLoaded", () => {
      const list = document.getElementById("results");
      new MutationObserver(() => window.__renders.push({
        phase: list.dataset.phase, ids: [...list.querySelectorAll(":scope > li[data-doc-id]")].map((li) => li.dataset.docId),
      })).observe(list, { attributes: true, attributeFilter: ["data-phase"] });
      window.__warming = [];
      const warming = document.getElementById("warming");
      new MutationObserver(() => window.__warming.push({ hidden: warming.hidden, text: warming.textContent }))
        .observe(warming, { attributes: true, childList: true, characterData: true, subtree: true });
    });
  });
  page.on("request", (r) => requests.push({ url: r.url(), auth: r.headers()["authorization"] ?? null }));
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  page.on("response", (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.request().method()} ${r.url()}`); });
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });

  const timeline = () => page.$$eval("#timeline li", (lis) => lis.map((li) => ({ event: li.dataset.event, ids: li.dataset.ids ? li.dataset.ids.split(",") : [] })));
  const shown = (list = "#results") => page.$$eval(`${list} > li[data-doc-id]`, (lis) => lis.map((li) => li.dataset.docId));
  const waitDone = (list = "#results") => page.waitForSelector(`${list}[data-phase="done"], ${list}[data-phase="error"]`);

  // 1. the URL runs the query on load; the key leaves the address bar at once
  await page.goto(`${BASE}/ui?collection=kb&q=${encodeURIComponent("bike tyre patch")}&strategy=hybrid#key=${encodeURIComponent(KEY)}`);
  await waitDone();
  assert.equal(await page.getAttribute("#results", "data-phase"), "done", await page.textContent("#error"));
  assert.equal(await page.evaluate(() => location.hash), "");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("vibe.ui.key")), KEY);
  const t1 = await timeline();
  assert.equal(t1[0].event, "lexical", JSON.stringify(t1));
  assert.ok(t1[0].ids.includes("tyre"), JSON.stringify(t1));
  assert.equal(t1.at(-1).event, "done");
  assert.ok((await shown()).includes("tyre"));
  await page.screenshot({ path: join(OUT, "01-loaded-from-url.png"), fullPage: true });
  // the lazy backfill was announced with the V§15 copy while the stream waited
  const warmingShown = (await page.evaluate(() => window.__warming)).filter((w) => !w.hidden && w.text);
  assert.ok(warmingShown.some((w) => /^Warming up… \d+ results? (are|is) being indexed$/.test(w.text)), JSON.stringify(warmingShown));
  step("query from the URL ran on load", { timeline: t1, warming: warmingShown.map((w) => w.text) });

  // the touch embeds the repair note in the background (lazy semantic, V§4.1)
  let state = "";
  for (let i = 0; i < 600 && state !== "ready"; i++) {
    state = (await api.get("kb", "tyre", { includeSemantic: true })).__semantic.status;
    if (state !== "ready") await new Promise((r) => setTimeout(r, 100));
  }
  assert.equal(state, "ready");

  // 2. type a paraphrase that shares no word with the repair note: lexical results first
  //    (the flat-pack page), then the semantic re-ranking brings the repair note in
  //    (one search only: a second one would find the query's vector cached and fuse at once)
  assert.equal(await page.inputValue("#strategy"), "hybrid"); // kept from the URL
  await page.fill("#q", QUESTION);
  await page.evaluate(() => { window.__renders = []; });
  await page.press("#q", "Enter");
  await page.waitForSelector('#results:not([data-phase="running"]) > li[data-doc-id]');
  await page.screenshot({ path: join(OUT, "02-first-ranking.png"), fullPage: true });
  await waitDone();
  assert.equal(await page.getAttribute("#results", "data-phase"), "done", await page.textContent("#error"));
  await page.screenshot({ path: join(OUT, "03-semantic-reranked.png"), fullPage: true });
  const t2 = await timeline();
  assert.equal(t2[0].event, "lexical", JSON.stringify(t2));
  assert.ok(t2[0].ids.length > 0, "lexical results shown first: " + JSON.stringify(t2));
  assert.ok(!t2[0].ids.includes("tyre"), "the paraphrase-only document is not a lexical hit: " + JSON.stringify(t2));
  const firstWithTyre = t2.findIndex((e) => e.ids.includes("tyre"));
  assert.ok(firstWithTyre > 0 && t2[firstWithTyre].event === "semantic", JSON.stringify(t2));
  // the DOM itself: the list showed the lexical ranking first, then the re-ranking with it
  const renders = (await page.evaluate(() => window.__renders)).filter((r) => r.phase !== "running");
  assert.equal(renders[0].phase, "lexical", JSON.stringify(renders));
  assert.ok(renders[0].ids.length > 0 && !renders[0].ids.includes("tyre"), JSON.stringify(renders));
  const arrived = renders.find((r) => r.ids.includes("tyre"));
  assert.equal(arrived.phase, "semantic", JSON.stringify(renders));
  const tyre = await page.$eval('#results > li[data-doc-id="tyre"]', (li) => ({ ...li.dataset, title: li.querySelector(".title").textContent }));
  assert.equal(tyre.firstEvent, "semantic", JSON.stringify(tyre));
  assert.match(tyre.matchedBy, /semantic/);
  assert.ok(Number(tyre.rank) <= 2, JSON.stringify(tyre));
  assert.equal(tyre.title, "Roadside puncture repair");
  step("lexical results, then the semantic re-ranking with the paraphrase-only document",
       { timeline: t2, renders, tyre, order: await shown() });

  // 3. document text is text: markup in a stored title or body never becomes elements
  const flat = await page.$eval('#results > li[data-doc-id="flatpack"]', (li) => ({
    title: li.querySelector(".title").textContent, snippet: li.querySelector(".snippet").textContent,
    imgs: li.querySelectorAll("img, script").length, marks: li.querySelectorAll(".snippet mark").length }));
  assert.equal(flat.imgs, 0);
  assert.ok(flat.title.includes("<img src=x onerror=window.__xss=1>"), JSON.stringify(flat));
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  step("stored markup shown as text", flat);

  // 4. the explain panel of a hit
  await page.click('#results > li[data-doc-id="tyre"] .explain-btn');
  await page.waitForSelector('#results > li[data-doc-id="tyre"] .explain li[data-leg]');
  const legs = await page.$$eval('#results > li[data-doc-id="tyre"] .explain li[data-leg]', (lis) => lis.map((l) => l.dataset.leg));
  assert.ok(legs.includes("semantic"), JSON.stringify(legs));
  await page.screenshot({ path: join(OUT, "04-explain.png"), fullPage: true });
  step("explain panel", { legs });

  // 5. more like this
  await page.click('#results > li[data-doc-id="tyre"] .more-btn');
  await waitDone("#similar-results");
  const similar = await shown("#similar-results");
  assert.equal(await page.getAttribute("#similar-results", "data-phase"), "done", await page.textContent("#error"));
  assert.ok(!similar.includes("tyre"), JSON.stringify(similar));
  assert.ok(similar.length > 0, "more like this found documents");
  await page.screenshot({ path: join(OUT, "05-more-like-this.png"), fullPage: true });
  step("more like this", { similar });

  // 6. admin tab: coverage, promotions, queue depth (the key has scope admin)
  await page.click("#tab-admin");
  await page.waitForSelector("#panel-admin[data-loaded]");
  await page.fill("#admin-collection", "kb");
  await page.click("#admin-promote");
  await page.waitForSelector('#promotions tr[data-collection="kb"][data-state="eager"]');
  const coverageKeys = await page.$$eval("#coverage tr[data-key]", (trs) => trs.map((t) => t.dataset.key));
  assert.ok(coverageKeys.length > 0, "coverage shown");
  assert.ok((await page.$$("#queue tr[data-key]")).length > 0, "queue depth shown");
  assert.equal(await page.isHidden("#admin-error"), true, await page.textContent("#admin-error"));
  await page.screenshot({ path: join(OUT, "06-admin.png"), fullPage: true });
  await page.click("#admin-demote");
  await page.waitForSelector('#promotions tr[data-collection="kb"][data-state="eager"]', { state: "detached" });
  step("admin tab", { coverageKeys });

  // 6b. pages: 20 results, then "More results" appends the next page from nextCursor
  await page.click("#tab-search");
  await page.fill("#collection", "manuals");
  await page.selectOption("#strategy", "keyword");
  await page.fill("#q", "gearbox");
  await page.press("#q", "Enter");
  await waitDone();
  assert.equal((await shown()).length, 20);
  await page.waitForSelector("#more-results:not([hidden])");
  await page.click("#more-results");
  await page.waitForFunction(() => document.querySelectorAll("#results > li[data-doc-id]").length === 25);
  await page.waitForSelector("#more-results", { state: "hidden" });
  const paged = await shown();
  assert.equal(new Set(paged).size, 25);
  assert.deepEqual(await page.$$eval("#results > li", (lis) => lis.map((li) => Number(li.dataset.rank))),
                   Array.from({ length: 25 }, (_, i) => i + 1));
  step("more results from nextCursor", { shown: paged.length });

  // 7. forgetting the key clears what it was shown; a key typed into the page works too
  await page.click("#tab-search");
  await page.click("#key-forget");
  assert.equal((await shown()).length, 0);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("vibe.ui.key")), null);
  assert.equal(await page.$$eval("#coverage *, #promotions *", (els) => els.length), 0);
  await page.fill("#key", KEY);
  await page.press("#key", "Enter");
  await waitDone();
  assert.equal((await shown()).length, 20);
  assert.equal(await page.inputValue("#key"), ""); // not left in the field
  step("forget and type a key");

  // the key travelled only in the Authorization header, never in a URL
  assert.ok(requests.length > 0);
  for (const r of requests) assert.ok(!r.url.includes(KEY), `key in a request URL: ${r.url}`);
  const apiCalls = requests.filter((r) => new URL(r.url).pathname.startsWith("/v1/") || new URL(r.url).pathname.startsWith("/semantic/"));
  assert.ok(apiCalls.length > 0 && apiCalls.every((r) => r.auth === `Bearer ${KEY}`));
  const uiCalls = requests.filter((r) => new URL(r.url).pathname.startsWith("/ui"));
  assert.ok(uiCalls.every((r) => r.auth === null), "the page's files are fetched without the key");
  assert.deepEqual(problems, []);
  step("key only in the Authorization header", { requests: requests.length, apiCalls: apiCalls.length });
  await context.close();
} finally {
  report.requests = requests.map((r) => r.url);
  report.problems = problems;
  writeFileSync(join(OUT, "report.json"), JSON.stringify(report, null, 2));
  await browser.close();
}
console.log("ui browser test: all steps passed");

// The /ui page's neighbours and their explain panels (a read's `graph`): run by
// tests/e2e/test_ui_graph.py (hash embedder). Env: VIBE_BASE_URL, VIBE_READER_KEY, VIBE_CHROMIUM,
// VIBE_ARTIFACTS, VIBE_SDK_DIR. Exits non-zero on the first failed expectation.
import assert from "node:assert/strict";
import { join } from "node:path";
import { env, launch } from "./headless.mjs";

const { VIBE_BASE_URL: BASE, VIBE_READER_KEY: READER, VIBE_CHROMIUM: CHROMIUM, VIBE_ARTIFACTS: OUT, VIBE_SDK_DIR: SDK } =
  env("VIBE_BASE_URL", "VIBE_READER_KEY", "VIBE_CHROMIUM", "VIBE_ARTIFACTS", "VIBE_SDK_DIR");
const browser = await launch(CHROMIUM, SDK, OUT);
try {
  const page = await (await browser.newContext()).newPage();
  page.setDefaultTimeout(60_000);
  const done = () => page.waitForSelector('#results[data-phase="done"], #results[data-phase="error"]');
  const neighbours = () => page.$$eval('#results > li[data-doc-id="g1"] .neighbors > li',
    (lis) => lis.map((li) => `${li.dataset.collection}/${li.dataset.docId}@${li.dataset.depth}`));

  // depth 2 from the URL: g1's neighbours, the hidden one never
  await page.goto(`${BASE}/ui?collection=graphs&q=aardvark&strategy=keyword&graph=2#key=${encodeURIComponent(READER)}`);
  await done();
  assert.equal(await page.inputValue("#graph"), "2");
  assert.deepEqual(await neighbours(), ["graphs/g2@1", "notes/g3@2"]);
  assert.ok(!(await page.textContent("body")).includes("hidden"));
  console.log("ok - neighbours at depth 1 and 2, the hidden end never");

  // the depth-2 neighbour's explain panel shows the edge path with its predicates
  const far = '#results > li[data-doc-id="g1"] .neighbors > li[data-doc-id="g3"]';
  await page.click(`${far} .explain-btn`);
  await page.waitForSelector(`${far} .explain li[data-type="edge"]`);
  const reason = await page.textContent(`${far} .explain li[data-type="edge"]`);
  assert.equal(reason, "reached through graphs/g1 —cites→ graphs/g2 ←replyTo— notes/g3");
  assert.equal(await page.getAttribute(`${far} .explain li[data-type="edge"]`, "data-path"),
               "graphs/g1 graphs/g2 notes/g3");
  await page.screenshot({ path: join(OUT, "20-graph-explain.png"), fullPage: true });
  console.log("ok - explain panel shows the edge path");

  // neighbours off: none shown
  await page.selectOption("#graph", "0");
  await page.waitForFunction(() => !document.querySelector(".neighbors > li"));
  await done();
  assert.deepEqual(await neighbours(), []);
  console.log("ok - neighbours off");
} finally {
  await browser.close();
}

// The /ui page shows what the key may read, and nothing of one key stays for the next:
// run by tests/e2e/test_ui_browser.py (hash embedder). Env: VIBE_BASE_URL, VIBE_READER_KEY,
// VIBE_ADMIN_KEY, VIBE_CHROMIUM, VIBE_ARTIFACTS, VIBE_SDK_DIR.
import assert from "node:assert/strict";
import { join } from "node:path";
import { env, launch } from "./headless.mjs";

const { VIBE_BASE_URL: BASE, VIBE_READER_KEY: READER, VIBE_ADMIN_KEY: ADMIN, VIBE_CHROMIUM: CHROMIUM, VIBE_ARTIFACTS: OUT, VIBE_SDK_DIR: SDK } =
  env("VIBE_BASE_URL", "VIBE_READER_KEY", "VIBE_ADMIN_KEY", "VIBE_CHROMIUM", "VIBE_ARTIFACTS", "VIBE_SDK_DIR");
const browser = await launch(CHROMIUM, SDK, OUT);
try {
  const page = await (await browser.newContext()).newPage();
  page.setDefaultTimeout(60_000);
  const shown = () => page.$$eval("#results > li[data-doc-id]", (lis) => lis.map((li) => li.dataset.docId).sort());
  const done = () => page.waitForSelector('#results[data-phase="done"], #results[data-phase="error"]');

  // the reader sees the public note only: the salary note's ACL excludes them
  await page.goto(`${BASE}/ui?collection=acl&q=quarterly%20report&strategy=keyword#key=${encodeURIComponent(READER)}`);
  await done();
  assert.deepEqual(await shown(), ["public"]);
  assert.ok(!(await page.textContent("body")).includes("Salaries"));
  await page.click("#tab-admin");
  await page.waitForSelector("#admin-error:not([hidden])");
  assert.equal(await page.textContent("#admin-error"), "This key has no admin scope.");
  await page.screenshot({ path: join(OUT, "10-reader-key.png"), fullPage: true });
  console.log("ok - reader key: public note only, admin refused");

  // another key typed in: the previous answers are gone before the new ones arrive
  await page.click("#tab-search");
  await page.fill("#key", ADMIN);
  await page.press("#key", "Enter");
  await done();
  assert.deepEqual(await shown(), ["public", "secret"]);
  await page.click("#tab-admin");
  await page.waitForSelector("#panel-admin[data-loaded]");
  await page.waitForSelector("#coverage tr[data-key]");
  assert.equal(await page.isHidden("#admin-error"), true);
  console.log("ok - admin key: both notes, admin tab");

  // and back to the reader: nothing of the admin's answers is left on the page
  await page.click("#tab-search");
  await page.fill("#key", READER);
  await page.evaluate(() => { window.__seen = []; new MutationObserver(() => window.__seen.push(
    [...document.querySelectorAll("#results > li[data-doc-id]")].map((li) => li.dataset.docId))).observe(
    document.getElementById("results"), { childList: true }); });
  await page.press("#key", "Enter");
  await done();
  assert.deepEqual(await shown(), ["public"]);
  const seen = await page.evaluate(() => window.__seen);
  assert.ok(seen.every((ids) => !ids.includes("secret")), JSON.stringify(seen));
  assert.equal(await page.$$eval("#coverage *, #promotions *, #queue *", (els) => els.length), 0);
  console.log("ok - reader again: the admin's results and admin answers were cleared");

  // a link carrying another key, opened in this tab (which keeps the reader's key in its
  // sessionStorage): asked first; declined, the reader's key stays and the link's query runs with it
  const link = `${BASE}/ui?collection=acl&q=quarterly%20report&strategy=keyword#key=${encodeURIComponent(ADMIN)}`;
  await page.goto("about:blank");
  await page.goto(link);
  await page.waitForSelector("#key-offer:not([hidden])");
  assert.equal(await page.evaluate(() => location.hash), ""); // out of the address bar at once
  assert.equal(await page.getAttribute("#results", "data-phase"), "idle"); // nothing runs before the answer
  await page.click("#key-offer-keep");
  await done();
  assert.deepEqual(await shown(), ["public"]);
  // accepted: the link's key is used from then on
  await page.goto("about:blank");
  await page.goto(link);
  await page.waitForSelector("#key-offer:not([hidden])");
  await page.click("#key-offer-use");
  await done();
  assert.deepEqual(await shown(), ["public", "secret"]);
  console.log("ok - a link's key replaces the tab's key only when the user says so");
} finally {
  await browser.close();
}
console.log("ui keys test: all steps passed");

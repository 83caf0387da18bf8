/** The `/ui` search page (V§15 building blocks) on the TypeScript SDK: search box with strategy
 * and scope pickers, results that appear with the lexical event and re-order live as semantic
 * events arrive, the warming line, an explain panel per hit, "more like this", each hit's
 * neighbours by graph edges (`graph: {depth}`, their explain panels showing the edge path), and an
 * admin tab (coverage, promotions, queue depth).
 *
 * The key: typed by the user or given as `#key=K` in the URL fragment (never sent to the server
 * in a URL: the fragment stays in the browser and is removed from the address bar at once), then
 * kept in memory and sessionStorage (this tab only). A link's key never replaces the one a tab
 * already uses without asking (`offerKey`). `/ui?collection=C&q=Q&strategy=S#key=K` runs the
 * query on load. */

import { Client, VibeError } from "../../../../sdk/typescript/src/index.js";
import type {
  ExplainReason, Hit, LegContribution, ReadAnswer, ReadBody, Strategy, Warming,
} from "../../../../sdk/typescript/src/index.js";
import { clear, h, highlightNodes, jsonView } from "./dom.js";

const KEY_STORE = "vibe.ui.key";
const STRATEGIES: readonly Strategy[] = ["auto", "keyword", "semantic", "hybrid"];
const LIMIT = 20;

/** A neighbour a read's `graph` hydration lists under a hit, and the edges of its path (the
 * SDK's generated types follow the OpenAPI snapshot, which may predate them). */
interface EdgeHop { edge: string; from: string; to: string; predicate: string; weight: number }
interface Neighbor {
  id: string; collection: string; predicate: string; weight: number; direction: "out" | "in"; depth: number;
  path: string[]; edges: EdgeHop[]; explainId: string; fields?: Record<string, unknown>;
}
type GraphHit = Hit & { neighbors?: Neighbor[] };

function $<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} missing`);
  return el as T;
}

// -- key ---------------------------------------------------------------------------------

let client: Client | null = null;

function setKey(key: string): void {
  const k = key.trim();
  forgetShown(); // what one key was shown is never left on screen for the next one
  client = k ? new Client({ baseUrl: location.origin, apiKey: k, retries: 2 }) : null;
  try {
    if (k) sessionStorage.setItem(KEY_STORE, k);
    else sessionStorage.removeItem(KEY_STORE);
  } catch {
    // storage refused (private mode): the key stays in memory only
  }
  $<HTMLInputElement>("key").value = "";
  $("key-state").textContent = k ? "key set (this tab only)" : "no key";
  document.body.dataset.key = k ? "set" : "none";
}

/** Clears every answer on the page (results, similar, explain panels, admin tab). */
function forgetShown(): void {
  main.controller?.abort();
  similar?.controller?.abort();
  main.results.reset();
  main.results.list.dataset.phase = "idle";
  main.cursor = null;
  if (main.more) main.more.hidden = true;
  main.phase.textContent = "";
  if (main.warming) main.warming.hidden = true;
  if (main.timeline) clear(main.timeline);
  showError(main.error, "");
  similar?.results.reset();
  $("similar").hidden = true;
  lastQuery = "";
  for (const id of ["coverage", "promotions", "queue"]) clear($(id));
  showError($("admin-error"), "");
}

function needClient(): Client | null {
  if (!client) showError($("error"), "Enter an API key first.");
  return client;
}

// -- results -----------------------------------------------------------------------------

const TITLE_FIELDS = ["title", "name", "subject", "heading"];
const TEXT_FIELDS = ["body", "text", "content", "description", "summary"];

function titleOf(hit: Hit): string {
  const f = hit.fields ?? {};
  for (const k of TITLE_FIELDS) if (typeof f[k] === "string" && f[k]) return f[k] as string;
  for (const v of Object.values(f)) if (typeof v === "string" && v) return v.length > 90 ? v.slice(0, 90) + "…" : v;
  return hit.id;
}

function snippetOf(hit: Hit): Node[] {
  if (hit.highlights?.length) return highlightNodes(hit.highlights.join(" … "));
  const f = hit.fields ?? {};
  for (const k of TEXT_FIELDS) {
    const v = f[k];
    if (typeof v === "string" && v) return [document.createTextNode(v.length > 240 ? v.slice(0, 240) + "…" : v)];
  }
  return [];
}

/** One ranking shown as a list whose items are kept per document across events, so a
 * re-ranking moves the existing elements (and marks the ones that arrived or moved). */
class ResultList {
  private readonly items = new Map<string, HTMLLIElement>();
  private events = 0;

  constructor(readonly list: HTMLOListElement, private readonly exclude?: { collection: string; id: string }) {}

  reset(): void {
    this.items.clear();
    this.events = 0;
    clear(this.list);
    this.list.dataset.phase = "running";
    this.list.dataset.events = "0";
  }

  render(event: string, answer: ReadAnswer): void {
    this.events++;
    const seen = new Set<string>();
    let rank = 0;
    for (const hit of answer.results) {
      if (this.exclude && hit.id === this.exclude.id && hit.collection === this.exclude.collection) continue;
      const key = `${hit.collection}\u0000${hit.id}`;
      seen.add(key);
      rank++;
      let li = this.items.get(key);
      const fresh = !li;
      if (!li) {
        li = this.create(hit, event);
        this.items.set(key, li);
      }
      const before = Number(li.dataset.rank || 0);
      this.update(li, hit, rank, event);
      li.classList.toggle("arrived", fresh && this.events > 1);
      li.classList.toggle("moved", !fresh && before !== rank);
      this.list.append(li); // append moves an existing node: the list takes the new order
    }
    for (const [key, li] of this.items) {
      if (!seen.has(key)) {
        li.remove();
        this.items.delete(key);
      }
    }
    this.list.dataset.phase = event;
    this.list.dataset.events = String(this.events);
  }

  /** The next page (cursor) below the shown ones, ranks continuing. */
  appendPage(answer: ReadAnswer): void {
    let rank = this.items.size;
    for (const hit of answer.results) {
      const key = `${hit.collection}\u0000${hit.id}`;
      if (this.items.has(key)) continue;
      const li = this.create(hit, "page");
      this.items.set(key, li);
      this.update(li, hit, ++rank, "page");
      this.list.append(li);
    }
  }

  private create(hit: Hit, event: string): HTMLLIElement {
    rememberCollection(hit.collection); // the scope picker offers the collections results came from
    const explainBtn = h("button", { type: "button", class: "explain-btn", "aria-expanded": "false" }, "Why here?");
    const moreBtn = h("button", { type: "button", class: "more-btn" }, "More like this");
    const li = h("li", { class: "hit", "data-doc-id": hit.id, "data-collection": hit.collection, "data-first-event": event },
      h("div", { class: "hit-head" },
        h("span", { class: "rank" }), h("span", { class: "title" }), h("span", { class: "coll" }, hit.collection),
        h("span", { class: "badges" }), h("span", { class: "score" })),
      h("p", { class: "snippet" }),
      h("div", { class: "actions" }, explainBtn, moreBtn),
      h("div", { class: "explain", hidden: "" }),
      h("ul", { class: "neighbors", hidden: "" }));
    explainBtn.addEventListener("click", () => void toggleExplain(li, explainBtn));
    moreBtn.addEventListener("click", () => void moreLikeThis(li));
    return li;
  }

  private update(li: HTMLLIElement, hit: Hit, rank: number, _event: string): void {
    li.dataset.rank = String(rank);
    li.dataset.score = String(hit.score);
    li.dataset.matchedBy = hit.matchedBy.join(" ");
    li.dataset.explainId = hit.explainId;
    li.querySelector(".rank")!.textContent = `${rank}.`;
    li.querySelector(".title")!.textContent = titleOf(hit);
    li.querySelector(".score")!.textContent = `score ${hit.score.toFixed(3)}`;
    const badges = li.querySelector(".badges")!;
    badges.replaceChildren(...hit.matchedBy.map((m) => h("span", { class: `badge ${m}` }, m)));
    const snippet = snippetOf(hit);
    if (snippet.length) li.querySelector(".snippet")!.replaceChildren(...snippet);
    showNeighbors(li.querySelector<HTMLUListElement>(".neighbors")!, (hit as GraphHit).neighbors);
  }
}

/** A hit's neighbours by edges: one line each (predicate, direction, depth), with its own
 * explain panel. Re-rendered at every event, since each event's page is re-checked. */
function showNeighbors(list: HTMLUListElement, neighbors: Neighbor[] | undefined): void {
  list.hidden = !neighbors?.length;
  list.replaceChildren(...(neighbors ?? []).map((n) => {
    const btn = h("button", { type: "button", class: "explain-btn", "aria-expanded": "false" }, "Why here?");
    const arrow = n.direction === "out" ? `—${n.predicate}→` : `←${n.predicate}—`;
    const title = typeof n.fields?.title === "string" && n.fields.title ? ` ${n.fields.title}` : "";
    const li = h("li", { class: "neighbor", "data-doc-id": n.id, "data-collection": n.collection,
                          "data-depth": String(n.depth), "data-explain-id": n.explainId },
      h("span", { class: "edge" }, `${arrow} `), h("span", { class: "coll" }, `${n.collection}/${n.id}`),
      h("span", { class: "title" }, title), h("span", { class: "muted" }, ` (depth ${n.depth})`), " ", btn,
      h("div", { class: "explain", hidden: "" }));
    btn.addEventListener("click", () => void toggleExplain(li, btn));
    return li;
  }));
}

// -- streams -----------------------------------------------------------------------------

/** Whether the server takes `include.fields` (older servers answer 400 to it). */
let fieldsSupported = true;

interface Target {
  results: ResultList;
  phase: HTMLElement;
  warming?: HTMLElement;
  error: HTMLElement;
  timeline?: HTMLOListElement;
  controller?: AbortController;
  /** "More results": the body of the shown read and the cursor of its next page. */
  more?: HTMLButtonElement;
  body?: ReadBody;
  cursor?: string | null;
}

function showError(el: HTMLElement, message: string): void {
  el.textContent = message;
  el.hidden = !message;
}

function showWarming(el: HTMLElement | undefined, w: Warming | undefined): void {
  if (!el || !w) return;
  el.textContent = w.queued > 0 ? (w.message || `Warming up… ${w.queued} results are being indexed`) : "";
  el.hidden = w.queued <= 0;
  el.dataset.queued = String(w.queued);
}

function phaseText(event: string, answer: ReadAnswer, n: number, shown: number): string {
  const count = `${shown} result${shown === 1 ? "" : "s"}`;
  if (event === "lexical") {
    return answer.strategy === "keyword" ? `Keyword results · ${count}` : `Keyword results · ${count} · semantic re-ranking on the way…`;
  }
  if (event === "semantic") return `Re-ranked with semantic matches (update ${n}) · ${count}`;
  return `Final ranking · ${answer.strategy} · ${count}`;
}

async function run(target: Target, body: ReadBody): Promise<void> {
  const c = needClient();
  if (!c) return;
  target.controller?.abort();
  const controller = new AbortController();
  target.controller = controller;
  target.results.reset();
  showError(target.error, "");
  if (target.warming) target.warming.hidden = true;
  if (target.timeline) clear(target.timeline);
  target.phase.textContent = "Searching…";
  const include = fieldsSupported ? { fields: true, highlights: true } : { highlights: true };
  target.body = { ...body, include } as ReadBody;
  target.cursor = null;
  if (target.more) target.more.hidden = true;
  let rankings = 0;
  try {
    for await (const ev of c.readOnce({ ...body, include } as ReadBody, { signal: controller.signal })) {
      if (target.timeline) {
        const ids = "results" in ev.data && Array.isArray(ev.data.results) ? ev.data.results.map((r) => r.id) : [];
        target.timeline.append(h("li", { "data-event": ev.event, "data-ids": ids.join(",") },
          ev.event === "warming" ? `warming · ${(ev.data as Warming).queued} queued` : `${ev.event} · ${ids.length} results`));
      }
      switch (ev.event) {
        case "lexical":
        case "semantic":
        case "done":
          rankings++;
          target.results.render(ev.event, ev.data);
          target.phase.textContent = phaseText(ev.event, ev.data, rankings - 1, target.results.list.children.length);
          if (ev.event === "done") {
            showWarming(target.warming, ev.data.warming);
            target.cursor = ev.data.nextCursor ?? null;
            if (target.more) target.more.hidden = !target.cursor;
          }
          break;
        case "warming":
          showWarming(target.warming, ev.data);
          break;
        case "error":
          target.results.list.dataset.phase = "error";
          showError(target.error, `${ev.data.code}: ${ev.data.message}`);
          break;
      }
    }
  } catch (e) {
    if (controller.signal.aborted) return; // a newer search replaced this one
    if (e instanceof VibeError && e.code === "invalid_params" && fieldsSupported && /include/.test(e.message)) {
      fieldsSupported = false;
      return run(target, body);
    }
    target.results.list.dataset.phase = "error";
    target.phase.textContent = "";
    showError(target.error, e instanceof VibeError ? `${e.code}: ${e.message}` : String(e));
  }
}

/** The next page of the shown read (its `nextCursor`), appended below. */
async function loadMore(target: Target): Promise<void> {
  const c = needClient();
  if (!c || !target.body || !target.cursor) return;
  const controller = target.controller ?? new AbortController();
  try {
    const page = await c.read({ ...target.body, cursor: target.cursor } as ReadBody, { signal: controller.signal });
    target.results.appendPage(page);
    target.cursor = page.nextCursor ?? null;
    if (target.more) target.more.hidden = !target.cursor;
    target.phase.textContent = `${target.results.list.children.length} results shown`;
  } catch (e) {
    if (controller.signal.aborted) return;
    showError(target.error, e instanceof VibeError ? `${e.code}: ${e.message}` : String(e));
  }
}

// -- search ------------------------------------------------------------------------------

const main: Target = {
  results: new ResultList($<HTMLOListElement>("results")),
  phase: $("phase"), warming: $("warming"), error: $("error"), timeline: $<HTMLOListElement>("timeline"),
  more: $<HTMLButtonElement>("more-results"),
};
let similar: Target | null = null;
let lastQuery = "";

function currentForm(): { q: string; strategy: Strategy; collection: string; graph: number } {
  const strategy = $<HTMLSelectElement>("strategy").value as Strategy;
  const collection = $<HTMLInputElement>("collection").value.trim() || "any";
  const graph = Number($<HTMLSelectElement>("graph").value) || 0;
  return { q: $<HTMLInputElement>("q").value, strategy, collection, graph };
}

function search(force: boolean): void {
  const f = currentForm();
  const signature = JSON.stringify(f);
  if (!f.q.trim()) return;
  if (!force && signature === lastQuery) return;
  lastQuery = signature;
  // the page's address reflects the query (shareable), never the key
  const params = new URLSearchParams({ collection: f.collection, q: f.q, strategy: f.strategy });
  if (f.graph) params.set("graph", String(f.graph));
  history.replaceState(null, "", `${location.pathname}?${params}`);
  rememberCollection(f.collection);
  void run(main, { collection: f.collection, q: f.q, semantic: { strategy: f.strategy }, limit: LIMIT,
                   ...(f.graph ? { graph: { depth: f.graph } } : {}) } as ReadBody);
}

async function moreLikeThis(li: HTMLLIElement): Promise<void> {
  const id = li.dataset.docId!;
  const collection = li.dataset.collection!;
  const aside = $("similar");
  aside.hidden = false;
  $("similar-of").textContent = li.querySelector(".title")?.textContent || id;
  if (!similar) {
    similar = { results: new ResultList($<HTMLOListElement>("similar-results")), phase: $("similar-phase"), error: $("error") };
  }
  // a new list that leaves the document itself out
  similar.results = new ResultList($<HTMLOListElement>("similar-results"), { collection, id });
  await run(similar, { collection, q: "", semantic: { strategy: "semantic", query: { doc: { collection, _id: id } } },
                       limit: 10 } as ReadBody);
}

async function toggleExplain(li: HTMLLIElement, btn: HTMLButtonElement): Promise<void> {
  const panel = li.querySelector<HTMLElement>(".explain")!;
  if (!panel.hidden) {
    panel.hidden = true;
    btn.setAttribute("aria-expanded", "false");
    return;
  }
  const c = needClient();
  if (!c) return;
  panel.hidden = false;
  btn.setAttribute("aria-expanded", "true");
  panel.replaceChildren("Loading…");
  try {
    const rec = await c.explain(li.dataset.explainId!);
    if ((rec.strategy as string) === "graph") { // a neighbour: the edge path that brought it, no ranking
      panel.replaceChildren(
        h("ul", { class: "reasons" }, ...rec.reasons.map(reasonItem)),
        h("details", {}, h("summary", {}, "Raw record"), jsonView(rec)));
      return;
    }
    panel.replaceChildren(
      h("div", {}, `Strategy ${rec.strategy}, fusion ${rec.fusion}, score ${fixed(rec.score)} (shown ${fixed(rec.shownScore)})`),
      contributionTable(rec.contributions ?? [], rec.score),
      (rec.reasons ?? []).length ? h("ul", { class: "reasons" }, ...rec.reasons.map(reasonItem))
        : h("div", { class: "muted" }, "no reasons recorded"),
      h("details", {}, h("summary", {}, "Raw record"), jsonView(rec)));
  } catch (e) {
    panel.replaceChildren(e instanceof VibeError && e.code === "not_found"
      ? "This explanation expired: search again." : `Could not explain: ${String((e as Error).message ?? e)}`);
  }
}

function fixed(n: number | null | undefined): string {
  return typeof n === "number" ? n.toFixed(4) : "—";
}

/** Each leg's share of the score: raw, normalised, weight and contribution; the last row is
 * their sum, which is the ranking's score. */
function contributionTable(parts: LegContribution[], score: number): HTMLTableElement {
  const row = (p: LegContribution) => h("tr", { "data-contribution": p.leg },
    h("th", { scope: "row" }, p.leg + (p.standIn ? " (estimated: no vector yet)" : "")),
    h("td", {}, p.rank === null ? "—" : String(p.rank)), h("td", {}, fixed(p.raw)), h("td", {}, fixed(p.normalised)),
    h("td", {}, fixed(p.weight)), h("td", {}, fixed(p.contribution)));
  return h("table", { class: "contributions" },
    h("thead", {}, h("tr", {}, ...["leg", "rank", "raw", "normalised", "weight", "contribution"].map((t) => h("th", {}, t)))),
    h("tbody", {}, ...parts.map(row),
      h("tr", { class: "total" }, h("th", { scope: "row" }, "score"), h("td", {}), h("td", {}), h("td", {}), h("td", {}),
        h("td", {}, fixed(score)))));
}

/** One reason as a line; highlights keep their marks (as text: the API escapes them). */
function reasonItem(r: ExplainReason): HTMLLIElement {
  switch (r.type) {
    case "match": {
      const where = r.field ? ` in ${r.field}` : "";
      const marks = (r.highlights ?? []).flatMap((s, i) => [...(i ? [" … "] : [": "]), ...highlightNodes(s)]);
      return h("li", { "data-type": "match", "data-leg": r.leg, "data-field": r.field },
        `${r.leg} match${where}, rank ${r.rank} in its leg, leg score ${fixed(r.score)}`, ...marks);
    }
    case "cert":
      return h("li", { "data-type": "cert" }, `requires certificate ${r.issuer}:${r.name} (${r.rule}; you hold it)`);
    case "not_embedded":
      return h("li", { "data-type": "not_embedded" },
        `not embedded in space ${r.space}: ${r.status}${r.reason ? ` (${r.reason})` : ""}`);
    case "edge":
      return h("li", { "data-type": "edge", "data-path": r.path.join(" ") }, `reached through ${edgePath(r)}`);
    default:
      return h("li", {}, jsonView(r));
  }
}

/** `posts/p1 —mentions→ posts/p2 ←replyTo— notes/n1`: each document of the path, and each edge
 * with its predicate, pointing the way it is stored. */
function edgePath(r: ExplainReason & { type: "edge" }): string {
  const edges = (r as { edges?: EdgeHop[] }).edges ?? [];
  return r.path.map((node, i) => {
    const e = i > 0 ? edges[i - 1] : undefined;
    if (!e) return i > 0 ? ` → ${node}` : node;
    return e.from === r.path[i - 1] ? ` —${e.predicate}→ ${node}` : ` ←${e.predicate}— ${node}`;
  }).join("");
}

function rememberCollection(name: string): void {
  const list = $("collections");
  if (!name || [...list.querySelectorAll("option")].some((o) => o.value === name)) return;
  list.append(h("option", { value: name }));
}

// -- admin -------------------------------------------------------------------------------

function adminCollection(): string | undefined {
  const own = $<HTMLInputElement>("admin-collection").value.trim();
  const scope = currentForm().collection;
  return own || (scope !== "any" ? scope : undefined);
}

async function refreshAdmin(): Promise<void> {
  const c = needClient();
  if (!c) return;
  const err = $("admin-error");
  showError(err, "");
  const collection = adminCollection();
  if (collection) $<HTMLInputElement>("admin-collection").value = collection;
  const [coverage, promotions, queue] = await Promise.allSettled([
    collection ? c.coverage(collection) : Promise.resolve(null), c.promotions(), c.queueDepth(),
  ]);
  const failures = [coverage, promotions, queue].filter((r): r is PromiseRejectedResult => r.status === "rejected");
  if (failures.length) {
    const e = failures[0]!.reason;
    showError(err, e instanceof VibeError && e.code === "forbidden"
      ? "This key has no admin scope." : e instanceof VibeError ? `${e.code}: ${e.message}` : String(e));
  }
  const cov = $("coverage");
  cov.replaceChildren(coverage.status === "fulfilled"
    ? (coverage.value ? jsonView(coverage.value) : h("p", { class: "muted" }, "Pick a collection."))
    : h("p", { class: "muted" }, "—"));
  const promos = $("promotions");
  if (promotions.status === "fulfilled") {
    const rows = promotions.value.collections.map((p) => {
      rememberCollection(p.collection);
      return h("tr", { "data-collection": p.collection, "data-state": p.state },
        h("td", {}, p.collection), h("td", {}, p.state), h("td", {}, String(p.since ?? "")), h("td", {}, String(p.reason ?? "")));
    });
    promos.replaceChildren(rows.length
      ? h("table", {}, h("thead", {}, h("tr", {}, h("th", {}, "collection"), h("th", {}, "state"), h("th", {}, "since"),
          h("th", {}, "reason"))), h("tbody", {}, ...rows))
      : h("p", { class: "muted" }, "No collection is eager."));
  } else {
    promos.replaceChildren(h("p", { class: "muted" }, "—"));
  }
  $("queue").replaceChildren(queue.status === "fulfilled" ? jsonView(queue.value) : h("p", { class: "muted" }, "—"));
  $("panel-admin").dataset.loaded = String(Date.now());
}

async function changePromotion(promote: boolean): Promise<void> {
  const c = needClient();
  const collection = adminCollection();
  if (!c) return;
  if (!collection) {
    showError($("admin-error"), "Pick a collection.");
    return;
  }
  try {
    await (promote ? c.promote(collection) : c.demote(collection));
  } catch (e) {
    showError($("admin-error"), e instanceof VibeError ? `${e.code}: ${e.message}` : String(e));
    return;
  }
  await refreshAdmin();
}

function showTab(name: "search" | "admin"): void {
  for (const t of ["search", "admin"] as const) {
    $(`tab-${t}`).setAttribute("aria-selected", String(t === name));
    $(`panel-${t}`).hidden = t !== name;
  }
  if (name === "admin") void refreshAdmin();
}

// -- start -------------------------------------------------------------------------------

function storedKey(): string | null {
  try {
    return sessionStorage.getItem(KEY_STORE);
  } catch {
    return null;
  }
}

/** A `#key=` link opened in a tab that already uses another key: asked, never swapped silently.
 * A link is anyone's to craft, and a silent swap would have the user search (and type queries)
 * under a stranger's tenant without noticing. Resolves true when the link's key was taken. */
function offerKey(offered: string): Promise<boolean> {
  const box = $("key-offer");
  box.hidden = false;
  document.body.dataset.keyOffer = "open";
  return new Promise((done) => {
    const answer = (take: boolean) => () => {
      box.hidden = true;
      document.body.dataset.keyOffer = take ? "taken" : "kept";
      $("key-offer-use").onclick = null;
      $("key-offer-keep").onclick = null;
      if (take) setKey(offered);
      done(take);
    };
    $("key-offer-use").onclick = answer(true);
    $("key-offer-keep").onclick = answer(false);
  });
}

function start(): void {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const fromFragment = fragment.get("key")?.trim() || null;
  const stored = storedKey();
  let decided: Promise<boolean> | null = null;
  if (fromFragment) {
    // out of the address bar and the history entry: a copied link or a screenshot never shows it
    history.replaceState(null, "", location.pathname + location.search);
  }
  if (fromFragment && stored && stored !== fromFragment) {
    setKey(stored);
    decided = offerKey(fromFragment);
  } else {
    setKey(fromFragment ?? stored ?? "");
  }

  const params = new URLSearchParams(location.search);
  const strategy = params.get("strategy");
  if (strategy && (STRATEGIES as readonly string[]).includes(strategy)) $<HTMLSelectElement>("strategy").value = strategy;
  const collection = params.get("collection");
  if (collection) {
    $<HTMLInputElement>("collection").value = collection;
    rememberCollection(collection);
  }
  const q = params.get("q");
  if (q) $<HTMLInputElement>("q").value = q;
  const graph = params.get("graph");
  if (graph === "1" || graph === "2") $<HTMLSelectElement>("graph").value = graph;

  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    setKey($<HTMLInputElement>("key").value);
    if (currentForm().q.trim()) search(true);
  });
  $("key-forget").addEventListener("click", () => setKey(""));
  $("search").addEventListener("submit", (e) => {
    e.preventDefault();
    clearTimeout(typing);
    search(true);
  });
  let typing: ReturnType<typeof setTimeout> | undefined;
  $("q").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => search(false), 300); // search as you type, once the typing pauses
  });
  for (const id of ["strategy", "collection", "graph"]) $(id).addEventListener("change", () => search(false));
  $("more-results").addEventListener("click", () => void loadMore(main));
  $("tab-search").addEventListener("click", () => showTab("search"));
  $("tab-admin").addEventListener("click", () => showTab("admin"));
  $("admin-refresh").addEventListener("click", () => void refreshAdmin());
  $("admin-promote").addEventListener("click", () => void changePromotion(true));
  $("admin-demote").addEventListener("click", () => void changePromotion(false));

  document.body.dataset.ready = "true";
  // a link's query runs once the key question is answered, under the key then in use
  if (decided) void decided.then(() => { if (q && client) search(true); });
  else if (q && client) search(true);
}

start();

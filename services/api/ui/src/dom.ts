/** DOM helpers of the search page. Document text only ever reaches the page as text nodes
 * (`textContent`), never as markup: a stored `<script>` or `<img onerror>` shows as its text. */

type Child = Node | string | null | undefined | false;

/** `h("li", {class: "hit", "data-doc-id": id}, ...children)`: attributes are set with
 * setAttribute (never `on*` handlers from data), children strings become text nodes. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K, attrs: Record<string, string | undefined> = {}, ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined) el.setAttribute(k, v);
  for (const c of children) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

export function clear(el: Element): void {
  el.replaceChildren();
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

/** Decodes the character references of an HTML-escaped snippet into plain text. */
export function unescapeHtml(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, ref: string) => {
    if (ref[0] === "#") {
      const n = ref[1] === "x" || ref[1] === "X" ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10);
      return Number.isFinite(n) && n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : m;
    }
    return ENTITIES[ref.toLowerCase()] ?? m;
  });
}

/** A highlight snippet as the API sends it (HTML-escaped text with `<b>`/`<em>` around the
 * matched terms) rendered as text nodes and `<mark>` elements: the only markup honoured is
 * those tags; everything else is text. */
export function highlightNodes(snippet: string): Node[] {
  const out: Node[] = [];
  let marked = false;
  for (const part of snippet.split(/(<\/?(?:b|em|mark|strong)>)/i)) {
    if (/^<\/?(?:b|em|mark|strong)>$/i.test(part)) {
      marked = !part.startsWith("</");
      continue;
    }
    if (!part) continue;
    const text = document.createTextNode(unescapeHtml(part.replace(/<[^>]*>/g, "")));
    out.push(marked ? h("mark", {}, text) : text);
  }
  return out;
}

/** Any JSON value as a small table (objects), list (arrays) or text: for admin answers and
 * explain records whose shape grows with the API. */
export function jsonView(value: unknown, depth = 0): Node {
  if (value === null || value === undefined) return document.createTextNode("—");
  if (Array.isArray(value)) {
    if (!value.length) return document.createTextNode("[]");
    if (depth > 3) return document.createTextNode(JSON.stringify(value));
    return h("ul", {}, ...value.map((v) => h("li", {}, jsonView(v, depth + 1))));
  }
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    if (!entries.length) return document.createTextNode("{}");
    if (depth > 3) return document.createTextNode(JSON.stringify(value));
    return h("table", {}, h("tbody", {}, ...entries.map(([k, v]) =>
      h("tr", { "data-key": k }, h("th", { scope: "row" }, k), h("td", {}, jsonView(v, depth + 1))))));
  }
  if (typeof value === "number") return document.createTextNode(Number.isInteger(value) ? String(value) : value.toFixed(4));
  return document.createTextNode(String(value));
}

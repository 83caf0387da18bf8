// Type-checked only (npm run typecheck): the README's snippet compiles against the SDK's types.
import { Client, VibeError } from "../src/index.js";
import type { BulkDoc } from "../src/index.js";

declare const KEY: string;
declare const docs: BulkDoc[];

export async function readme(): Promise<void> {
  const vibe = new Client({ baseUrl: "http://127.0.0.1:8080", apiKey: KEY });
  await vibe.put("notes", "n1", { title: "Bicycle care", body: "How to repair a punctured tyre.", _acl: ["user:dev"] });
  const answer = await vibe.read({ collection: "notes", q: "repair tyre", semantic: { strategy: "hybrid" }, limit: 10 });
  console.log(answer.results.map((hit) => [hit.id, hit.score, hit.matchedBy]), answer.warming.message);
  for await (const { event, data } of vibe.readOnce({ collection: "notes", q: "fix a flat bike wheel" })) {
    if (event === "warming") console.log(data.message);
    else if (event !== "error") console.log(event, data.results.map((hit) => hit.id));
    else console.log(data.code);
  }
  await vibe.bulk("notes", docs, { batchSize: 500, onProgress: (p) => console.log(`${p.done}/${p.total}`) });
  try { await vibe.get("notes", "missing"); } catch (e) { if (e instanceof VibeError) console.log(e.code, e.status); }
  const cov = await vibe.coverage("notes");
  console.log(cov.indexedPct);
}

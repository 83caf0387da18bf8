// Builds the /ui page (services/api/ui/src → services/api/ui/dist): esbuild bundles app.ts with
// the SDK's source (one ES module, no runtime fetches elsewhere), index.html and style.css are
// copied, and so are swagger-ui-dist's bundle, stylesheet and icon for /docs. The build is committed so `make run` needs no Node; tests/e2e/test_ui_browser.py
// rebuilds into a temporary directory and checks the committed one is identical.
//   node scripts/build_ui.mjs [outdir]
import { copyFile, mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const ui = resolve(here, "../../../services/api/ui");
const out = resolve(process.argv[2] ?? join(ui, "dist"));

await mkdir(out, { recursive: true });
await build({
  entryPoints: [join(ui, "src/app.ts")],
  outfile: join(out, "app.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: ["es2022"],
  minify: true,
  sourcemap: false,
  legalComments: "none",
  logLevel: "warning",
  // resolve eventsource-parser from the SDK's own node_modules
  nodePaths: [resolve(here, "../node_modules")],
});
for (const f of ["index.html", "style.css"]) await copyFile(join(ui, "src", f), join(out, f));
// /docs serves Swagger UI from these copies (services/api/routes_ui.py), never from a CDN
const swagger = resolve(here, "../node_modules/swagger-ui-dist");
for (const f of ["swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"]) {
  await copyFile(join(swagger, f), join(out, f));
}
await copyFile(join(swagger, "LICENSE"), join(out, "swagger-ui.LICENSE")); // Apache-2.0: travels with the copy
console.log(`built ${out}`);

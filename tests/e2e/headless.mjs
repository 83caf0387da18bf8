// What the /ui browser scripts share: their environment (each names what it needs) and a
// headless Debian Chromium driven by the SDK's playwright-core (never a browser download).
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

/** The named variables of the environment; throws naming the first one missing. */
export function env(...names) {
  const out = {};
  for (const name of names) {
    if (!process.env[name]) throw new Error(`missing env ${name}`);
    out[name] = process.env[name];
  }
  return out;
}

/** A headless Chromium at `executablePath`, with the artifacts directory made. */
export async function launch(executablePath, sdkDir, artifacts) {
  mkdirSync(artifacts, { recursive: true });
  const { chromium } = createRequire(join(sdkDir, "package.json"))("playwright-core");
  return chromium.launch({
    executablePath, headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
}

// `bun tests/packaging/serve-registry.ts`: the test registry (registry.ts) serving dist/npm/*.tgz
// (`npm run npm-packages -- --pack`), stand-ins for the platform packages not there, and the packages'
// dependencies packed from node_modules, for trying installs by hand; Ctrl-C stops it:
//   npm install --registry http://127.0.0.1:PORT/ awrepl
//   NPM_CONFIG_REGISTRY=http://127.0.0.1:PORT/ deno run -A script.mjs     (import "npm:awrepl")
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { npmPack, standInPlatformPackages, startRegistry } from "./registry.ts";

const root = resolve(import.meta.dir, "..", "..");
const dir = join(root, "dist", "npm");
const tgz = existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".tgz")).map((f) => join(dir, f)) : [];
if (!tgz.length) {
  console.error("serve-registry: no dist/npm/*.tgz: run npm run npm-packages -- --pack first");
  process.exit(1);
}
const { version, dependencies } = JSON.parse(readFileSync(join(dir, "awrepl", "package.json"), "utf8")) as { version: string; dependencies?: object };
const scratch = mkdtempSync(join(tmpdir(), "awrepl-registry-"));
const built = tgz.map((f) => /awrepl-([a-z0-9]+-[a-z0-9]+)-\d/.exec(f)?.[1]).filter(Boolean);
const standIns = standInPlatformPackages(scratch, version, `${process.platform}-${process.arch}`).filter((f) => !built.some((b) => f.includes(`-${b}-`)));
const deps = Object.keys(dependencies ?? {}).map((d) => npmPack(join(root, "node_modules", d), scratch));
const registry = startRegistry([...tgz, ...standIns, ...deps]);
console.log(`serving ${tgz.length} packages (and ${standIns.length} stand-ins) at ${registry.url}`);
process.on("SIGINT", () => {
  registry.stop();
  rmSync(scratch, { recursive: true, force: true });
  process.exit(0);
});

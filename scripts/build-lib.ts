// `npm run build:lib`: the library for Node and Deno (the npm package's "import"/"default" condition):
//   dist/lib/mod.js        one ESM file bundled by Bun, with jsonc-parser inlined
//   dist/lib/runtime.py    beside it: lib/runtime/source.ts reads ./runtime.py next to the module
//                          outside Bun (under Bun it takes the text import, which the bundle inlines)
//   dist/types/lib/*.d.ts  the declarations, by tsc (tsconfig.lib.json)
//   dist/lib-inputs.json   the bundle's metafile: which sources the library is made of, which is also
//                          the list of TypeScript sources the npm package ships for Bun
// Bun itself imports the TypeScript sources (the "bun" condition); so does a checkout.
//
// A bundle, not tsc's JavaScript: the sources import ../../package.json with a JSON import attribute
// and runtime.py as text, relative to lib/, which a bundle inlines; and jsonc-parser's ESM modules
// import './scanner' without an extension, which Node's and Deno's loaders refuse.
import { spawnSync } from "node:child_process";
import { copyFileSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
export const LIB_DIR = join(root, "dist", "lib");
export const TYPES_DIR = join(root, "dist", "types");
export const LIB_INPUTS = join(root, "dist", "lib-inputs.json");

function run(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${r.status ?? r.signal ?? r.error})`);
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

export function buildLib(): void {
  for (const p of [LIB_DIR, TYPES_DIR, LIB_INPUTS]) rmSync(p, { recursive: true, force: true });
  // process.execPath: the bun running this script (the pinned devDependency under `npm run`).
  // --target=node: node: built-ins stay imports and the `typeof Bun` checks stay in (the Bun-only
  // paths are chosen at run time). --conditions=bun: "#jsonc-parse" (package.json "imports") bundles
  // jsonc-parser's ESM parser module as the executable does; the package entry is a UMD wrapper whose
  // require()s a bundle cannot follow ("Cannot find module './impl/format'" at run time).
  // --outdir, not --outfile: with --sourcemap, --outfile wrote the map next to the source.
  run(process.execPath, [
    "build",
    "lib/mod.ts",
    "--target=node",
    "--conditions=bun",
    "--format=esm",
    "--sourcemap=linked",
    "--outdir",
    "dist/lib",
    `--metafile=${LIB_INPUTS}`,
  ]);
  copyFileSync(join(root, "runtime.py"), join(LIB_DIR, "runtime.py"));
  run(join(root, "node_modules", ".bin", "tsc"), ["-p", "tsconfig.lib.json"]);
  // tsc keeps the sources' "./x.ts" in declarations; a consumer under moduleResolution node16 or
  // nodenext wants "./x.js" (which finds x.d.ts).
  for (const file of walk(TYPES_DIR).filter((f) => f.endsWith(".d.ts"))) {
    const text = readFileSync(file, "utf8");
    const fixed = text
      .replace(/(from\s+["']\.{1,2}\/[^"']+)\.ts(["'])/g, "$1.js$2")
      .replace(/(import\(["']\.{1,2}\/[^"']+)\.ts(["']\))/g, "$1.js$2");
    if (fixed !== text) writeFileSync(file, fixed);
  }
  const size = statSync(join(LIB_DIR, "mod.js")).size;
  console.log(`build-lib: dist/lib/mod.js (${(size / 1024).toFixed(0)} KiB), dist/lib/runtime.py, dist/types/lib/mod.d.ts`);
}

/** The repository files the library bundle is made of (the metafile's inputs, relative to the root). */
export function libInputs(): string[] {
  const meta = JSON.parse(readFileSync(LIB_INPUTS, "utf8")) as { inputs: Record<string, unknown> };
  return Object.keys(meta.inputs);
}

if (import.meta.main) buildLib();

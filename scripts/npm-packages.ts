// `npm run npm-packages [-- --pack]`: the npm packages, made from a release directory (`npm run release`
// writes dist/release/) and the library build (scripts/build-lib.ts), into dist/npm/:
//
//   dist/npm/awrepl/          the package `awrepl`: the launcher (bin/awrepl, npm/awrepl.cjs), the library
//                             (dist/lib/mod.js + dist/types for Node and Deno, the TypeScript sources for
//                             Bun), and one optional dependency per platform, pinned to this version;
//                             its dependencies: those the library's sources import (none today)
//   dist/npm/<os>-<cpu>/      `@awrepl/<os>-<cpu>` (linux-x64, linux-arm64, darwin-x64, darwin-arm64,
//                             win32-x64: Node's names, so the launcher and the library build the name
//                             from process.platform and process.arch): os/cpu(/libc) and bin/awrepl[.exe]
//
// Each executable is checked against the release's SHA256SUMS on the way in. --pack also runs `npm pack`
// in each directory (tarballs into the output directory). Publishing: `npm publish` in every platform
// directory first, then in dist/npm/awrepl; never publish awrepl when a platform package failed
// (npm skips a missing optional dependency, Deno refuses the whole install).
//
// Options: --release=DIR (default dist/release), --out=DIR (default dist/npm; emptied first),
// --only=linux-x64,... (platform packages to make; default all), --no-lib (reuse dist/lib, dist/types).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { buildLib, LIB_DIR, libInputs, TYPES_DIR } from "./build-lib.ts";
import { RELEASE_TARGETS } from "./release_targets.ts";

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
export const SCOPE = "@awrepl";

type Target = (typeof RELEASE_TARGETS)[number];
/** The npm name of a release target's platform: Node's process.platform-process.arch. */
export const npmPlatform = (t: Target) => `${t.npm.os}-${t.npm.cpu}`;

type RootManifest = {
  name: string;
  version: string;
  description?: string;
  license?: string;
  repository?: unknown;
  imports?: unknown;
  dependencies?: Record<string, string>;
};
const rootPkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as RootManifest;

function writeJson(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

function readSums(release: string): Map<string, string> {
  const file = join(release, "SHA256SUMS");
  if (!existsSync(file)) throw new Error(`${file} is missing: run npm run release first`);
  const map = new Map<string, string>();
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const m = /^([0-9a-f]{64}) [ *](.+)$/.exec(line.trim());
    if (m) map.set(m[2] as string, m[1] as string);
  }
  return map;
}

function walk(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? walk(p) : [p];
  });
}

/** Copies a repository file into the package directory at the same relative path. */
function copyInto(pkgDir: string, file: string): void {
  const dest = join(pkgDir, relative(root, file));
  mkdirSync(dirname(dest), { recursive: true });
  copyFileSync(file, dest);
}

const common = () => ({
  version: rootPkg.version,
  license: rootPkg.license,
  ...(rootPkg.repository ? { repository: rootPkg.repository } : {}),
});

function platformPackage(t: Target, sums: Map<string, string>, release: string, out: string): string {
  const src = join(release, t.file);
  const expected = sums.get(t.file);
  if (!expected || !existsSync(src)) throw new Error(`${src} is missing or not listed in SHA256SUMS`);
  const actual = createHash("sha256").update(readFileSync(src)).digest("hex");
  if (actual !== expected) throw new Error(`${src}: its SHA-256 ${actual} is not the listed ${expected}`);
  const name = npmPlatform(t);
  const dir = join(out, name);
  const exe = t.npm.os === "win32" ? "awrepl.exe" : "awrepl";
  mkdirSync(join(dir, "bin"), { recursive: true });
  copyFileSync(src, join(dir, "bin", exe));
  chmodSync(join(dir, "bin", exe), 0o755);
  writeJson(join(dir, "package.json"), {
    name: `${SCOPE}/${name}`,
    ...common(),
    description: `The awrepl executable for ${name} (installed by the awrepl package; not meant to be used directly).`,
    os: [t.npm.os],
    cpu: [t.npm.cpu],
    ...(t.npm.libc ? { libc: [t.npm.libc] } : {}),
    // Yarn PnP: keep the executable on disk.
    preferUnplugged: true,
    files: ["bin/"],
  });
  writeFileSync(
    join(dir, "README.md"),
    `# ${SCOPE}/${name}\n\nThe \`awrepl\` executable for ${name}. Install [awrepl](https://www.npmjs.com/package/awrepl) instead: it depends on this package where it fits.\n`,
  );
  return dir;
}

function topPackage(out: string): string {
  const dir = join(out, "awrepl");
  // The library's sources for Bun (the "bun" condition): exactly the repository files the bundle was
  // made of (lib/**/*.ts and runtime.py; not package.json, written below, nor node_modules), so no
  // test, CLI or supervisor module ships.
  const sources = libInputs()
    .filter((f) => f.startsWith("lib/") || f === "runtime.py")
    .map((f) => join(root, f));
  for (const f of [...sources, ...walk(LIB_DIR), ...walk(TYPES_DIR)]) copyInto(dir, f);
  for (const f of ["README.md", "LICENSE"]) if (existsSync(join(root, f))) copyInto(dir, join(root, f));
  mkdirSync(join(dir, "bin"), { recursive: true });
  copyFileSync(join(root, "npm", "awrepl.cjs"), join(dir, "bin", "awrepl"));
  chmodSync(join(dir, "bin", "awrepl"), 0o755);
  // The launcher is CommonJS without an extension, in a "type": "module" package.
  writeJson(join(dir, "bin", "package.json"), { type: "commonjs" });
  // The dependencies the library's sources import (the bundle inlines them; Bun's TypeScript path needs
  // them installed): those the metafile lists files of. Not commander, which only the CLI uses (the
  // executable carries its own copy); jsonc-parser only if the library reads config files.
  const used = new Set(libInputs().flatMap((f) => /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1] ?? []));
  const deps = Object.fromEntries(Object.entries(rootPkg.dependencies ?? {}).filter(([n]) => used.has(n)));
  const missing = [...used].filter((n) => !(n in deps));
  if (missing.length) throw new Error(`the library imports ${missing.join(", ")}, which package.json does not list as a dependency`);
  writeJson(join(dir, "package.json"), {
    name: rootPkg.name,
    ...common(),
    description: rootPkg.description,
    type: "module",
    bin: { awrepl: "bin/awrepl" },
    exports: {
      ".": {
        types: "./dist/types/lib/mod.d.ts",
        // Bun runs the TypeScript sources. Deno does not: it refuses TypeScript under node_modules
        // (ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING), so it takes the JavaScript build, as Node does.
        bun: "./lib/mod.ts",
        import: "./dist/lib/mod.js",
        default: "./dist/lib/mod.js",
      },
      "./package.json": "./package.json",
    },
    types: "./dist/types/lib/mod.d.ts",
    // "#jsonc-parse" (lib/settings/config.ts) for the sources under Bun, when they need jsonc-parser.
    ...(rootPkg.imports && used.has("jsonc-parser") ? { imports: rootPkg.imports } : {}),
    engines: { node: ">=20" },
    ...(Object.keys(deps).length ? { dependencies: deps } : {}),
    optionalDependencies: Object.fromEntries(RELEASE_TARGETS.map((t) => [`${SCOPE}/${npmPlatform(t)}`, rootPkg.version])),
    files: ["bin/", "lib/", "runtime.py", "dist/lib/", "dist/types/", "README.md", "LICENSE"],
  });
  return dir;
}

function pack(dir: string, out: string): string {
  const r = spawnSync("npm", ["pack", "--json", "--pack-destination", out], { cwd: dir, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`npm pack in ${dir} failed: ${r.stderr}`);
  const [info] = JSON.parse(r.stdout) as { filename: string; size: number; unpackedSize: number; entryCount: number }[];
  if (!info) throw new Error(`npm pack in ${dir} said nothing`);
  const mb = (n: number) => `${(n / 1048576).toFixed(1)} MiB`;
  console.log(`npm-packages: ${join(out, info.filename)} (${mb(info.size)} packed, ${mb(info.unpackedSize)} unpacked, ${info.entryCount} files)`);
  return join(out, info.filename);
}

export type NpmPackagesOptions = {
  /** Where the release's executables and SHA256SUMS are (default dist/release). */
  release?: string;
  /** Where the package directories (and tarballs) go (default dist/npm; emptied first). */
  out?: string;
  /** Also `npm pack` each directory; returns the tarballs instead of the directories. */
  pack?: boolean;
  /** Build the library first (default true). */
  lib?: boolean;
  /** Only these platform packages (default all). */
  only?: string[];
};

export function buildNpmPackages(options: NpmPackagesOptions = {}): string[] {
  const release = options.release ?? join(root, "dist", "release");
  const out = options.out ?? join(root, "dist", "npm");
  const sums = readSums(release);
  const unknown = options.only?.filter((p) => !RELEASE_TARGETS.some((t) => npmPlatform(t) === p)) ?? [];
  if (unknown.length) throw new Error(`--only: no platform ${unknown.join(", ")} (there are ${RELEASE_TARGETS.map(npmPlatform).join(", ")})`);
  if (options.lib !== false) buildLib();
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const targets = RELEASE_TARGETS.filter((t) => !options.only || options.only.includes(npmPlatform(t)));
  const dirs = [topPackage(out), ...targets.map((t) => platformPackage(t, sums, release, out))];
  for (const d of dirs) console.log(`npm-packages: ${d}/`);
  return options.pack ? dirs.map((d) => pack(d, out)) : dirs;
}

if (import.meta.main) {
  const args = process.argv.slice(2);
  const value = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
  const known = ["--pack", "--no-lib"];
  const bad = args.filter((a) => !known.includes(a) && !/^--(only|release|out)=/.test(a));
  if (bad.length) {
    console.error(`npm-packages: unknown argument ${bad.join(" ")} (takes --pack, --no-lib, --only=P,..., --release=DIR, --out=DIR)`);
    process.exit(2);
  }
  try {
    buildNpmPackages({
      pack: args.includes("--pack"),
      lib: !args.includes("--no-lib"),
      only: value("only")?.split(","),
      release: value("release"),
      out: value("out"),
    });
  } catch (err) {
    console.error(`npm-packages: ${(err as Error).message}`);
    process.exit(1);
  }
}

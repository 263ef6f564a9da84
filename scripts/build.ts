// `npm run build`: compile main.ts into one self-contained executable, dist/awrepl.
// `npm run release`: the same for every supported platform, into dist/release/ (what a GitHub release
// carries; install/install.sh and the npm packages of scripts/npm-packages.ts take it from there):
//   awrepl-<os>-<arch>[.exe]       the executables (os: linux, darwin, windows; arch: x64, arm64)
//   awrepl-<os>-<arch>[.exe].gz    the same, gzipped: about half the download (install.sh takes it)
//   install.sh, install.ps1        the installers, their default version set to this release's
//   SHA256SUMS                     every file above, `HASH  NAME` (sha256sum -c and shasum -c read it)
//   wheels/                        the Python wheels, one per executable built (scripts/wheels.ts)
//
// The flags (docs/architecture.md, "Performance rules"; each measured here):
//   --bytecode            commander and node:net each cost 10–25 ms per start without it
//   --format=esm          --bytecode breaks top-level await without it
//   --sourcemap           stack traces of an internal error point at the TypeScript source
//   --no-compile-autoload-dotenv / --no-compile-autoload-bunfig
//                         a stray .env or bunfig.toml in the user's directory must not change the binary
// plus one addition, also measured: --splitting. Without it every node: built-in that any module
// imports (child_process, fs, net, util, ...) and every module behind a dynamic import() is loaded
// at start; measured here on `awrepl -s s run "1+1"`, that is 2–3 ms of a ~14 ms call (the bare Bun
// runtime takes ~6 ms). With it, a dynamically imported module and its built-ins load only when used.
// And two start-up aids for the short-lived CLI, both measured on the warm shell call (~0.5 ms each):
//   --bytecode-order=scripts/bytecode-order.txt   the bytecode a warm `awrepl -s s run "1+1"` uses is laid
//                         out together at the front (a profile of an older build still applies;
//                         `bun scripts/build.ts --record-order` records a fresh one)
//   --compile-jit-policy=10   run-once start-up code stays in the interpreter instead of tiering up;
//                         the long-lived processes (supervisor, serve) set the normal policy back
// The binary is not stripped (stripping breaks the embedded payload).
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { spawnSync } from "node:child_process";
import { gzipSync } from "node:zlib";
import { nativeReleaseFile, RELEASE_TARGETS } from "./release_targets.ts";

export { nativeReleaseFile, RELEASE_TARGETS };

const root = resolve(dirname(new URL(import.meta.url).pathname), "..");
const ORDER_FILE = join(root, "scripts", "bytecode-order.txt");

export const BUILD_FLAGS = [
  "--compile",
  "--minify",
  "--bytecode",
  "--format=esm",
  "--sourcemap",
  "--splitting",
  "--no-compile-autoload-dotenv",
  "--no-compile-autoload-bunfig",
  "--compile-jit-policy=10",
];

/** The flags plus the bytecode layout profile, when there is one. */
function buildFlags(): string[] {
  return existsSync(ORDER_FILE) ? [...BUILD_FLAGS, `--bytecode-order=${ORDER_FILE}`] : BUILD_FLAGS;
}

/**
 * Compiles main.ts into `outfile`. Bun writes chunk source maps beside its output file (the binary
 * carries its own copy), so it compiles in a scratch directory and only the executable is moved out;
 * the rename also means a concurrent build or a test running the old binary never sees a partial file.
 */
function compile(outfile: string, target?: string): { ok: boolean; output: string } {
  mkdirSync(dirname(outfile), { recursive: true });
  const scratch = mkdtempSync(join(dirname(outfile), ".build-"));
  try {
    const tmp = join(scratch, basename(outfile));
    const args = ["build", ...buildFlags(), ...(target ? [`--target=${target}`] : []), "main.ts", "--outfile", tmp];
    // process.execPath is the bun running this script (the pinned devDependency under `npm run`).
    const r = spawnSync(process.execPath, args, { cwd: root, encoding: "utf8" });
    const output = `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? String(r.error) : ""}`;
    // Cross-compiling to Windows appends .exe when the name lacks it.
    const produced = [tmp, `${tmp}.exe`].find((p) => existsSync(p));
    if (r.status !== 0 || !produced) return { ok: false, output };
    renameSync(produced, outfile);
    return { ok: true, output };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

function mib(path: string): string {
  return `${(statSync(path).size / 1024 / 1024).toFixed(1)} MiB`;
}

export const BINARY = join(root, "dist", process.platform === "win32" ? "awrepl.exe" : "awrepl");

/** Compiles dist/awrepl (atomically: see compile()). */
export function buildBinary(): { ok: boolean; output: string } {
  return compile(BINARY);
}

function buildLocal(): number {
  const r = buildBinary();
  if (!r.ok) {
    process.stderr.write(r.output);
    process.stderr.write("build: bun build --compile failed\n");
    return 1;
  }
  console.log(`build: dist/awrepl (${mib(BINARY)})`);
  return 0;
}

async function buildRelease(): Promise<number> {
  const dir = join(root, "dist", "release");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const failed: string[] = [];
  for (const { target, file } of RELEASE_TARGETS) {
    const out = join(dir, file);
    const r = compile(out, target);
    if (!r.ok) {
      const reason = r.output.trim().split("\n").filter(Boolean).slice(-1)[0] ?? "unknown error";
      failed.push(`${target}: ${reason}`);
      console.error(`release: ${target} FAILED (could not build or fetch its runtime): ${reason}`);
      continue;
    }
    console.log(`release: ${file} (${mib(out)})`);
  }
  const listed = finishRelease(dir);
  console.log(`release: ${RELEASE_TARGETS.length - failed.length}/${RELEASE_TARGETS.length} targets, ${listed.length} files in dist/release/ (sums in SHA256SUMS)`);
  // The Python wheels, one per executable built, into dist/release/wheels/ (scripts/wheels.ts).
  const wheelStatus = (await import("./wheels.ts")).writeReleaseWheels(dir, "release: wheels");
  if (failed.length) {
    console.error(`release: not built:\n  ${failed.join("\n  ")}`);
    return 1;
  }
  return wheelStatus;
}

/** The line of each installer that names its default version: the release copy names its own. */
const INSTALLER_VERSION_LINES: Record<string, [string, (v: string) => string]> = {
  "install.sh": ["DEFAULT_VERSION=latest ", (v) => `DEFAULT_VERSION=${v} `],
  "install.ps1": ["} else { 'latest' }),", (v) => `} else { '${v}' }),`],
};

/**
 * Completes a release directory that holds the executables (any of RELEASE_TARGETS' files): a .gz copy
 * of each (gzip -9 by default: linux-x64 107 -> 50 MiB; xz would save 12 MiB more but take 10x longer
 * and is not on every machine), the installers with this version as their default, and SHA256SUMS
 * listing all of them. Returns the files listed. The tests make a release of the native executable
 * with it (tests/packaging/release.ts), so what they install has exactly a release's shape.
 */
export function finishRelease(dir: string, options: { gzipLevel?: number } = {}): string[] {
  const sha256 = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex");
  const sums: string[] = [];
  for (const { file } of RELEASE_TARGETS) {
    const out = join(dir, file);
    if (!existsSync(out)) continue;
    const bytes = readFileSync(out);
    const gz = gzipSync(bytes, { level: options.gzipLevel ?? 9 });
    writeFileSync(`${out}.gz`, gz);
    sums.push(`${sha256(bytes)}  ${file}`, `${sha256(gz)}  ${file}.gz`);
  }
  const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
  for (const [script, [line, pinned]] of Object.entries(INSTALLER_VERSION_LINES)) {
    const source = readFileSync(join(root, "install", script), "utf8");
    if (!source.includes(line)) throw new Error(`install/${script} no longer has its default version line (${line.trim()})`);
    const bytes = Buffer.from(source.replace(line, pinned(version)));
    writeFileSync(join(dir, script), bytes, { mode: 0o755 });
    sums.push(`${sha256(bytes)}  ${script}`);
  }
  writeFileSync(join(dir, "SHA256SUMS"), `${sums.join("\n")}\n`);
  return sums.map((l) => l.slice(66));
}

/**
 * Builds, records which bytecode a warm `awrepl -s s run "1+1"` uses (BUN_BYTECODE_ORDER_OUT) into
 * scripts/bytecode-order.txt, and builds again with it.
 */
function recordOrder(): number {
  rmSync(ORDER_FILE, { force: true });
  if (buildLocal() !== 0) return 1;
  const home = mkdtempSync(join(dirname(BINARY), ".order-home-"));
  const env = { ...process.env, AWREPL_HOME: home };
  try {
    const call = (extra: Record<string, string> = {}) => spawnSync(BINARY, ["-s", "order", "run", "1+1"], { env: { ...env, ...extra }, encoding: "utf8", timeout: 60_000 });
    const warm = call();
    if (warm.status !== 0) {
      process.stderr.write(`build: the warm-up call failed: ${warm.stderr}\n`);
      return 1;
    }
    const recorded = call({ BUN_BYTECODE_ORDER_OUT: ORDER_FILE });
    if (recorded.status !== 0 || !existsSync(ORDER_FILE)) {
      process.stderr.write(`build: recording the bytecode order failed: ${recorded.stderr}\n`);
      return 1;
    }
  } finally {
    spawnSync(BINARY, ["daemon", "stop"], { env, timeout: 30_000 });
    rmSync(home, { recursive: true, force: true });
  }
  console.log(`build: recorded ${ORDER_FILE}`);
  return buildLocal();
}

if (import.meta.main) {
  const args = process.argv;
  process.exit(args.includes("--release") ? await buildRelease() : args.includes("--record-order") ? recordOrder() : buildLocal());
}

// runtime.py (at the repository's root), embedded in the compiled binary as text, written on first use to
// <state>/runtime/runtime-<sha256 prefix>.py (temp file then rename), and compiled once per
// interpreter to runtime-<hash>-<cache tag>.pyc so a worker's start does not pay for compiling the
// runtime (PYTHONDONTWRITEBYTECODE is often set, and the cache file is not on an import path anyway).
// A remote command (ssh, docker exec) gets the source over its stdin through the runtime's bootstrap
// (how a worker is launched: lib/worker/launch.ts).
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, renameSync } from "node:fs";
import { writeFileAtomic } from "../core/files.ts";
import { join } from "node:path";
import { AwreplError } from "../core/errors.ts";
import { ensurePrivateDir } from "../settings/home.ts";

export type RuntimeSource = { text: string; bytes: Buffer; hash: string };

let loaded: Promise<RuntimeSource> | null = null;

/** The runtime's source (embedded under Bun, read beside the bundle under Node). */
export function runtimeSource(): Promise<RuntimeSource> {
  loaded ??= loadSource().then((text) => {
    const bytes = Buffer.from(text, "utf8");
    return { text, bytes, hash: createHash("sha256").update(bytes).digest("hex").slice(0, 16) };
  });
  return loaded;
}

async function loadSource(): Promise<string> {
  if (typeof Bun !== "undefined") {
    try {
      // A literal specifier: `bun build --compile` embeds the file in the binary.
      // @ts-ignore -- a text import; TypeScript has no declaration for .py files.
      const mod = (await import("../../runtime.py", { with: { type: "text" } })) as { default: string };
      if (typeof mod.default === "string") return mod.default;
    } catch {
      // Fall through to reading the file.
    }
  }
  // Beside the bundle (dist/lib/mod.js: scripts/build-lib.ts copies it there); from the source tree
  // (this module is lib/runtime/source.ts), the repository root's, and no guess anywhere else.
  let missing: unknown;
  const fromSources = import.meta.url.endsWith("/lib/runtime/source.ts");
  for (const path of fromSources ? ["../../runtime.py"] : ["./runtime.py"]) {
    try {
      return readFileSync(new URL(path, import.meta.url), "utf8");
    } catch (cause) {
      missing = cause;
    }
  }
  throw new AwreplError("internal", "The runtime source (runtime.py) is missing from this build", { cause: missing });
}

function runtimeDir(home: string): string {
  return ensurePrivateDir(join(home, "runtime"));
}

/** The runtime written to the state directory under its content hash; written once. */
export async function runtimeFile(home: string): Promise<string> {
  const src = await runtimeSource();
  const path = join(runtimeDir(home), `runtime-${src.hash}.py`);
  if (!existsSync(path)) writeFileAtomic(path, src.bytes);
  return path;
}

const COMPILE = "import py_compile,sys;py_compile.compile(sys.argv[1],cfile=sys.argv[2],dfile=sys.argv[1],doraise=True)";
/** What compiling the runtime needs to know of an interpreter (lib/worker/interpreter.ts resolves it). */
export type CompilingInterpreter = { local: boolean; executable?: string | null; cacheTag?: string | null };

const compiling = new Map<string, Promise<string | null>>();

/**
 * The runtime's bytecode for this interpreter, compiled once (py_compile writes it atomically).
 * Null when compiling fails: the worker then runs the source.
 */
export async function runtimeBytecode(home: string, interpreter: CompilingInterpreter): Promise<string | null> {
  if (!interpreter.local || !interpreter.executable || !interpreter.cacheTag) return null;
  const py = await runtimeFile(home);
  const pyc = py.replace(/\.py$/, `-${interpreter.cacheTag}.pyc`);
  if (existsSync(pyc)) return pyc;
  let job = compiling.get(pyc);
  if (!job) {
    job = new Promise<string | null>((resolve) => {
      const tmp = `${pyc}.${process.pid}.tmp`;
      execFile(interpreter.executable as string, ["-c", COMPILE, py, tmp], { timeout: 30_000 }, (err) => {
        if (err) return resolve(null);
        try {
          renameSync(tmp, pyc);
          resolve(pyc);
        } catch {
          resolve(null);
        }
      });
    });
    compiling.set(pyc, job);
    job.finally(() => compiling.delete(pyc));
  }
  return job;
}

/**
 * The one-line bootstrap runtime.py defines as `BOOTSTRAP = ("..." "...")`: it reads a length line,
 * then that many bytes of source, and execs them. Read from the embedded source so the two never drift.
 */
export function bootstrapLine(source: string): string {
  const m = /^BOOTSTRAP\s*=\s*\(?((?:\s*"(?:[^"\\\n]|\\.)*")+)/m.exec(source);
  const literals = m?.[1] ? [...m[1].matchAll(/"((?:[^"\\\n]|\\.)*)"/g)].map((l) => (l[1] ?? "").replace(/\\(.)/g, "$1")) : [];
  const line = literals.join("");
  if (!line) throw new AwreplError("internal", "runtime.py defines no BOOTSTRAP line; remote interpreters cannot be used");
  return line;
}

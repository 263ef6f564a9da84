// The directories a sandboxed session has been able to write, recorded in the state directory (which
// no sandbox can see) before its worker starts. What lies under them may have been planted by code
// that was meant to stay in the sandbox, so an unsandboxed awrepl never lets it choose what runs: a
// `./.venv`, a `$VIRTUAL_ENV` or a `python3` on PATH found there is passed over, and a project
// `awrepl.jsonc` there is used only once `awrepl trust` recorded its content (trust.ts). Explicit
// choices (`--python`, AWREPL_PYTHON, the user's own config) are the user's word and stay as they are.
// A record is never dropped by itself: nobody but the user can say a tree was reviewed.
// Small and without static node: imports: loadConfig reaches it on every command that finds a project file.
import { builtin, joinPath as join } from "../core/fastio.ts";
import { ensurePrivateDir } from "./home.ts";

/** Writable path (real) → when a sandbox was first given it (ISO time). */
type Records = Record<string, string>;

export function sandboxWrittenFile(home: string): string {
  return join(home, "sandbox-written.json");
}

function readRecords(home: string): Records {
  try {
    const value: unknown = JSON.parse(builtin("node:fs").readFileSync(sandboxWrittenFile(home), "utf8"));
    if (typeof value !== "object" || value === null || Array.isArray(value)) return {};
    return Object.fromEntries(Object.entries(value).filter(([, v]) => typeof v === "string")) as Records;
  } catch {
    return {};
  }
}

/**
 * Records `dirs` (real paths) as written by a sandbox. Called before the sandbox starts, and a failure
 * to record fails the start: a sandbox whose writes would go unremembered must not run.
 */
export async function markSandboxWritten(home: string, dirs: readonly string[]): Promise<void> {
  const records = readRecords(home);
  const missing = dirs.filter((d) => !(d in records));
  if (missing.length === 0) return;
  const now = new Date().toISOString();
  for (const d of missing) records[d] = now;
  const { writeFileAtomic } = await import("../core/files.ts");
  writeFileAtomic(sandboxWrittenFile(ensurePrivateDir(home)), `${JSON.stringify(records, null, 2)}\n`);
}

/**
 * The recorded directory `path` lies in (as given, and as its real path: a link in or out of one
 * counts), or null. A path that cannot be resolved is judged as given.
 */
export function sandboxWrittenRoot(home: string, path: string): string | null {
  const records = readRecords(home);
  const roots = Object.keys(records);
  if (roots.length === 0) return null;
  const { realpathSync } = builtin("node:fs");
  const { sep } = builtin("node:path");
  const candidates = [path];
  try {
    candidates.push(realpathSync(path));
  } catch {
    // missing or unreadable: the path as given is all there is to judge
  }
  for (const p of candidates) {
    for (const root of roots) if (p === root || p.startsWith(root.endsWith(sep) ? root : root + sep)) return root;
  }
  return null;
}

/** A note for the user: what was passed over, why, and how to use it anyway. */
export function passedOver(what: string, root: string, howToUse: string): string {
  return `passed over ${what}: it lies in ${root}, which a sandboxed session could write (it may have been planted there); ${howToUse}`;
}

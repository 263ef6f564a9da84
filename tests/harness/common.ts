// The test harness's basics, shared by every suite (lib/ unit tests, tests/runtime, tests/e2e): the
// interpreter tests run, the repository root, private state directories, and waiting with a timeout.
// The rest of the harness: runtime.ts (runtime.py as a subprocess), session.ts (library sessions),
// binary.ts (the compiled executable end to end), tmux.ts (a real terminal). mod.ts exports it all.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

/** Debian's real interpreter (python3 on PATH is a slow pyenv shim here); AWREPL_TEST_PYTHON overrides it. */
export const PYTHON = process.env.AWREPL_TEST_PYTHON || "/usr/bin/python3";

/** The repository's root. */
export const ROOT = resolve(import.meta.dir, "../..");

/** A fresh private directory (an AWREPL_HOME) for one test; remove() deletes it. */
export function tempHome(prefix = "awrepl-test-"): { home: string; remove(): void } {
  const home = mkdtempSync(join(tmpdir(), prefix));
  return { home, remove: () => rmSync(home, { recursive: true, force: true }) };
}

/** True while a process with this pid exists (zombies included: they are not reaped yet). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Waits until `check` is true, polling every 10 ms, or throws after timeoutMs. */
export async function waitFor(check: () => boolean, timeoutMs = 5000, what = "condition"): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

const imports = new Map<string, boolean>();

/** True when `python` can import `module` (optional libraries: matplotlib, pandas, IPython); asked once per pair. */
export function pythonHas(module: string, python = PYTHON): boolean {
  const key = `${python}\0${module}`;
  let has = imports.get(key);
  if (has === undefined) {
    has = spawnSync(python, ["-c", `import ${module}`], { stdio: "ignore", timeout: 60_000 }).status === 0;
    imports.set(key, has);
  }
  return has;
}

/** True where a test can mount a tmpfs (root on Linux): what withFullDisk needs. */
export const CAN_MOUNT_TMPFS = process.platform === "linux" && process.getuid?.() === 0;

/**
 * Runs `fn` with a private directory (0700) on a tiny tmpfs that is full, so every write in it fails
 * with ENOSPC; unmounts it afterwards. Needs CAN_MOUNT_TMPFS.
 */
export async function withFullDisk<T>(fn: (dir: string) => T | Promise<T>): Promise<T> {
  const mount = mkdtempSync(join(tmpdir(), "awrepl-full-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", mount]);
  try {
    const dir = join(mount, "home");
    mkdirSync(dir, { mode: 0o700 });
    try {
      writeFileSync(join(mount, "filler"), Buffer.alloc(256 * 1024));
    } catch {
      // Full: what was wanted.
    }
    return await fn(dir);
  } finally {
    execFileSync("umount", [mount]);
    rmSync(mount, { recursive: true, force: true });
  }
}

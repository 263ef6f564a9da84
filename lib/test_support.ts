// Shared by the library's tests: a private state directory per test, the default test interpreter,
// and checks on processes. Not part of the package API.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AwreplError } from "./errors.ts";

/** Debian's real interpreter (python3 on PATH is a slow pyenv shim here). */
export const PYTHON = process.env.AWREPL_TEST_PYTHON ?? "/usr/bin/python3";

/** A fresh AWREPL_HOME for one test; remove() deletes it. */
export function tempHome(): { home: string; remove(): void } {
  const home = mkdtempSync(join(tmpdir(), "awrepl-test-"));
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

/** Waits until `check` is true, polling every 10 ms, or throws after timeoutMs. */
export async function waitFor(check: () => boolean, timeoutMs = 5000, what = "condition"): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The AwreplError `promise` rejects with; anything else (a value, another error) fails the test. */
export async function rejection(promise: Promise<unknown>): Promise<AwreplError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof AwreplError) return err;
    throw new Error(`Expected an AwreplError, got ${String(err)}`);
  }
  throw new Error("Expected a rejection, got a value");
}

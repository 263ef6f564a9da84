// Shared by the library's tests: a private state directory per test, the default test interpreter,
// and checks on processes. Not part of the package API.
import { afterEach, beforeEach } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AwreplError } from "../../lib/core/errors.ts";
import { ReplSession, type ReplSessionOptions } from "../../lib/session/session.ts";

/** Debian's real interpreter (python3 on PATH is a slow pyenv shim here). */
export const PYTHON = process.env.AWREPL_TEST_PYTHON ?? "/usr/bin/python3";

/** A fresh AWREPL_HOME for one test; remove() deletes it. */
export function tempHome(): { home: string; remove(): void } {
  const home = mkdtempSync(join(tmpdir(), "awrepl-test-"));
  return { home, remove: () => rmSync(home, { recursive: true, force: true }) };
}

/**
 * For a test file of ReplSession tests (call once at its top level): each test gets a fresh state
 * directory (`fixture.tmp.home`), and every session started with `fixture.start()` is closed after it.
 */
export function useSessions(defaultId: string) {
  const sessions: ReplSession[] = [];
  const fixture = {
    tmp: undefined as unknown as ReturnType<typeof tempHome>,
    async start(options: ReplSessionOptions = {}, id = defaultId): Promise<ReplSession> {
      const s = await ReplSession.start(id, { python: PYTHON, home: fixture.tmp.home, ...options });
      sessions.push(s);
      return s;
    },
  };
  beforeEach(() => {
    fixture.tmp = tempHome();
  });
  afterEach(async () => {
    await Promise.all(sessions.splice(0).map((s) => s.close()));
    fixture.tmp.remove();
  });
  return fixture;
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

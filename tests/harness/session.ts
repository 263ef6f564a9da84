// Library sessions in tests: a fixture that gives each test a private state directory and closes the
// sessions it started, and the AwreplError a promise rejects with.
import { afterEach, beforeEach } from "bun:test";
import { AwreplError } from "../../lib/core/errors.ts";
import { ReplSession, type ReplSessionOptions } from "../../lib/session/session.ts";
import { PYTHON, tempHome } from "./common.ts";

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

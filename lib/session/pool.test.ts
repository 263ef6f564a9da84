import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { AwreplError } from "../core/errors.ts";
import { SessionPool } from "./pool.ts";
import { alive, PYTHON, tempHome, waitFor } from "../../tests/harness/mod.ts";

let tmp: ReturnType<typeof tempHome>;
let pool: SessionPool;

beforeEach(() => {
  tmp = tempHome();
  pool = new SessionPool({ python: PYTHON, home: tmp.home });
});
afterEach(async () => {
  await pool.closeAll();
  tmp.remove();
});

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AwreplError);
    return (err as AwreplError).code;
  }
  throw new Error("expected a throw");
}

describe("SessionPool", () => {
  test("createSession returns the id (as the original's create_session), generated or given; getSession takes it", async () => {
    const a = await pool.createSession();
    const b = await pool.createSession("agent-2");
    expect(typeof a).toBe("string");
    expect(a).toMatch(/^session-[0-9a-f]{8}$/);
    expect(b).toBe("agent-2");
    expect(pool.listSessions().sort()).toEqual([a, "agent-2"].sort());
    expect(pool.getSession(b).id).toBe("agent-2");
    expect((await pool.getSession(a).execute("6 * 7")).value).toBe("42");
  });

  test("a duplicate id throws session_exists, also when created concurrently", async () => {
    await pool.createSession("dup");
    await expect(pool.createSession("dup")).rejects.toMatchObject({ code: "session_exists" });
    const results = await Promise.allSettled([pool.createSession("race"), pool.createSession("race")]);
    expect(results.filter((r) => r.status === "fulfilled").length).toBe(1);
    expect(results.filter((r) => r.status === "rejected").length).toBe(1);
  });

  test("a missing id throws session_not_found", async () => {
    expect(codeOf(() => pool.getSession("nope"))).toBe("session_not_found");
    await expect(pool.deleteSession("nope")).rejects.toMatchObject({ code: "session_not_found" });
  });

  test("sessions are isolated", async () => {
    const a = pool.getSession(await pool.createSession("a"));
    const b = pool.getSession(await pool.createSession("b"));
    await a.execute("secret = 1");
    expect((await a.execute("secret")).value).toBe("1");
    const r = await b.execute("secret");
    expect(r.status).toBe("error");
    expect(r.exception).toStartWith("NameError");
  });

  test("deleteSession and closeAll end the workers", async () => {
    const a = pool.getSession(await pool.createSession("a"));
    const b = pool.getSession(await pool.createSession("b"));
    const pids = [a.pid ?? 0, b.pid ?? 0];
    await pool.deleteSession("a");
    expect(pool.listSessions()).toEqual(["b"]);
    await waitFor(() => !alive(pids[0] ?? 0), 5000, "session a's worker to exit");
    await pool.closeAll();
    expect(pool.listSessions()).toEqual([]);
    await waitFor(() => !alive(pids[1] ?? 0), 5000, "session b's worker to exit");
  });
});

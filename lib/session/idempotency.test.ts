// The idempotency keys of one session: once per key, the same code only, bounded by count and age
// (each drop remembered and said), saved and read back with the snapshot's file.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { IDEMPOTENCY } from "../core/limits.ts";
import type { ExecResult } from "../protocol/result.ts";
import { IdempotencyKeys } from "./idempotency.ts";

function result(value: string): ExecResult {
  return { stdout: "", stderr: "", value, exception: null, traceback: "", duration_ms: 1, truncated: false, truncated_bytes: 0, status: "ok", session: "s", display: [], notice: "first call's news" };
}

function finish(keys: IdempotencyKeys, key: string, value: string, now?: number): void {
  const turn = keys.claim(key, `code ${key}`, now);
  if (!turn.run) throw new Error(`${key} was seen before`);
  turn.finish(result(value));
}

describe("IdempotencyKeys", () => {
  test("a repeat gets the first result (without its notice), waiting while it runs; other code is refused; a call that never ran leaves nothing", async () => {
    const keys = new IdempotencyKeys();
    const first = keys.claim("k", "x += 1");
    if (!first.run) throw new Error("the first call must run");
    const repeat = keys.claim("k", "x += 1");
    expect(repeat.run).toBe(false);
    expect(() => keys.claim("k", "x = 0")).toThrow(/"k" was used for other code/);
    first.finish(result("1"));
    if (repeat.run) throw new Error("unreachable");
    expect(await repeat.result).toMatchObject({ value: "1" });
    expect((await repeat.result)?.notice).toBeUndefined();
    const never = keys.claim("n", "y");
    if (!never.run) throw new Error("the first call must run");
    never.forget();
    expect(keys.lookup("n")).toMatchObject({ state: "dropped", reason: expect.stringContaining("never ran") });
    expect(keys.claim("n", "y").run).toBe(true);
    for (const bad of ["", "k".repeat(IDEMPOTENCY.maxKeyLength + 1), 3]) expect(() => keys.claim(bad, "x")).toThrow(/idempotency key/);
  });

  test("bounded by count and age; each dropped key is said when asked for, and to onDrop", () => {
    const keys = new IdempotencyKeys();
    const dropped: string[] = [];
    keys.onDrop = (key) => dropped.push(key);
    const t0 = 1_000_000;
    for (let i = 0; i <= IDEMPOTENCY.keysKept; i++) finish(keys, `k${i}`, String(i), t0);
    expect(keys.size).toBe(IDEMPOTENCY.keysKept);
    expect(dropped).toEqual(["k0"]);
    expect(keys.lookup("k0")).toMatchObject({ state: "dropped", reason: expect.stringContaining(`last ${IDEMPOTENCY.keysKept}`) });
    expect(keys.lookup("k1")).toMatchObject({ state: "done" });
    expect(keys.lookup("k1", Date.now() + IDEMPOTENCY.maxAgeMs + 1)).toMatchObject({ state: "dropped", reason: expect.stringContaining("older than 24 h") });
    expect(keys.lookup("never-seen")).toBeNull();
  });

  test("saved (0600) and read back: a repeat after a restart replays", () => {
    const dir = mkdtempSync(join(tmpdir(), "awrepl-keys-"));
    try {
      const keys = new IdempotencyKeys();
      finish(keys, "a", "41");
      const path = join(dir, "keys.json");
      keys.save(path);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      const again = new IdempotencyKeys();
      expect(again.load(path)).toBe(1);
      expect(again.claim("a", "code a").run).toBe(false);
      expect(() => again.claim("a", "other")).toThrow(/other code/);
      expect(new IdempotencyKeys().load(join(dir, "missing.json"))).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

import { describe, expect, test } from "bun:test";
import { DEFAULTS, LIMIT_KEYS, MAX_DELAY_MS, parseCount, resolveLimits } from "./limits.ts";

describe("resolveLimits", () => {
  test("every limit, the defaults where no layer sets one; a later layer beats an earlier one, undefined sets nothing", () => {
    const none = resolveLimits();
    for (const key of LIMIT_KEYS) expect(none[key]).toBe(DEFAULTS[key]);
    const limits = resolveLimits({ timeoutMs: 5_000, maxOutputBytes: 100, graceMs: 7 }, { timeoutMs: 0, maxOutputBytes: undefined, displayMaxEntries: 3 });
    expect(limits).toEqual({ ...none, timeoutMs: 0, maxOutputBytes: 100, graceMs: 7, displayMaxEntries: 3 });
    // A layer may be a whole config: only the limits are taken.
    const config = { ...DEFAULTS, idleExitMs: 1 };
    expect(Object.keys(resolveLimits(config)).sort()).toEqual([...LIMIT_KEYS].sort());
  });

  test("a bad value in any layer is a usage error naming its key", () => {
    expect(() => resolveLimits({ timeoutMs: 1 }, { graceMs: -1 })).toThrow("graceMs must be a non-negative number");
    expect(() => resolveLimits({ timeoutMs: MAX_DELAY_MS + 1 })).toThrow(`timeoutMs must be at most ${MAX_DELAY_MS} ms`);
  });
});

test("parseCount reads a flag's count by what it is: a wait is a duration, an image cap a byte count", () => {
  expect(parseCount("50000", "waitMs")).toEqual({ value: 50_000 });
  expect(parseCount(String(MAX_DELAY_MS + 1), "waitMs")).toEqual({ problem: `must be at most ${MAX_DELAY_MS} ms (about 24.8 days; 0 means none), not ${MAX_DELAY_MS + 1}` });
  expect(parseCount(String(MAX_DELAY_MS + 1), "maxImageBytes")).toEqual({ value: MAX_DELAY_MS + 1 });
  expect(parseCount("-1", "heartbeatMs")).toEqual({ problem: 'must be a whole number, 0 or more, not "-1"' });
});

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
  expect(parseCount("-1", "heartbeatMs")).toEqual({ problem: 'must be a duration such as 500ms, 30s, 2m or 1h (a bare number is milliseconds), not "-1"' });
});

test("parseCount takes units by what the key is: durations 500ms/30s/2m/1h, sizes 64K/1M/2G, counts bare", () => {
  expect(parseCount("30s", "timeoutMs")).toEqual({ value: 30_000 });
  expect(parseCount("500ms", "graceMs")).toEqual({ value: 500 });
  expect(parseCount("2m", "waitMs")).toEqual({ value: 120_000 });
  expect(parseCount("1h", "idleExitMs")).toEqual({ value: 3_600_000 });
  expect(parseCount("1.5s", "timeoutMs")).toEqual({ value: 1500 });
  expect(parseCount(" 250 ", "timeoutMs")).toEqual({ value: 250 });
  expect(parseCount("64K", "maxOutputBytes")).toEqual({ value: 65_536 });
  expect(parseCount("1M", "maxImageBytes")).toEqual({ value: 1_048_576 });
  expect(parseCount("2G", "snapshotMaxBytes")).toEqual({ value: 2 * 1024 ** 3 });
  expect(parseCount("64KiB", "maxOutputBytes")).toEqual({ value: 65_536 });
  expect(parseCount("100", "displayMaxEntries")).toEqual({ value: 100 });
  expect(parseCount("30x", "timeoutMs")).toMatchObject({ problem: expect.stringContaining('not "30x"') });
  expect(parseCount("30s", "maxOutputBytes")).toMatchObject({ problem: expect.stringContaining("must be a size") });
  expect(parseCount("1K", "displayMaxEntries")).toMatchObject({ problem: expect.stringContaining("whole number") });
  expect(parseCount("-1s", "timeoutMs")).toMatchObject({ problem: expect.stringContaining('not "-1s"') });
  expect(parseCount("30d", "timeoutMs")).toMatchObject({ problem: expect.stringContaining('not "30d"') });
  expect(parseCount("25d", "timeoutMs")).toMatchObject({ problem: expect.stringContaining("must be a duration") });
  expect(parseCount("600h", "timeoutMs")).toMatchObject({ problem: expect.stringContaining('at most 2147483647 ms (about 24.8 days; 0 means none), not 2160000000 (from "600h")') });
});

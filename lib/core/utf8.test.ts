import { describe, expect, test } from "bun:test";
import { utf8Length, utf8Prefix, utf8Suffix } from "./utf8.ts";

describe("utf8 cuts", () => {
  test("prefix never cuts inside a character", () => {
    // "é" is 2 bytes, "€" is 3, "😀" is 4 (a surrogate pair in JS).
    expect(utf8Prefix("aé", 2)).toEqual(["a", 1]);
    expect(utf8Prefix("aé", 3)).toEqual(["aé", 3]);
    expect(utf8Prefix("€€", 4)).toEqual(["€", 3]);
    expect(utf8Prefix("😀x", 3)).toEqual(["", 0]);
    expect(utf8Prefix("😀x", 4)).toEqual(["😀", 4]);
    expect(utf8Prefix("abc", 0)).toEqual(["", 0]);
  });

  test("suffix never cuts inside a character", () => {
    expect(utf8Suffix("éa", 2)).toEqual(["a", 1]);
    expect(utf8Suffix("x😀", 3)).toEqual(["", 0]);
    expect(utf8Suffix("x😀", 4)).toEqual(["😀", 4]);
    expect(utf8Suffix("€€", 5)).toEqual(["€", 3]);
    expect(utf8Suffix("abc", 10)).toEqual(["abc", 3]);
  });
});

describe("cuts of huge texts", () => {
  test("prefix and suffix agree with a whole-text cut, surrogate pairs included", () => {
    const samples = ["a".repeat(100), "😀".repeat(50), `a${"😀".repeat(50)}`, `é${"€".repeat(40)}x`, "x😀é€".repeat(30)];
    for (const text of samples) {
      const whole = Buffer.from(text, "utf8");
      for (let max = 0; max <= whole.length + 2; max++) {
        const [prefix, pb] = utf8Prefix(text, max);
        const [suffix, sb] = utf8Suffix(text, max);
        expect(text.startsWith(prefix)).toBe(true);
        expect(text.endsWith(suffix)).toBe(true);
        expect(pb).toBe(utf8Length(prefix));
        expect(sb).toBe(utf8Length(suffix));
        expect(pb).toBeLessThanOrEqual(max);
        expect(sb).toBeLessThanOrEqual(max);
        // Longest: one more character would not fit.
        const nextChar = [...text.slice(prefix.length)][0];
        if (nextChar) expect(pb + utf8Length(nextChar)).toBeGreaterThan(max);
        const prevChar = [...text.slice(0, text.length - suffix.length)].at(-1);
        if (prevChar) expect(sb + utf8Length(prevChar)).toBeGreaterThan(max);
      }
    }
  });
});

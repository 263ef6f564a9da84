// Durations and sizes as people type them, parsed by one rule for every option, environment variable
// and config key that takes one (lib/core/limits.ts parseCount): a duration is `500ms`, `30s`, `2m`,
// `1h` (a bare number is milliseconds), a size `512`, `64K`, `1M`, `2G` (a bare number is bytes; K, M
// and G are powers of 1024, a trailing `B`/`iB` is allowed: `64KiB`, `1MB`). Fractions are allowed
// where the result is whole enough to round (`1.5s`, `0.5K`). Case does not matter. A duration a
// result reports (`duration_ms`, wherever the result is made) is rounded by one rule too: durationMs.

const DURATION_UNITS: Record<string, number> = { "": 1, ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000 };
const SIZE_UNITS: Record<string, number> = { "": 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

export type Parsed = { value: number } | { problem: string };

/** `text` as milliseconds (`30s`, `500ms`, `2m`, `1h`; bare = ms). */
export function parseDuration(text: string): Parsed {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const factor = m ? DURATION_UNITS[(m[2] as string).toLowerCase()] : undefined;
  if (!m || factor === undefined) return { problem: `must be a duration such as 500ms, 30s, 2m or 1h (a bare number is milliseconds), not ${JSON.stringify(text)}` };
  return { value: Math.round(Number(m[1]) * factor) };
}

/** `text` as bytes (`64K`, `1M`, `2G`, `64KiB`; bare = bytes). */
export function parseSize(text: string): Parsed {
  const m = /^(\d+(?:\.\d+)?)\s*([kmg]?)(i?b)?$/i.exec(text.trim());
  if (!m || (m[2] === "" && m[3] !== undefined && m[3].toLowerCase() !== "b")) {
    return { problem: `must be a size such as 65536, 64K, 1M or 2G (a bare number is bytes), not ${JSON.stringify(text)}` };
  }
  return { value: Math.round(Number(m[1]) * (SIZE_UNITS[(m[2] as string).toLowerCase()] as number)) };
}

/** `text` as a plain whole number, 0 or more. */
export function parseWhole(text: string): Parsed {
  const trimmed = text.trim();
  if (!/^\d+$/.test(trimmed)) return { problem: `must be a whole number, 0 or more, not ${JSON.stringify(text)}` };
  return { value: Number(trimmed) };
}

/** A duration as results give it: milliseconds to 0.1 ms (finer digits are timer noise, and cost a reader's context). */
export function durationMs(ms: number): number {
  return Math.round(ms * 10) / 10;
}

/** 268435456 -> "256 MiB"; 1536 -> "1.5 KiB". */
export function formatBytes(n: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)} ${units[i]}`;
}

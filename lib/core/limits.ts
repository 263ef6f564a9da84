// Defaults and limits, in one place: what a session, the supervisor and every command fall back to,
// the one check every timeout, grace period and byte limit passes, wherever it comes from (a flag,
// the environment, a config file, a library option, a supervisor request), and the one place those
// sources are laid over the defaults (resolveLimits): each edge (a command, the MCP server,
// ReplSession.start, the supervisor's session factory) resolves a whole Limits once and passes it on.
import { usageError } from "./errors.ts";
import { parseDuration, parseSize, parseWhole } from "./units.ts";

/**
 * What 0 means for every limit and duration (a timeout, the output cap, the snapshot caps, the idle
 * limits): none. This is the one place that says so for a byte limit: 0 becomes a limit no size reaches.
 */
export function byteLimit(limit: number): number {
  return limit === 0 ? Number.POSITIVE_INFINITY : limit;
}

/** The built-in defaults (docs/architecture.md, "Where each rule lives"); config files and flags override them. 0 means none (byteLimit). */
export const DEFAULTS = {
  /** Per-cell timeout in ms; 0 = none. */
  timeoutMs: 30_000,
  /** Output cap per cell (stdout+stderr, UTF-8 bytes); 0 = none. */
  maxOutputBytes: 65_536,
  /** Grace period between the deadline's interrupt and the kill. */
  graceMs: 2_000,
  /** The supervisor exits after this long with no sessions; 0 = never. */
  idleExitMs: 30 * 60_000,
  /** A session with no call for this long is snapshotted and closed; 0 = never. */
  sessionIdleMs: 0,
  /** Snapshot after every cell that changed the namespace. */
  autosave: false,
  /** Snapshot size caps (the whole payload, one name); 0 = none. */
  snapshotMaxBytes: 512 * 1024 * 1024,
  snapshotMaxVariableBytes: 128 * 1024 * 1024,
  /** Display files kept per session folder (the oldest go first); 0 = no limit. */
  displayMaxFiles: 1_000,
  /** Bytes of display files kept per session folder (the oldest go first); 0 = no limit. */
  displayMaxBytes: 256 * 1024 * 1024,
  /** Display entries kept per cell (the rest are dropped and counted); 0 = no limit. */
  displayMaxEntries: 100,
  /**
   * Bytes of one display payload (a PNG, an HTML table, ...): the worker leaves a bigger one out before
   * encoding it, and the entry's `error` says so; 0 = no limit. Every payload otherwise travels whole
   * (base64 in one frame) and is held by the supervisor several times over while it is written out.
   */
  displayMaxPayloadBytes: 32 * 1024 * 1024,
  /** How matplotlib figures are rendered: "png" or "svg". */
  figureFormat: "png" as FigureFormat,
  /** Cells a session's history keeps (the oldest go first; docs/history.md); 0 = no limit. */
  historyMaxCells: 1_000,
  /** Size of a session's history (its code and results' text, about UTF-8 bytes; the oldest cells go first); 0 = no limit. */
  historyMaxBytes: 16 * 1024 * 1024,
} as const;

export type FigureFormat = "png" | "svg";
export const FIGURE_FORMATS: readonly FigureFormat[] = ["png", "svg"];

/**
 * Idempotency keys (an execute's `id`, `run --id`, MCP `idempotency_key`; `run --detach` names its
 * cell by one): how many finished ones a session keeps with their results (the oldest go first), for
 * how long, how long a key may be, and how many dropped keys are remembered so that asking for one
 * says it was dropped. Kept with the session's default snapshot, so they survive a supervisor restart
 * as its state does (docs/supervisor-protocol.md).
 */
export const IDEMPOTENCY = { keysKept: 128, maxAgeMs: 24 * 60 * 60_000, maxKeyLength: 128, droppedRemembered: 1024 } as const;

/**
 * How far a cut of the output moves to land on a line boundary: the truncation marker then starts a
 * line and no half line is kept (lib/session/output.ts), and the live echo holds back a partial line
 * within it so what it showed is a prefix of what the result keeps (lib/cli/render.ts LiveEcho).
 */
export const LINE_SNAP_BYTES = 256;

/** Characters of a running keyed cell's latest output the supervisor keeps for `status ID --output` (its tail). */
export const OUTPUT_SO_FAR_CHARS = 8_192;

/**
 * Unsent bytes a `watch` connection may have queued before replies for it are dropped (and counted):
 * a watcher that reads slowly costs the supervisor this much memory at most, and never holds up a cell.
 */
export const WATCH_BACKLOG_BYTES = 1024 * 1024;

/** The longest delay a timer takes (2^31 - 1 ms); every duration is checked against it. */
export const MAX_DELAY_MS = 2_147_483_647;

/** The settings a session and its calls run under (a subset of NUMBER_KEYS). */
export const LIMIT_KEYS = [
  "timeoutMs",
  "maxOutputBytes",
  "graceMs",
  "snapshotMaxBytes",
  "snapshotMaxVariableBytes",
  "displayMaxFiles",
  "displayMaxBytes",
  "displayMaxEntries",
  "displayMaxPayloadBytes",
] as const;
export type LimitKey = (typeof LIMIT_KEYS)[number];

/** The numeric settings (config keys): the limits, and the supervisor's two idle limits. Which are durations: DURATION_KEYS. */
export const NUMBER_KEYS = [...LIMIT_KEYS, "idleExitMs", "sessionIdleMs", "historyMaxCells", "historyMaxBytes"] as const;
/** Counts read from a flag that are no setting: `awrepl mcp --wait`, `--max-image`, `wait --timeout`, its test heartbeat. */
const FLAG_ONLY_KEYS = ["waitMs", "maxImageBytes", "heartbeatMs"] as const;
/** What a number read from a flag, the environment or a file is: a setting, or a flag's own count. */
export type NumberKey = (typeof NUMBER_KEYS)[number] | (typeof FLAG_ONLY_KEYS)[number];
/** The numbers that are durations (a timer must be able to hold them). */
const DURATION_KEYS: ReadonlySet<string> = new Set(["timeoutMs", "graceMs", "idleExitMs", "sessionIdleMs", "waitMs", "heartbeatMs"]);
/** The numbers that are sizes in bytes (they take `64K`, `1M`, `2G`: lib/core/units.ts). */
const SIZE_KEYS: ReadonlySet<string> = new Set(["maxOutputBytes", "snapshotMaxBytes", "snapshotMaxVariableBytes", "displayMaxBytes", "displayMaxPayloadBytes", "maxImageBytes", "historyMaxBytes"]);

/** What kind of quantity setting `key` is: how its text is read (parseCount), and how help names it. */
export function quantityKind(key: string): "duration" | "size" | "count" {
  return DURATION_KEYS.has(key) ? "duration" : SIZE_KEYS.has(key) ? "size" : "count";
}

/**
 * Every limit a session runs under, resolved (DEFAULTS says what each one is): a session keeps its
 * Limits whole, and a call's own timeout or output cap, when it gives one, beats its session's.
 */
export type Limits = Record<LimitKey, number>;

/** The two limits a call may set for itself (`run --timeout`, `--max-output`, an MCP call's arguments). */
export type CallLimits = Pick<Limits, "timeoutMs" | "maxOutputBytes">;

/**
 * The limits `layers` set over the built-in defaults, a later layer's value beating an earlier one's
 * (undefined: not set there): `resolveLimits(config, flags)`. Each layer is checked (checkLimits).
 * The one place a limit falls back to its default.
 */
export function resolveLimits(...layers: Partial<Record<LimitKey, number | undefined>>[]): Limits {
  const limits = {} as Limits;
  for (const key of LIMIT_KEYS) limits[key] = DEFAULTS[key];
  for (const layer of layers) {
    checkLimits(layer);
    for (const key of LIMIT_KEYS) {
      const value = layer[key];
      if (value !== undefined) limits[key] = value;
    }
  }
  return limits;
}

/**
 * Why `value` is not a valid setting `key` (a non-negative finite number; a duration at most
 * MAX_DELAY_MS, since a timer clamps longer delays to 1 ms and would fire at once instead of never),
 * or null when it is.
 */
export function limitProblem(key: string, value: unknown): string | null {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) return `must be a non-negative number, not ${typeof value === "number" ? String(value) : JSON.stringify(value ?? null)}`;
  if (DURATION_KEYS.has(key) && value > MAX_DELAY_MS) return `must be at most ${MAX_DELAY_MS} ms (about 24.8 days; 0 means none), not ${value}`;
  return null;
}

/** Checks every limit `options` sets (undefined ones are defaults); a usage error names the first bad one. */
export function checkLimits(options: Partial<Record<NumberKey, unknown>>, prefix = ""): void {
  for (const key of NUMBER_KEYS) {
    const value = options[key];
    if (value === undefined) continue;
    const problem = limitProblem(key, value);
    if (problem) throw usageError(`${prefix}${key} ${problem}`);
  }
}

/**
 * A number from the command line, the environment or a config file (`--timeout 30s`,
 * AWREPL_MAX_OUTPUT_BYTES=64K), read as what `key` is: a duration (`500ms`, `30s`, `2m`, `1h`; bare =
 * ms), a size (`64K`, `1M`, `2G`; bare = bytes) or a plain count (lib/core/units.ts), then checked as
 * `key` is (a duration is at most MAX_DELAY_MS). The problem names the offending text.
 */
export function parseCount(text: string, key: string): { value: number } | { problem: string } {
  const kind = quantityKind(key);
  const parsed = kind === "duration" ? parseDuration(text) : kind === "size" ? parseSize(text) : parseWhole(text);
  if ("problem" in parsed) return parsed;
  const problem = limitProblem(key, parsed.value);
  if (!problem) return parsed;
  // A value read with a unit is named as it was typed too.
  return { problem: text.trim() === String(parsed.value) ? problem : `${problem} (from ${JSON.stringify(text)})` };
}

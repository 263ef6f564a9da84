// Idempotency keys of one session: a call that carries a key (`execute(code, {id})`, `run --id`, the
// MCP `run` tool's `idempotency_key`) runs once. A repeat of the key gets the first call's result
// marked `replayed: true`, or waits for it while it still runs; the same key with other code is a
// usage error. A call that never ran (its wait ran out, it was withdrawn) leaves no key behind, so a
// repeat runs it. Bounded by count and age (lib/core/limits.ts IDEMPOTENCY); saved beside the
// session's default snapshot, with it, so the keys come back when the snapshot does.
import { createHash } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { AwreplError } from "../core/errors.ts";
import { writeFileAtomic } from "../core/files.ts";
import { IDEMPOTENCY } from "../core/limits.ts";
import type { ExecResult } from "../protocol/result.ts";

type Done = { code: string; at: number; result: ExecResult };
type Running = { code: string; at: number; pending: Promise<ExecResult | null> };

/** The file's shape: one line of JSON per key would do, but the set is small (IDEMPOTENCY.keysKept). */
type KeysFile = { version: 1; keys: { key: string; code_sha256: string; at: number; result: ExecResult }[] };

/** What a key says of a call: run it (and tell finish() or forget()), or the first call's result. */
export type KeyTurn =
  | { run: true; finish(result: ExecResult): void; forget(): void }
  | { run: false; result: Promise<ExecResult | null> };

/** What a key stands for now (KeyedCall): a cell running since `at`, its result, or a key dropped (and why). */
export type KeyState =
  | { state: "running"; at: number; pending: Promise<ExecResult | null> }
  | { state: "done"; at: number; result: ExecResult }
  | { state: "dropped"; reason: string };

export class IdempotencyKeys {
  private readonly done = new Map<string, Done>();
  private readonly running = new Map<string, Running>();
  /** Keys pruned, and why (at most IDEMPOTENCY.droppedRemembered): asking for one says so. */
  private readonly dropped = new Map<string, string>();
  /** Hears each key pruned (the supervisor logs it). */
  onDrop: ((key: string, reason: string) => void) | null = null;

  /** What `key` stands for now; null: never seen (or forgotten long ago). */
  lookup(key: string, now = Date.now()): KeyState | null {
    this.prune(now);
    const running = this.running.get(key);
    if (running) return { state: "running", at: running.at, pending: running.pending };
    const done = this.done.get(key);
    if (done) return { state: "done", at: done.at, result: done.result };
    const reason = this.dropped.get(key);
    return reason === undefined ? null : { state: "dropped", reason };
  }

  /** Checks `key` (a non-empty string of at most IDEMPOTENCY.maxKeyLength characters) for `code`. */
  claim(key: unknown, code: string, now = Date.now()): KeyTurn {
    checkKey(key);
    this.prune(now);
    const digest = sha256(code);
    const seen = this.done.get(key) ?? this.running.get(key);
    // A key used again after it was dropped runs as a new call: nothing of the old one is left to give.
    this.dropped.delete(key);
    if (seen) {
      if (seen.code !== digest) {
        throw new AwreplError("usage", `Idempotency key ${JSON.stringify(key)} was used for other code in this session; a retry must send the same code (or use a new key)`);
      }
      const first = this.done.get(key);
      return { run: false, result: first ? Promise.resolve(first.result) : (seen as Running).pending };
    }
    let settle: (result: ExecResult | null) => void = () => {};
    const pending = new Promise<ExecResult | null>((resolve) => (settle = resolve));
    this.running.set(key, { code: digest, at: now, pending });
    return {
      run: true,
      finish: (result) => {
        this.running.delete(key);
        // What the first call was told about its session (a restore, lost state) is not the repeat's news.
        const { notice: _notice, restored: _restored, ...rest } = result;
        const kept = structuredClone(rest);
        this.done.set(key, { code: digest, at: Date.now(), result: kept });
        this.prune(Date.now());
        settle(kept);
      },
      // It never ran: a repeat runs it (those waiting get null, and run it themselves).
      forget: () => {
        this.running.delete(key);
        this.dropped.set(key, "that call never ran (it was withdrawn, or its wait for its turn ran out); sending it again runs it");
        settle(null);
      },
    };
  }

  get size(): number {
    return this.done.size;
  }

  /** Writes the finished keys to `path` (atomically, 0600: results hold the cells' output); none: no file at all. */
  save(path: string, now = Date.now()): void {
    this.prune(now);
    if (this.done.size === 0) {
      rmSync(path, { force: true });
      return;
    }
    const file: KeysFile = { version: 1, keys: [...this.done].map(([key, d]) => ({ key, code_sha256: d.code, at: d.at, result: d.result })) };
    writeFileAtomic(path, `${JSON.stringify(file)}\n`);
  }

  /** Reads the keys saved at `path` (none when it is missing or unreadable); returns how many came back. */
  load(path: string, now = Date.now()): number {
    let file: KeysFile;
    try {
      file = JSON.parse(readFileSync(path, "utf8")) as KeysFile;
    } catch {
      return 0;
    }
    if (file?.version !== 1 || !Array.isArray(file.keys)) return 0;
    for (const k of file.keys) {
      if (typeof k?.key === "string" && typeof k.code_sha256 === "string" && typeof k.at === "number" && k.result && typeof k.result === "object") {
        this.done.set(k.key, { code: k.code_sha256, at: k.at, result: k.result });
      }
    }
    this.prune(now);
    return this.done.size;
  }

  /** Drops keys older than IDEMPOTENCY.maxAgeMs, then the oldest beyond IDEMPOTENCY.keysKept; each drop is remembered. */
  private prune(now: number): void {
    for (const [key, d] of this.done) if (now - d.at > IDEMPOTENCY.maxAgeMs) this.drop(key, `its result was older than ${IDEMPOTENCY.maxAgeMs / 3_600_000} h`);
    // A Map keeps insertion order, which is the order the calls finished in.
    for (const key of this.done.keys()) {
      if (this.done.size <= IDEMPOTENCY.keysKept) break;
      this.drop(key, `a session keeps the results of its last ${IDEMPOTENCY.keysKept} keyed calls, and ${IDEMPOTENCY.keysKept} newer ones finished`);
    }
  }

  private drop(key: string, reason: string): void {
    this.done.delete(key);
    this.dropped.set(key, reason);
    for (const old of this.dropped.keys()) {
      if (this.dropped.size <= IDEMPOTENCY.droppedRemembered) break;
      this.dropped.delete(old);
    }
    this.onDrop?.(key, reason);
  }
}

/** A key is a non-empty string of at most IDEMPOTENCY.maxKeyLength characters. */
export function checkKey(key: unknown): asserts key is string {
  if (typeof key !== "string" || key.length === 0 || key.length > IDEMPOTENCY.maxKeyLength) {
    const shown = typeof key === "string" ? JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}...` : key) : JSON.stringify(key ?? null);
    throw new AwreplError("usage", `An idempotency key must be a non-empty string of at most ${IDEMPOTENCY.maxKeyLength} characters, not ${shown}`);
  }
}

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

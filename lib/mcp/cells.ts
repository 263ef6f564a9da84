// The cells this MCP server sent, and waiting for them with progress and cancellation.
//
// The server is a client of the supervisor like `awrepl -s NAME run`, and sends every cell detached:
// if this process dies (a host kills and restarts its MCP servers), the cell runs on and its result is
// kept in the session for the next server's `wait` (docs/supervisor-protocol.md, "Detached cells").
// While this process lives, the execute request stays open on its connection: live output feeds the
// `running` snapshots (the tail of each stream) and progress messages, and the result settles `Cell`.
//
// While a call waits and the client sent a progress token, output produces progress notifications
// (at most two a second) and silence a heartbeat every 10 s: Claude Code resets its idle timer on
// them and shows the message. A cancelled call (notifications/cancelled) cancels the execute request:
// the supervisor interrupts the cell (or drops it if still queued) and the session keeps its state.
import type { DetachedCell, RemoteSession } from "../client/attach.ts";
import { deadline, DeadlineError } from "../core/deadline.ts";
import type { CallLimits } from "../core/limits.ts";
import { Tail } from "../core/tail.ts";
import type { DisplayItem, ExecResult } from "../protocol/result.ts";
import { emptyResult } from "./content.ts";

export const PROGRESS_INTERVAL_MS = 500;
export const HEARTBEAT_MS = 10_000;
/** How much of each stream a `running` snapshot shows (its tail). */
const SNAPSHOT_TAIL_CHARS = 4_000;
/** Live output wanted from the supervisor per cell: enough for snapshots and progress lines; the result has it all. */
export const LIVE_LIMIT_BYTES = 1024 * 1024;
/** Longest output line quoted in a progress message. */
const PROGRESS_LINE_CHARS = 200;

export type Notify = (progress: number, message: string) => Promise<void> | void;

/** What progress reports on: elapsed time, the latest output line, and a signal when either changes. */
export type ProgressSource = {
  elapsedMs(): number;
  latest(): string;
  watch(fn: () => void): () => void;
};

/** One cell this server sent: its detached execute request, kept in memory until its result is handed on. */
export class Cell implements ProgressSource {
  readonly startedAt = Date.now();
  private readonly started = performance.now();
  /** Aborting it cancels the execute request: interrupted if running, dropped if queued. */
  private readonly abort = new AbortController();
  private readonly call: DetachedCell;
  result?: ExecResult;
  error?: unknown;
  settled = false;
  /** Cancelled or interrupted through this server: the next `run` need not call the session busy. */
  stopping = false;
  /** A call returned status "running" for it (and its result is kept in the session): the agent is to `wait`. */
  reported = false;
  readonly finished: Promise<void>;
  private readonly tails = { stdout: new Tail(SNAPSHOT_TAIL_CHARS), stderr: new Tail(SNAPSHOT_TAIL_CHARS) };
  private readonly displays: DisplayItem[] = [];
  private lastLine = "";
  private readonly watchers = new Set<() => void>();

  constructor(
    readonly session: string,
    remote: RemoteSession,
    code: string,
    limits: CallLimits,
    /** The agent's idempotency key: a retry gets the first call's result (`replayed`) and runs nothing. */
    idempotencyKey?: string,
  ) {
    this.call = remote.executeDetached(code, {
      id: idempotencyKey,
      timeoutMs: limits.timeoutMs,
      maxOutputBytes: limits.maxOutputBytes,
      liveLimit: LIVE_LIMIT_BYTES,
      signal: this.abort.signal,
      onOutput: (stream, text) => this.onOutput(stream, text),
      onDisplay: (item) => {
        this.displays.push(item);
        this.changed();
      },
    });
    this.finished = this.call.result
      .then(
        (r) => {
          this.result = r;
        },
        (e: unknown) => {
          this.error = e;
        },
      )
      .finally(() => {
        this.settled = true;
        this.changed();
      });
  }

  elapsedMs(): number {
    return performance.now() - this.started;
  }

  /** Cancels the execute request (MCP cancellation): the cell is interrupted, its result not kept. */
  cancel(): void {
    this.stopping = true;
    this.abort.abort();
  }

  /**
   * Has the supervisor keep the result for `collect` too, before the agent is told "running": so it
   * survives this process. False when the cell has finished (its result is then here, or about to be).
   */
  keepResult(): Promise<boolean> {
    return this.call.keepResult();
  }

  /** The latest non-empty output line, for progress messages. */
  latest(): string {
    return this.lastLine;
  }

  /** What a `running` result carries: ExecResult's shape, with the output so far (tails). */
  snapshot(): ExecResult {
    for (const t of Object.values(this.tails)) t.trim();
    const dropped = this.tails.stdout.dropped + this.tails.stderr.dropped;
    return {
      ...emptyResult(this.session, "running", this.elapsedMs()),
      stdout: this.tails.stdout.text,
      stderr: this.tails.stderr.text,
      truncated: dropped > 0,
      truncated_bytes: dropped,
      display: [...this.displays],
    };
  }

  watch(fn: () => void): () => void {
    this.watchers.add(fn);
    return () => this.watchers.delete(fn);
  }

  private onOutput(stream: "stdout" | "stderr", text: string): void {
    this.tails[stream].push(text);
    const lines = text.split("\n").filter((l) => l.trim() !== "");
    const last = lines[lines.length - 1];
    if (last !== undefined) this.lastLine = last.length > PROGRESS_LINE_CHARS ? `${last.slice(0, PROGRESS_LINE_CHARS - 3)}...` : last;
    this.changed();
  }

  private changed(): void {
    for (const fn of this.watchers) fn();
  }
}

/** A cell this process knows only from `collect` (one an earlier server left): elapsed time, no output. */
export class ElsewhereCell implements ProgressSource {
  private readonly since = performance.now();
  constructor(private readonly elapsedBefore: number) {}
  elapsedMs(): number {
    return this.elapsedBefore + performance.now() - this.since;
  }
  latest(): string {
    return "";
  }
  watch(): () => void {
    return () => {};
  }
}

export type WaitOutcome<T> = { kind: "done"; value: T } | { kind: "waited" } | { kind: "cancelled" };

/**
 * Waits for `work` at most `waitMs` (null: as long as `work` takes), reporting progress on `source`
 * through `notify` (when the caller sent a progress token); when `signal` aborts, calls `onCancel`.
 */
export async function waitWithProgress<T>(
  work: Promise<T>,
  options: { waitMs: number | null; signal: AbortSignal; onCancel(): void; source: ProgressSource; notify?: Notify; heartbeatMs?: number },
): Promise<WaitOutcome<T>> {
  const { signal, notify, source } = options;
  const stopProgress = notify ? reportProgress(source, notify, options.heartbeatMs ?? HEARTBEAT_MS) : () => {};
  // `work`'s own failure is carried as a value, so that every rejection of the wait is the wait's own:
  // the deadline (a DeadlineError) or the signal (its reason, whatever that is).
  const settled = work.then(
    (value) => ({ kind: "done", value }) as const,
    (error: unknown) => ({ kind: "failed", error }) as const,
  );
  let outcome: Awaited<typeof settled>;
  try {
    outcome = await deadline(settled, options.waitMs ?? Infinity, "the cell", { signal });
  } catch (err) {
    if (err instanceof DeadlineError) return { kind: "waited" };
    options.onCancel();
    return { kind: "cancelled" };
  } finally {
    stopProgress();
  }
  if (outcome.kind === "failed") throw outcome.error;
  return outcome;
}

/** Progress on output (at most every PROGRESS_INTERVAL_MS, the latest line never lost) and a heartbeat after `heartbeatMs` of silence. */
function reportProgress(source: ProgressSource, notify: Notify, heartbeatMs: number): () => void {
  let last = performance.now(); // the first heartbeat comes heartbeatMs after the wait began
  let lastValue = 0;
  let pending: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const send = () => {
    pending = undefined;
    if (stopped) return;
    last = performance.now();
    // `progress` must increase with every notification (the spec): elapsed seconds do.
    let value = Math.round(source.elapsedMs() / 100) / 10;
    if (value <= lastValue) value = lastValue + 0.001;
    lastValue = value;
    const line = source.latest();
    const message = `running ${value.toFixed(1)} s${line ? `: ${line}` : ""}`;
    void Promise.resolve(notify(value, message)).catch(() => {}); // the client went away: nothing to tell
  };
  const unwatch = source.watch(() => {
    if (pending) return;
    const due = last + PROGRESS_INTERVAL_MS - performance.now();
    if (due <= 0) send();
    else pending = setTimeout(send, due);
  });
  const heartbeat = setInterval(() => {
    if (performance.now() - last >= heartbeatMs) send();
  }, Math.min(1000, heartbeatMs));
  return () => {
    stopped = true;
    unwatch();
    clearTimeout(pending);
    clearInterval(heartbeat);
  };
}

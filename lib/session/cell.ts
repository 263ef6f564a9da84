// One cell's events turned into an ExecResult: output under the byte limit, display items, the
// trailing value, the error, and the status — including the two ways a cell can lose the session's
// state (killed at its deadline, or the worker died), which the result says in so many words.
import type { CellDisplays } from "./display_entries.ts";
import { capEntries, type CappedText, capText, type OutputCollector, type Stream } from "./output.ts";
import { RawText } from "../wire/output_frames.ts";
import { durationMs } from "../core/units.ts";
import type { ExecResult, ExecStatus } from "../protocol/result.ts";
import type { DisplayEvent, DoneEvent, ErrorEvent, NameFailure } from "../protocol/runtime.ts";
import type { ExecuteOptions } from "../protocol/api.ts";
import { describeExit, type RequestHandlers, type WorkerExit } from "../worker/worker.ts";
import { answerHostRequest } from "../core/host_bridge.ts";

/**
 * Who watches a cell's output live (onRawOutput gets it undecoded: the supervisor forwards it as is),
 * and who answers its host requests.
 */
export type LiveOutput = Pick<ExecuteOptions, "onOutput" | "onDisplay" | "onHostRequest"> & {
  onRawOutput?(stream: Stream, raw: RawText): void;
};

/** What happened to a cell's request besides its events (set by the timeout and interrupt paths). */
export type CellFlags = { timedOut: boolean; userInterrupted: boolean; killed: boolean };

export type CellLimits = { timeoutMs: number; graceMs: number };

/** What the next call of a session is told when this one's worker was lost. */
export function lostStateNotice(killedAtTimeout: boolean, exit: WorkerExit | null): string {
  return `The previous worker ${howLost(killedAtTimeout, exit)}; this call ran in a fresh worker and the earlier state is gone.`;
}

/**
 * What the next call is told when the lost worker's replacement was restored from a snapshot (`state`:
 * which one; `failed`: the names that did not come back).
 */
export function restoredStateNotice(killedAtTimeout: boolean, exit: WorkerExit | null, state: string, failed: readonly NameFailure[] = []): string {
  const missing = failed.length ? `; not restored: ${failed.map((f) => `${f.name} (${f.reason})`).join(", ")}` : "";
  return `The previous worker ${howLost(killedAtTimeout, exit)}; this call ran in a fresh worker restored from ${state}${missing}.`;
}

function howLost(killedAtTimeout: boolean, exit: WorkerExit | null): string {
  return killedAtTimeout ? "was killed after a timeout" : exit ? describeExit(exit) : "died";
}

/** Why a cell never ran: its timeout ran out while it waited for its turn, or it was withdrawn (Ctrl-C). */
export type NeverRan = { why: "timeout"; timeoutMs: number } | { why: "withdrawn" };

/**
 * The result of a cell that never ran: it waited for its turn behind other calls of `session` for
 * `waitedMs`, and its timeout (which covers the wait) ran out, or its caller withdrew it. Its status is
 * the one it would have had (timeout, interrupted) and its exception says it never ran.
 */
export function neverRanResult(session: string, waitedMs: number, reason: NeverRan): ExecResult {
  const waited = `it waited ${Math.round(waitedMs)} ms for its turn behind other calls of session ${session} and never ran; the session's state is untouched`;
  const exception = reason.why === "timeout"
    ? `TimeoutError: The cell's ${reason.timeoutMs} ms timeout, which covers the wait for its turn, ran out: ${waited}`
    : `KeyboardInterrupt: The cell was withdrawn before it ran: ${waited}`;
  return {
    stdout: "",
    stderr: "",
    value: null,
    exception,
    traceback: "",
    duration_ms: durationMs(waitedMs),
    truncated: false,
    truncated_bytes: 0,
    status: reason.why === "timeout" ? "timeout" : "interrupted",
    session,
    display: [],
  };
}

/** Said after a loss when nothing could be restored. */
const STATE_LOST = "the session's state was lost. The next call starts a fresh worker.";

/** Collects the events of one execute request; `finish` or `lost` makes its ExecResult. */
export class CellRecorder implements RequestHandlers {
  private value: string | null = null;
  private failure: ErrorEvent | null = null;
  private exceptionText = "";
  private readonly started = performance.now();
  /** Bytes cut from the value, the exception and the traceback (display payloads: CellDisplays). */
  private cutBytes = 0;

  constructor(
    private readonly collected: OutputCollector,
    private readonly displays: CellDisplays,
    private readonly live: LiveOutput,
  ) {}

  /**
   * The one way output reaches the cell, whichever way its frame was read (undecoded, or decoded by
   * JSON.parse: RawText.fromText): kept under the limit and shown live. Unless a caller wants the
   * text live, it is decoded only if the output limit keeps it.
   */
  rawOutput(stream: Stream, raw: RawText): void {
    if (this.live.onOutput) {
      const text = raw.text();
      this.collected.add(stream, text);
      callSafely(this.live.onOutput, stream, text);
      return;
    }
    this.collected.addRaw(stream, raw);
    if (this.live.onRawOutput) callSafely(this.live.onRawOutput, stream, raw);
  }

  /**
   * Shows live what the collector holds already (output that arrived between cells and opens this
   * one's), so that a live echo and the result agree on where the cell's output starts.
   */
  replayLive(stream: Stream, text: string): void {
    if (text === "") return;
    if (this.live.onOutput) callSafely(this.live.onOutput, stream, text);
    else if (this.live.onRawOutput) callSafely(this.live.onRawOutput, stream, RawText.fromText(text));
  }

  /** A host request of the cell: the caller's onHostRequest answers it (NO_HOST_BRIDGE without one). */
  hostRequest(data: Record<string, unknown>, reply: (data: Record<string, unknown>) => void): void {
    void answerHostRequest(this.live.onHostRequest, data).then(reply);
  }

  display(data: Record<string, unknown>, event?: DisplayEvent): void {
    const item = this.displays.add(data, event);
    if (item && this.live.onDisplay) callSafely(this.live.onDisplay, item);
  }

  result(text: string): void {
    // Cut as it arrives: the host (and a supervisor's client) never holds a huge repr after the cell.
    this.value = this.cap(text);
  }

  /** One field on its own under the output limit (head, marker line, tail); what it lost is counted. */
  private cap(text: string): string {
    return this.count(capText(text, this.collected.limit));
  }

  private count(capped: CappedText): string {
    this.cutBytes += capped.dropped;
    return capped.text;
  }

  error(event: ErrorEvent): void {
    // Cut as it arrives too; the message is kept as the `exception` it becomes.
    this.exceptionText = this.cap(`${event.ename}: ${event.evalue}`);
    this.failure = { ...event, evalue: "", traceback: [this.count(capEntries(event.traceback, this.collected.limit))] };
  }

  /** The result of a cell whose `done` arrived. */
  finish(done: DoneEvent, flags: CellFlags, limits: CellLimits, session: string, notice: string | null): ExecResult {
    // Entries the runtime did not ship (past max_display_entries) are counted with those dropped here.
    if (typeof done.display_dropped === "number" && done.display_dropped > 0) this.displays.dropped += done.display_dropped;
    const err = this.failure;
    if (err) {
      let status: ExecStatus = "error";
      let exception = this.exceptionText;
      if (err.ename === "KeyboardInterrupt" && flags.timedOut) {
        status = "timeout";
        exception = `TimeoutError: The cell exceeded the ${limits.timeoutMs} ms timeout and was interrupted; the session's state is intact`;
      } else if (err.ename === "KeyboardInterrupt" && flags.userInterrupted) {
        status = "interrupted";
      }
      return this.build(status, null, exception, err.traceback.join(""), session, notice);
    }
    if (done.status !== "ok") {
      const exception = `RuntimeError: ${done.reason ?? "the runtime reported a failure without a reason"}`;
      return this.build("error", null, exception, "", session, notice);
    }
    return this.build("ok", this.value, null, "", session, notice);
  }

  /**
   * The result of a cell whose worker was lost: killed at the deadline (timeout) or dead (died).
   * `aftermath` says what became of the session's state (default: it was lost). Each thing is said
   * once: the exception says how the worker was lost, the notice (and `restored`) what became of
   * the state; the cell's stderr stays the cell's.
   */
  lost(flags: CellFlags, exit: WorkerExit | null, limits: CellLimits, session: string, notice: string | null, aftermath = STATE_LOST): ExecResult {
    const exception = flags.killed
      ? `TimeoutError: The cell exceeded the ${limits.timeoutMs} ms timeout and did not stop within the ${limits.graceMs} ms grace period; the worker was killed`
      : `WorkerDied: The Python worker ${exit ? describeExit(exit) : "died"}`;
    const fate = capitalize(aftermath);
    return this.build(flags.killed ? "timeout" : "died", null, exception, "", session, notice ? `${notice} ${fate}` : fate);
  }

  private build(status: ExecStatus, value: string | null, exception: string | null, traceback: string, session: string, notice: string | null): ExecResult {
    const duration_ms = durationMs(performance.now() - this.started);
    const out = this.collected.result();
    const shown = this.displays;
    const cut = out.truncated_bytes + this.cutBytes + shown.cutBytes;
    const result: ExecResult = {
      stdout: out.stdout,
      stderr: out.stderr,
      value,
      exception,
      traceback,
      duration_ms,
      truncated: cut > 0 || shown.dropped > 0,
      truncated_bytes: cut,
      status,
      session,
      display: shown.items,
    };
    if (shown.dropped > 0) result.display_dropped = shown.dropped;
    if (notice) result.notice = notice;
    return result;
  }
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * Calls a caller's live callback; its exception must not abort the cell's bookkeeping (everything it
 * was shown is in the result anyway).
 */
function callSafely<A extends unknown[]>(fn: (...args: A) => void, ...args: A): void {
  try {
    fn(...args);
  } catch {
    // Ignored: see above.
  }
}

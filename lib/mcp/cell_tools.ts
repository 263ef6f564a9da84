// The tools around a cell's life: `run`, `wait` and `interrupt`.
//
// `run` sends the cell (detached) and waits at most wait_ms. A cell still running then has its result
// kept in the session (keep_result), and the call returns status `running`: the agent collects the
// result with `wait` or stops the cell with `interrupt`. `wait` asks the supervisor (`collect`), so it
// works the same in this process and in a new one after the host restarted the server; this process's
// own copy of the cell only adds its output so far and the progress messages.
//
// Cancelling a `run` or `wait` (notifications/cancelled) cancels the cell; the host closing the
// connection (EOF: it ends or restarts this server) does not.
//
// A `run` on a session whose earlier cell was reported `running` and not collected is refused
// (session_busy): queued behind it, the new cell would only report `running` in its turn while it has
// not even started, and the agent would not know its first cell's outcome. Calls still waiting (hosts
// send parallel tool calls) are not refused: the supervisor queues them in arrival order.
import type { Collected, RemoteSession } from "../client/attach.ts";
import { AwreplError } from "../core/errors.ts";
import type { CallLimits } from "../core/limits.ts";
import type { ExecResult } from "../protocol/result.ts";
import { Cell, ElsewhereCell, type ProgressSource, waitWithProgress } from "./cells.ts";
import { type ContentOptions, emptyResult, execContent, idleContent, runningContent, type ToolResult, withNotice } from "./content.ts";
import { disconnected, progressNotifier, type ToolContext } from "./context.ts";
import type { RunArgs, SessionArgs, WaitArgs } from "./schemas.ts";

/** After `interrupt`, how long to wait for the interrupted cell's result to include it. */
const INTERRUPT_COLLECT_MS = 3_000;

export type CellToolsOptions = ContentOptions & {
  /** A cell's timeout (the config's) and output cap (the server's) when its call gives none. */
  cell: CallLimits;
  waitMs: number;
  heartbeatMs?: number;
  /** The session a call names (or the default), and the connection to it that sends cells. */
  sessionName(session: string | undefined): string;
  remote(name: string): Promise<RemoteSession>;
  interruptSession(name: string): Promise<boolean>;
};

/** What the host is told when a call is cancelled: never sent (the SDK answers nothing after a cancellation). */
const CANCELLED: ToolResult = { content: [{ type: "text", text: "cancelled" }], isError: true };

export class CellTools {
  /**
   * Cells of this server not handed on yet, per session, oldest first. Several at once when a host
   * sends parallel calls for one session: the supervisor runs them in arrival order.
   */
  private readonly cells = new Map<string, Cell[]>();

  constructor(private readonly o: CellToolsOptions) {}

  async run(a: RunArgs, ctx: ToolContext): Promise<ToolResult> {
    const name = this.o.sessionName(a.session);
    const mine = this.cells.get(name) ?? [];
    const left = mine.find((c) => c.reported && !c.settled && !c.stopping);
    // A retry of a keyed cell is no new cell: the session answers it with the first one's result.
    if (left && a.idempotency_key === undefined) {
      throw new AwreplError(
        "session_busy",
        `Session ${name} is still running the cell started ${ago(left.startedAt)} (status "running"): call \`wait\` to collect its result or \`interrupt\` to stop it`,
      );
    }
    const remote = await this.o.remote(name);
    // A reported cell that finished uncollected: the agent moved on. Say so, and take its kept copy
    // out of the session so that a later `wait` does not hand over a stale result.
    let notice: string | undefined;
    for (const old of mine.filter((c) => c.reported)) {
      this.forget(old);
      const kept = await remote.collect(0).catch(() => null);
      const status = old.result?.status ?? (kept?.state === "done" ? kept.result.status : "unknown");
      if (!old.stopping) notice = `The previous cell (started ${ago(old.startedAt)}) finished with status ${status}; its result was not collected.`;
    }
    const cell = new Cell(name, remote, a.code, { timeoutMs: a.timeout_ms ?? this.o.cell.timeoutMs, maxOutputBytes: a.max_output ?? this.o.cell.maxOutputBytes }, a.idempotency_key);
    this.cells.set(name, [...(this.cells.get(name) ?? []), cell]);
    const outcome = await waitWithProgress(cell.finished, {
      waitMs: a.wait_ms ?? this.o.waitMs,
      signal: ctx.mcpReq.signal,
      onCancel: () => {
        if (!disconnected(ctx.mcpReq.signal)) cell.cancel();
      },
      source: cell,
      notify: progressNotifier(ctx),
      heartbeatMs: this.o.heartbeatMs,
    });
    if (outcome.kind === "cancelled") {
      this.forget(cell);
      return CANCELLED;
    }
    // Still running: keep its result in the session before telling the agent to `wait` for it. False
    // means it finished meanwhile, and its result is here.
    if (outcome.kind === "waited" && (await cell.keepResult().catch(() => false))) {
      cell.reported = true;
      const s = cell.snapshot();
      return runningContent(s, stillRunning(name, s.duration_ms));
    }
    await cell.finished;
    const result = this.handOn(cell);
    return notice ? withNotice(result, notice) : result;
  }

  async wait(a: WaitArgs, ctx: ToolContext): Promise<ToolResult> {
    const name = this.o.sessionName(a.session);
    const waitMs = a.wait_ms ?? this.o.waitMs;
    const remote = await this.o.remote(name);
    let cell = this.cells.get(name)?.find((c) => c.reported);
    let source: ProgressSource | undefined = cell;
    let running = true; // the cell waited for has started (the session interrupt of a cancelled wait may hit it)
    if (!cell) {
      // No cell of ours reported running: this server may have been restarted while its cell ran on
      // (or finished, its result kept), another client's detached cell may run, or a `run` call of
      // ours is still waiting for its own (a host's parallel calls).
      const now = await collectOrIdle(remote, 0);
      if (now.state !== "running") return this.collected(name, now, undefined);
      cell = now.mine ? this.cells.get(name)?.find((c) => !c.settled) : undefined;
      source = cell ?? new ElsewhereCell(now.elapsedMs ?? 0);
      running = now.elapsedMs !== null;
    }
    const giveUp = new AbortController();
    const outcome = await waitWithProgress(collectOrIdle(remote, waitMs, giveUp.signal), {
      waitMs: null,
      signal: ctx.mcpReq.signal,
      onCancel: () => {
        // Cancelling a wait stops the work too: the agent (or its user) no longer wants it. A host
        // that closed the connection did not cancel anything: the cell runs on for the next server.
        giveUp.abort();
        if (disconnected(ctx.mcpReq.signal)) return;
        if (cell) cell.cancel();
        else if (running) void this.o.interruptSession(name).catch(() => {});
      },
      source: source as ProgressSource,
      notify: progressNotifier(ctx),
      heartbeatMs: this.o.heartbeatMs,
    });
    if (outcome.kind !== "done") return CANCELLED;
    return this.collected(name, outcome.value, cell);
  }

  async interrupt(a: SessionArgs): Promise<ToolResult> {
    const name = this.o.sessionName(a.session);
    const interrupted = await this.o.interruptSession(name);
    const sc: Record<string, unknown> = { session: name, interrupted };
    let text = interrupted ? `Interrupted the running cell in session ${name}` : `Session ${name} was not running a cell`;
    const inFlight = (this.cells.get(name) ?? []).filter((c) => !c.settled);
    for (const c of inFlight) c.stopping = true;
    const reported = inFlight.find((c) => c.reported);
    // The interrupted cell's result, when it is one whose result is kept: ours that was reported
    // running, or one an earlier server left. (A `run` still waiting returns its own.)
    if (interrupted && (reported || inFlight.length === 0)) {
      const got = await collectOrIdle(await this.o.remote(name), INTERRUPT_COLLECT_MS);
      if (got.state === "done") {
        if (reported) this.forget(reported);
        sc.result = got.result;
        text += `\n${(execContent(got.result, this.o).content[0] as { text: string }).text}`;
      }
    }
    return { content: [{ type: "text", text }], structuredContent: sc };
  }

  /** `close` ended the session: its cells' results will never come. */
  forgetSession(name: string): void {
    this.cells.delete(name);
  }

  /** What `wait` says about what collect found. `cell`: this server's reported cell, if any. */
  private collected(name: string, c: Collected, cell: Cell | undefined): ToolResult {
    if (c.state === "done") {
      // Ours: sent on this connection, or (after a reconnect) the very result this process holds.
      if (cell && (c.mine || (cell.result !== undefined && sameResult(cell.result, c.result)))) {
        this.forget(cell);
        return execContent(c.result, this.o);
      }
      const more = cell ? " Your own cell is still running: call `wait` again." : "";
      return withNotice(
        execContent(c.result, this.o),
        `This result was kept for you: its cell was started by an earlier awrepl mcp process (or another client) and finished while nobody waited for it.${more}`,
      );
    }
    if (c.state === "running") {
      if (cell) return runningContent(cell.snapshot(), stillRunning(name, cell.elapsedMs()));
      const elapsed = c.elapsedMs;
      const what = elapsed === null
        ? `A cell this server did not send (an earlier awrepl mcp process's, or another client's) is queued in session ${name}; call \`wait\` again, or \`interrupt\`.`
        : `A cell this server did not send (an earlier awrepl mcp process's, or another client's) is still running in session ${name} after ${
          seconds(elapsed)
        }; its output is not shown here. Call \`wait\` again to collect its result, or \`interrupt\` to stop it.`;
      return runningContent(emptyResult(name, "running", elapsed ?? 0), what);
    }
    // idle: someone else collected our kept copy (`awrepl -s NAME wait` in a shell, say); this
    // process received the result anyway.
    if (cell?.settled) return this.handOn(cell);
    return idleContent(name, `Nothing to wait for in session ${name}: no cell of this server is running and no result was kept.`);
  }

  /** A settled cell's outcome for the agent; the cell is forgotten. */
  private handOn(cell: Cell): ToolResult {
    this.forget(cell);
    if (cell.result) return execContent(cell.result, this.o);
    throw cell.error;
  }

  private forget(cell: Cell): void {
    const left = (this.cells.get(cell.session) ?? []).filter((c) => c !== cell);
    if (left.length) this.cells.set(cell.session, left);
    else this.cells.delete(cell.session);
  }
}

/** collect, with a session that does not run (closed, or its supervisor stopped) as nothing to wait for. */
async function collectOrIdle(remote: RemoteSession, waitMs: number, signal?: AbortSignal): Promise<Collected> {
  try {
    return await remote.collect(waitMs, { signal });
  } catch (err) {
    if (err instanceof AwreplError && err.code === "session_not_found") return { state: "idle" };
    throw err;
  }
}

function sameResult(a: ExecResult, b: ExecResult): boolean {
  return a.duration_ms === b.duration_ms && a.status === b.status && a.stdout === b.stdout && a.value === b.value;
}

function stillRunning(name: string, elapsedMs: number): string {
  return `[awrepl] The cell is still running in session ${name} after ${seconds(elapsedMs)}; it goes on. Call \`wait\` to collect its result, or \`interrupt\` to stop it.`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function ago(t: number): string {
  const s = Math.round((Date.now() - t) / 1000);
  return s < 90 ? `${s} s ago` : `${Math.round(s / 60)} min ago`;
}

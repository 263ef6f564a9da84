// A worker's life in one place (what lib/session/session_state.ts is to a session): the phase its
// process is in (starting -> ready -> ending -> ended) and why it ends, as one union whose every
// change one function checks (checkMove). An impossible worker cannot be written down: an exit
// without an end, a transport's kill scheduled for a worker that is not ending, a waiter for `ready`
// beside a worker that is ready, a killed worker later told as merely lost, a reported end undone.
// The public state (WorkerState) is read off the life; it is not kept beside it.
import { AwreplError } from "../core/errors.ts";

/**
 * How the process ended. `reason`, when awrepl knows better than the exit status, says what happened
 * as the rest of "The Python worker ..." (a lost connection, a closed protocol channel).
 */
export type WorkerExit = { code: number | null; signal: string | null; reason?: string };

/**
 * The worker as its owner sees it. A worker awrepl is ending, or whose exit was seen but not yet
 * reported, is still what it was ("starting" or "ready": a request still goes out, and is told
 * undelivered), except after close(), which says "closed" at once and for good.
 */
export type WorkerState = "starting" | "ready" | "closed" | "dead";

/** start()'s wait for the `ready` event. */
export type ReadyWaiter = { readonly promise: Promise<void>; resolve(): void; reject(err: Error): void };

export function readyWaiter(): ReadyWaiter {
  let resolve!: () => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/**
 * Why awrepl ends a worker. A cause only rises (shutdown < lost < killed): a kill after a close is a
 * kill, and a loss declared after a kill is still told as a kill.
 */
export type EndCause =
  /** close(): asked in band to shut down (pending requests failed with worker_closed). */
  | { by: "shutdown" }
  /** Given up on while not dead by itself (a silent heartbeat, a closed channel): `reason` goes into its exit. */
  | { by: "lost"; reason: string }
  /** kill(): a deadline, a close past its grace, a start past its timeout, a frame past the cap. */
  | { by: "killed" };

/** What a worker carries from the moment its end begins (awrepl ends it, or its exit is seen). */
type EndFacts = {
  /** close() was called: requests fail with worker_closed, and the state says "closed". */
  closed: boolean;
  /** start()'s waiter while no `ready` came (one can still come with the last frames). */
  waiter: ReadyWaiter | null;
  /** A transport's kill, scheduled after its in-band exit (the far side's grace); cleared at the transport's exit. */
  transportKill: ReturnType<typeof setTimeout> | null;
};

export type LifeStarting = { phase: "starting"; waiter: ReadyWaiter };
export type LifeReady = { phase: "ready" };
/** awrepl is ending it; its exit is not seen yet. */
export type LifeEnding = { phase: "ending"; cause: EndCause } & EndFacts;
/**
 * Its exit was seen (cause null: it ended by itself). `reported` once the last frames were read and
 * every pending request rejected.
 */
export type LifeEnded = { phase: "ended"; exit: WorkerExit; cause: EndCause | null; reported: boolean } & EndFacts;

export type WorkerLife = LifeStarting | LifeReady | LifeEnding | LifeEnded;

export function stateOf(life: WorkerLife): WorkerState {
  if (life.phase === "starting" || life.phase === "ready") return life.phase;
  if (life.closed) return "closed";
  if (life.phase === "ended" && life.reported) return "dead";
  return life.waiter ? "starting" : "ready";
}

export function causeOf(life: WorkerLife): EndCause | null {
  return life.phase === "ending" || life.phase === "ended" ? life.cause : null;
}

const RANK: Record<EndCause["by"], number> = { shutdown: 0, lost: 1, killed: 2 };

/** awrepl ends the worker for `cause` (a graver cause it had stays). */
export function ending(life: Exclude<WorkerLife, LifeEnded>, cause: EndCause): LifeEnding {
  if (life.phase === "ending") return { ...life, cause: RANK[cause.by] > RANK[life.cause.by] ? cause : life.cause };
  return { phase: "ending", cause, closed: false, waiter: life.phase === "starting" ? life.waiter : null, transportKill: null };
}

/** close(): closed for good; asked to shut down, unless its end (a graver cause, its own exit) is under way. */
export function closing(life: LifeEnded): LifeEnded;
export function closing(life: Exclude<WorkerLife, LifeEnded>): LifeEnding;
export function closing(life: WorkerLife): LifeEnding | LifeEnded;
export function closing(life: WorkerLife): LifeEnding | LifeEnded {
  return { ...(life.phase === "ended" ? life : ending(life, { by: "shutdown" })), closed: true };
}

/** Its exit was seen: the end keeps what it had (cause, closed, waiter, transport's kill). */
export function ended(life: Exclude<WorkerLife, LifeEnded>, exit: WorkerExit): LifeEnded {
  if (life.phase === "ending") return { ...life, phase: "ended", exit, reported: false };
  return { phase: "ended", exit, cause: null, closed: false, waiter: life.phase === "starting" ? life.waiter : null, transportKill: null, reported: false };
}

/** A `ready` while start() waits for one: the life without the waiter, and the waiter to resolve; null when none waits. */
export function readied(life: WorkerLife): { next: WorkerLife; waiter: ReadyWaiter } | null {
  if (stateOf(life) !== "starting") return null;
  if (life.phase === "starting") return { next: { phase: "ready" }, waiter: life.waiter };
  if (life.phase === "ready" || life.waiter === null) return null;
  return { next: { ...life, waiter: null }, waiter: life.waiter };
}

const FORWARD: Record<WorkerLife["phase"], readonly WorkerLife["phase"][]> = {
  starting: ["ready", "ending", "ended"],
  ready: ["ending", "ended"],
  ending: ["ending", "ended"],
  ended: ["ended"],
};

/** Throws when a worker may not go from `from` to `to` (a bug in Worker, not the user's). */
export function checkMove(from: WorkerLife, to: WorkerLife): void {
  const wrong = wrongMove(from, to);
  if (wrong) throw new AwreplError("internal", `A worker cannot go from ${from.phase} to ${to.phase}: ${wrong}`);
}

function wrongMove(from: WorkerLife, to: WorkerLife): string | null {
  if (!FORWARD[from.phase].includes(to.phase)) return "a life only goes forward";
  if (to.phase === "starting" || to.phase === "ready") return null;
  if (from.phase === "starting" || from.phase === "ready") {
    // The end begins: with the waiter it had (none once ready), nothing scheduled, nothing reported.
    if (to.waiter !== (from.phase === "starting" ? from.waiter : null)) return "its waiter for ready is the one it had";
    if (to.transportKill !== null) return "a transport's kill is scheduled only while it ends";
    if (to.phase === "ended" && (to.reported || to.closed)) return "an exit is reported after its last frames, and close() moves by itself";
    return null;
  }
  if (RANK[to.cause?.by ?? "shutdown"] < RANK[from.cause?.by ?? "shutdown"] || (from.cause && !to.cause)) return "the cause of an end only rises";
  if (from.closed && !to.closed) return "a closed worker stays closed";
  if (to.waiter !== from.waiter && to.waiter !== null) return "its waiter for ready only goes";
  if (to.transportKill !== from.transportKill) {
    if (from.transportKill !== null && to.transportKill !== null) return "a transport's kill is scheduled once";
    if (from.transportKill === null && !(from.phase === "ending" && to.phase === "ending")) return "a transport's kill is scheduled only while it ends";
  }
  if (from.phase === "ending" && to.phase === "ended") {
    if (to.cause !== from.cause || to.closed !== from.closed || to.waiter !== from.waiter || to.transportKill !== from.transportKill || to.reported) {
      return "its exit changes nothing but the phase";
    }
  }
  if (from.phase === "ended" && to.phase === "ended") {
    if (to.exit !== from.exit || to.cause !== from.cause) return "an end has one exit and one cause";
    if (from.reported && (!to.reported || to.closed !== from.closed || to.waiter !== from.waiter)) return "a reported end is final";
    if (to.reported && to.waiter !== null) return "a reported end leaves no waiter";
  }
  return null;
}

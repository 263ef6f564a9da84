// A session's calls run one at a time in arrival order, and this is the one place that says how a call
// waits for its turn: no longer than its bound (a cell's timeout covers its wait), and a call withdrawn
// while it waits (its signal aborts), or still waiting when the session closes, never runs. An idle
// session starts a call at once (the hot path of one call after another); a busy one chains it behind
// the tail. Whoever holds a session (the supervisor, a library caller) queues nowhere else.
import type { NeverRan } from "./cell.ts";

export type CallQueueHooks = {
  /** Why calls are refused now (a closed session), asked when a call arrives and again when it starts. */
  refusal(): Error | null;
  /** Runs as each call starts. */
  onStart(): void;
};

/** How one call waits for its turn. */
export type Turn = {
  /** The longest it waits, in ms; 0 or absent: as long as it takes. */
  waitMs?: number;
  /** Withdraws it while it waits (one aborted already never starts); once it runs, its task heeds the signal. */
  signal?: AbortSignal;
  /** Runs as it gets its turn, before its task. */
  onStart?(): void;
};

/** Why a call never ran (its wait ran out, or it was withdrawn), and how long it waited. */
export class MissedTurn extends Error {
  constructor(
    readonly reason: NeverRan,
    readonly waitedMs: number,
  ) {
    super(reason.why === "timeout" ? `The call waited ${reason.timeoutMs} ms for its turn and never ran` : "The call was withdrawn before it ran");
  }
}

export class CallQueue {
  private tail: Promise<unknown> = Promise.resolve();
  /** The calls waiting for their turn, each by the way it gives up. */
  private readonly waiters = new Set<(error: Error) => void>();
  /** Calls started or waiting in the chain; 0 means the next call may start at once. */
  private inFlight = 0;

  constructor(private readonly hooks: CallQueueHooks) {}

  /** Calls waiting for their turn. */
  get waiting(): number {
    return this.waiters.size;
  }

  /**
   * Runs `task` (given how long the call waited) after every call added before it has settled; rejects
   * at once when calls are refused, and with MissedTurn when the call gives up its place (`turn`).
   */
  add<T>(task: (waitedMs: number) => Promise<T>, turn: Turn = {}): Promise<T> {
    const refused = this.hooks.refusal();
    if (refused) return Promise.reject(refused);
    const { waitMs = 0, signal } = turn;
    if (signal?.aborted) return Promise.reject(new MissedTurn({ why: "withdrawn" }, 0));
    const arrived = performance.now();
    const waited = () => performance.now() - arrived;
    return new Promise<T>((resolve, reject) => {
      let stopWaiting = () => {};
      const giveUp = (error: Error) => {
        if (!this.waiters.delete(giveUp)) return;
        stopWaiting();
        reject(error);
      };
      const start = (): Promise<T | undefined> => {
        if (!this.waiters.delete(giveUp)) return Promise.resolve(undefined); // it gave up its place meanwhile
        stopWaiting();
        const refusedNow = this.hooks.refusal();
        if (refusedNow) return Promise.reject(refusedNow);
        const waitedMs = waited();
        // A timer that fires late (a busy event loop) does not let a call run past its bound.
        if (waitMs > 0 && waitedMs >= waitMs) return Promise.reject(new MissedTurn({ why: "timeout", timeoutMs: waitMs }, waitedMs));
        try {
          this.hooks.onStart();
          turn.onStart?.();
          return task(waitedMs);
        } catch (err) {
          return Promise.reject(err);
        }
      };
      this.waiters.add(giveUp);
      const slot = this.inFlight === 0 ? start() : this.tail.then(start, start);
      this.inFlight++;
      const settled = () => {
        this.inFlight--;
      };
      // Counted done before the caller hears the outcome: the caller's next call starts at once.
      this.tail = slot.then(settled, settled);
      slot.then((value) => resolve(value as T), reject);
      if (this.waiters.has(giveUp)) stopWaiting = boundWait(waitMs, signal, waited, giveUp);
    });
  }

  /** Every call still waiting gives up its place with `error` (the session closed): none of them runs. */
  refuseWaiting(error: Error): void {
    for (const giveUp of [...this.waiters]) giveUp(error);
  }
}

/** Ends a wait after `waitMs` (0: never) or when `signal` aborts; returns the disarm. */
function boundWait(waitMs: number, signal: AbortSignal | undefined, waited: () => number, giveUp: (error: Error) => void): () => void {
  const timer = waitMs > 0 ? setTimeout(() => giveUp(new MissedTurn({ why: "timeout", timeoutMs: waitMs }, waited())), waitMs) : undefined;
  const onAbort = () => giveUp(new MissedTurn({ why: "withdrawn" }, waited()));
  signal?.addEventListener("abort", onAbort, { once: true });
  return () => {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  };
}

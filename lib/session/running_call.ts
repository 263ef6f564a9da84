// A request in flight and what can happen to it besides its own events: its deadline (interrupted at
// the timeout, the worker's process group killed after the grace period), and interrupts from the user
// (interrupt(), an abort signal). The flags it keeps say which of those happened, for its result.
import type { CellFlags } from "./cell.ts";
import type { Worker } from "../worker/worker.ts";

export type RunningCall = CellFlags & {
  readonly id: string;
  readonly worker: Worker;
  /** Stops the deadline's timers (the request is over). */
  disarm(): void;
};

/**
 * Arms the deadline of request `id` on `worker`: at timeoutMs (0 = none) it is interrupted, and
 * graceMs later the worker's process group is killed.
 */
export function watchDeadline(worker: Worker, id: string, timeoutMs: number, graceMs: number): RunningCall {
  const call: RunningCall = { id, worker, userInterrupted: false, timedOut: false, killed: false, disarm: () => undefined };
  if (timeoutMs <= 0) return call;
  let grace: ReturnType<typeof setTimeout> | undefined;
  const deadline = setTimeout(() => {
    call.timedOut = true;
    worker.interrupt(id);
    grace = setTimeout(() => {
      call.killed = true;
      worker.kill();
    }, graceMs);
  }, timeoutMs);
  call.disarm = () => {
    clearTimeout(deadline);
    clearTimeout(grace);
  };
  return call;
}

/** The user's interrupt (interrupt(), Ctrl-C, an abort signal): the request stops, the state stays. */
export function interruptByUser(call: RunningCall): void {
  call.userInterrupted = true;
  call.worker.interrupt(call.id);
}

/** Interrupts `call` when `signal` aborts (at once if it has). Returns the unhooking function. */
export function interruptOnAbort(call: RunningCall, signal: AbortSignal | undefined): () => void {
  if (!signal) return () => undefined;
  const onAbort = () => interruptByUser(call);
  if (signal.aborted) {
    onAbort();
    return () => undefined;
  }
  signal.addEventListener("abort", onAbort, { once: true });
  return () => signal.removeEventListener("abort", onAbort);
}

// Ctrl-C while a cell runs, the same for `run` and `serve`: it interrupts the cell, not the session.
// The first press aborts the call (the session interrupts the cell, or withdraws it while it still
// waits its turn); what a later press does is the command's choice, and a command may be told once
// when the cell has outlived a grace period after the first press (code in C can ignore interrupts).
export type CtrlCOptions = {
  /** Every press, the first included. */
  onPress?(): void;
  /** A later press while the call still runs (serve interrupts again; run stops waiting). */
  onRepeat(): void;
  /** Called once, `graceMs` after the first press, unless the watch was disposed by then. */
  stuck?: { graceMs: number; then(): void };
};

export type CtrlCWatch = {
  /** Aborted by the first press: pass it to the session's execute(). */
  readonly signal: AbortSignal;
  /** Stops listening (and cancels the grace timer). */
  dispose(): void;
};

export function watchCtrlC(options: CtrlCOptions): CtrlCWatch {
  const abort = new AbortController();
  let stuck: ReturnType<typeof setTimeout> | undefined;
  const onSigint = () => {
    options.onPress?.();
    if (abort.signal.aborted) {
      options.onRepeat();
      return;
    }
    abort.abort();
    if (options.stuck) stuck = setTimeout(options.stuck.then, options.stuck.graceMs);
  };
  process.on("SIGINT", onSigint);
  return {
    signal: abort.signal,
    dispose() {
      clearTimeout(stuck);
      process.off("SIGINT", onSigint);
    },
  };
}

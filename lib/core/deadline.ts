// The one "this promise, or give up after N ms" of the code base (after Deno std's async/deadline.ts):
// `deadline(promise, ms, what)` settles as `promise` does, or rejects with a DeadlineError that names
// `what` and the ms. Its timer is cleared whichever comes first, so a wait that ended leaves no timer
// behind to hold a process open or to fire into a later state. A caller that gives up differently
// (a value instead, its own error) catches the DeadlineError and says so where it waits.
// Light on imports: the CLI's hot path loads it (a client waiting for the supervisor's hello).
import { AwreplError } from "./errors.ts";

export type DeadlineOptions = {
  /** Gives up early, rejecting with the signal's reason, when it aborts (at once if it already has). */
  signal?: AbortSignal;
  /** The timer alone does not keep the process alive (a wait on something that does, a socket). */
  unref?: boolean;
};

/** `what` did not settle within `ms`. A timeout, for a caller that lets it through. */
export class DeadlineError extends AwreplError {
  constructor(
    readonly what: string,
    readonly ms: number,
  ) {
    super("timeout", `Gave up waiting for ${what} after ${ms} ms`);
  }
}

/**
 * `promise`'s outcome if it settles within `ms` (no limit when `ms` is not finite), else a rejection
 * with DeadlineError(what, ms). A later rejection of `promise` is handled here (never unhandled).
 */
export function deadline<T>(promise: Promise<T>, ms: number, what: string, options: DeadlineOptions = {}): Promise<T> {
  const { signal } = options;
  return new Promise<T>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = () => {
      done();
      reject(signal?.reason);
    };
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    promise.then(
      (value) => {
        done();
        resolve(value);
      },
      (err) => {
        done();
        reject(err);
      },
    );
    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    // setTimeout(fn, Infinity) would fire at once: an unlimited wait gets no timer.
    if (!Number.isFinite(ms)) return;
    timer = setTimeout(() => {
      done();
      reject(new DeadlineError(what, ms));
    }, ms);
    if (options.unref) (timer as { unref?(): void }).unref?.();
  });
}

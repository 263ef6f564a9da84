// A session's calls run one at a time in arrival order. An idle session starts a call at once (the hot
// path of one call after another); a busy one chains it behind the tail.

export type CallQueueHooks = {
  /** Why calls are refused now (a closed session), asked when a call arrives and again when it starts. */
  refusal(): Error | null;
  /** Runs as each call starts. */
  onStart(): void;
};

export class CallQueue {
  private tail: Promise<unknown> = Promise.resolve();
  /** Calls that arrived and have not started yet. */
  private queued = 0;
  /** Calls started or waiting; 0 means the next call may start at once. */
  private inFlight = 0;

  constructor(private readonly hooks: CallQueueHooks) {}

  /** Calls waiting for their turn. */
  get waiting(): number {
    return this.queued;
  }

  /** Runs `task` after every call added before it has settled; rejects at once when calls are refused. */
  add<T>(task: () => Promise<T>): Promise<T> {
    const refused = this.hooks.refusal();
    if (refused) return Promise.reject(refused);
    this.queued++;
    const start = () => {
      this.queued--;
      const refusedNow = this.hooks.refusal();
      if (refusedNow) return Promise.reject(refusedNow);
      this.hooks.onStart();
      return task();
    };
    const result = this.inFlight === 0 ? start() : this.tail.then(start, start);
    this.inFlight++;
    const settled = () => {
      this.inFlight--;
    };
    this.tail = result.then(settled, settled);
    return result;
  }
}

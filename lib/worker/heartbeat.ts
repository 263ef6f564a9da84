// The heartbeat of a worker behind a named transport (ssh, docker/podman/kubectl exec): others never
// need one, since the pipe's hang-up reaches the runtime's watchdog. Both ends watch (docs/protocol.md,
// "Exit, heartbeat and cleanup"): the runtime's watchdog ends its process group after `timeoutMs`
// without a ping (even in a C loop), so a far side whose host went silent ends itself; and here a
// worker that has sent nothing for `timeoutMs` is declared lost and its transport ended, unless it is
// at work on a request it got while it was answering (a cell in a C loop cannot answer; that
// request's own timeout covers it). A request sent into a silence that had already lasted two and a
// half pings does not count as work: the next call after an unnoticed partition fails in seconds,
// named, instead of waiting for its timeout.

export type HeartbeatOptions = {
  /** How often the host pings. Default 1 s. */
  intervalMs: number;
  /** Silence that ends the far side (its watchdog) and, when idle, makes the host declare it lost. Default 5 s. */
  timeoutMs: number;
};

export const DEFAULT_HEARTBEAT: HeartbeatOptions = { intervalMs: 1_000, timeoutMs: 5_000 };

/** What a heartbeat needs of its worker. */
export type HeartbeatTarget = {
  /** Sends a request with an id (so its answer counts as hearing from the worker); its outcome is not awaited. */
  send(request: { type: "heartbeat"; timeout_ms: number } | { type: "ping" }): void;
  /** The worker takes requests (a beat of one that does not does nothing). */
  listening(): boolean;
  /** At work on a request it got while it was answering: its silence may be a C loop. */
  atWork(): boolean;
  /** Gives the worker up as lost; `reason` goes on "The Python worker ...". */
  lose(reason: string): void;
};

export class Heartbeat {
  /** When the worker last sent anything: the evidence that it is alive. */
  private lastHeardAt: number;
  private timer: ReturnType<typeof setInterval> | null;
  /** Silence longer than this (two pings and a half unanswered) makes a request sent now suspect. */
  private readonly silenceMs: number;

  /** Arms the runtime's watchdog, then pings every `intervalMs`. */
  constructor(
    private readonly options: HeartbeatOptions,
    private readonly worker: HeartbeatTarget,
  ) {
    worker.send({ type: "heartbeat", timeout_ms: options.timeoutMs });
    this.lastHeardAt = Date.now();
    this.silenceMs = 2.5 * options.intervalMs;
    this.timer = setInterval(() => this.beat(), options.intervalMs);
    this.timer.unref?.();
  }

  /** The worker sent something. */
  heard(): void {
    this.lastHeardAt = Date.now();
  }

  /** True when a request sent now goes into a silence (so it does not hold off the declaration of a loss). */
  silent(): boolean {
    return this.timer !== null && Date.now() - this.lastHeardAt > this.silenceMs;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private beat(): void {
    if (!this.worker.listening()) return;
    const silentMs = Date.now() - this.lastHeardAt;
    if (!this.worker.atWork() && silentMs > this.options.timeoutMs) {
      this.worker.lose(`was lost: no answer to the heartbeat for ${Math.round(silentMs / 1000)} s (connection lost?)`);
      return;
    }
    // With an id, so the answer counts as hearing from it; unanswered ones are dropped with the worker.
    this.worker.send({ type: "ping" });
  }
}

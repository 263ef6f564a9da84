// When the supervisor ends, and how. It exits on `stop`, on SIGTERM/SIGINT/SIGHUP, after idleExitMs
// with no sessions and no clients, or when its socket is taken away; every exit snapshots every
// session first (the next use of a name restores it) and ends every worker. Meanwhile, with
// sessionIdleMs set, sessions nobody used for that long are parked: snapshotted and closed, so their
// memory is given back. If the supervisor is SIGKILLed, the workers see EOF on their stdin and exit
// by themselves (runtime.py).
import { statSync } from "node:fs";
import { deadline, DeadlineError } from "../core/deadline.ts";
import type { Config } from "../settings/config.ts";
import type { HomeLayout } from "../settings/home.ts";
import type { StopSnapshot } from "../protocol/supervisor.ts";
import type { ReplSession } from "../session/session.ts";
import { clearHeld, defaultSnapshotPath, markHeld } from "../session/snapshot_files.ts";
import type { SpareWorkers } from "../worker/spare.ts";
import type { ClientConnection } from "./client_connection.ts";
import type { OwnedSocket } from "./listener.ts";
import { isUnsaved, snapshotBeforeStop } from "./persistence.ts";
import type { SessionTable } from "./session_table.ts";

/** How often the supervisor checks that its socket is still its own. */
const SOCKET_CHECK_MS = 10_000;
/** How long a stop waits for the workers to end before exiting anyway. */
const CLOSE_WAIT_MS = 10_000;

/** What the lifecycle watches and ends. */
export type LifecycleHost = {
  readonly layout: HomeLayout;
  readonly config: Config;
  readonly sessions: SessionTable;
  readonly spares: SpareWorkers;
  readonly connections: ReadonlySet<ClientConnection>;
  readonly log: (line: string) => void;
};

export class Lifecycle {
  private socket: OwnedSocket | null = null;
  private idleTimer: ReturnType<typeof setTimeout> | null = null;
  private stopRun: Promise<void> | null = null;
  /** The stop's snapshot phase: what every session's state came to (a waiting `stop` request gets it). */
  private snapshotted: Promise<StopSnapshot[]> | null = null;
  /** parkIdleSessions is running. */
  private parking = false;
  private finished: (code: number) => void = () => {};

  constructor(private readonly host: LifecycleHost) {}

  /** True once a stop has begun: requests are refused from then on. */
  get stopping(): boolean {
    return this.stopRun !== null;
  }

  /** Watches signals, the socket and idleness; resolves the exit status once the supervisor has stopped. */
  run(socket: OwnedSocket): Promise<number> {
    this.socket = socket;
    const done = new Promise<number>((resolve) => {
      this.finished = resolve;
    });
    for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
      process.on(signal, () => void this.stop(`received ${signal}`));
    }
    setInterval(() => this.checkSocket(), SOCKET_CHECK_MS).unref();
    const sessionIdle = this.host.config.sessionIdleMs;
    if (sessionIdle > 0) setInterval(() => void this.parkIdleSessions(), Math.min(60_000, Math.max(250, sessionIdle / 4))).unref();
    this.checkIdle();
    return done;
  }

  /** Sessions or connections came or went: arms the idle exit when there are none, disarms it otherwise. */
  checkIdle(): void {
    const { sessions, connections, config } = this.host;
    const idle = sessions.size === 0 && connections.size === 0 && config.idleExitMs > 0;
    if (!idle) {
      if (this.idleTimer) clearTimeout(this.idleTimer);
      this.idleTimer = null;
      return;
    }
    this.idleTimer ??= setTimeout(() => {
      this.idleTimer = null;
      if (sessions.size === 0 && connections.size === 0) void this.stop(`idle for ${config.idleExitMs} ms`);
    }, config.idleExitMs);
  }

  /**
   * Stops the supervisor: unlinks its socket (if still its own), snapshots every session with a live
   * worker, ends every worker, then resolves run()'s promise. Resolves (early) with what became of
   * every session's state, once the snapshots are done and before the workers end, so a waiting
   * client hears it. `orphaned`: the socket path is no longer ours, so another supervisor may hold
   * these names now (see mayOverwriteSnapshot).
   */
  stop(reason: string, orphaned = false): Promise<StopSnapshot[]> {
    if (this.snapshotted) return this.snapshotted;
    let snapshotted: (outcomes: StopSnapshot[]) => void = () => {};
    this.snapshotted = new Promise((resolve) => (snapshotted = resolve));
    this.stopRun = (async () => {
      const { sessions, spares, connections, log, layout } = this.host;
      log(`stopping: ${reason}`);
      if (this.idleTimer) clearTimeout(this.idleTimer);
      // Unlink first, so a new client starts a new supervisor instead of reaching this one.
      this.socket?.close();
      // Every planned stop (stop, a client of another version, a signal, idle exit) snapshots first;
      // the next use of a name restores it, and hears it when its state could not be saved.
      const live = sessions.live();
      const writable = orphaned ? live.filter(([name, session]) => this.mayOverwriteSnapshot(name, session)) : live;
      const outcomes: StopSnapshot[] = [];
      try {
        outcomes.push(...(await snapshotBeforeStop(writable, log, { home: layout.home, stop: reason })));
      } catch (err) {
        log(`snapshots before the stop failed: ${(err as Error)?.stack ?? err}`);
      }
      for (const [name] of live) {
        if (writable.some(([n]) => n === name)) continue;
        outcomes.push({ session: name, status: "not_written", error: "the snapshot on disk is newer than this session's last call (another supervisor owns the name now)" });
        // Nothing of this session's is lost: the state on disk is newer than its last call.
        clearHeld(layout.home, name);
      }
      const unsaved = outcomes.filter(isUnsaved).map((o) => o.session);
      if (unsaved.length) log(`stopping with ${unsaved.length} session(s) NOT saved: ${unsaved.join(", ")}`);
      snapshotted(outcomes);
      const closing = Promise.all([sessions.closeAll({ keepFiles: true }), spares.closeAll()]);
      // Not waiting longer than CLOSE_WAIT_MS: the stop goes on without them then.
      await deadline(closing, CLOSE_WAIT_MS, "the sessions and spare workers to close", { unref: true }).catch((err) => {
        if (!(err instanceof DeadlineError)) throw err;
      });
      for (const conn of connections) conn.end();
      log("stopped");
      this.finished(0);
    })();
    return this.snapshotted;
  }

  /**
   * Sessions with no call for sessionIdleMs are snapshotted and closed, keeping the snapshot: their
   * worker's memory is given back, and the next use of the name restores them.
   */
  private async parkIdleSessions(): Promise<void> {
    if (this.stopRun || this.parking) return;
    const { sessions, config, log } = this.host;
    this.parking = true;
    try {
      for (const [name, session] of sessions.idleFor(config.sessionIdleMs)) {
        const [outcome] = await snapshotBeforeStop([[name, session]], log, { home: this.host.layout.home, stop: "parking an idle session", record: false });
        if (!outcome || outcome.status !== "saved") continue; // keep it running rather than lose its state
        if (await sessions.closeIfIdle(name)) log(`session ${name}: closed after ${config.sessionIdleMs} ms idle; its snapshot is kept`);
        else this.holdAgain(name); // a call came meanwhile: it runs on, newer than the snapshot
      }
    } finally {
      this.parking = false;
    }
  }

  /** A session whose saved snapshot removed its marker (snapshotBeforeStop) runs on after all: marked again. */
  private holdAgain(name: string): void {
    try {
      markHeld(this.host.layout.home, name);
    } catch (err) {
      this.host.log(`session ${name}: cannot mark its state as held again: ${(err as Error).message}`);
    }
  }

  /** Another supervisor took the socket path (or it was deleted): nobody can reach us any more. */
  private checkSocket(): void {
    if (this.stopRun || !this.socket || this.socket.stillOurs()) return;
    void this.stop(`socket ${this.socket.path} was removed or replaced`, true);
  }

  /**
   * Once orphaned, a name's default snapshot is written only when the one on disk is older than this
   * session's last activity (nobody wrote a newer state since), never over a newer one.
   */
  private mayOverwriteSnapshot(name: string, session: ReplSession): boolean {
    const mtime = statSync(defaultSnapshotPath(this.host.layout.home, name), { throwIfNoEntry: false })?.mtimeMs;
    if (mtime === undefined || mtime < session.lastActiveAt) return true;
    this.host.log(`session ${name}: not snapshotted: the snapshot on disk is newer than this session's last call (another supervisor owns the name now)`);
    return false;
  }
}

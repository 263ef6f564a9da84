// Pre-started, warmed workers, so a new session's first result does not wait for Python to start
// and for the runtime's first request (which sets up its event loop: ~15-25 ms here). A long-lived
// host (the supervisor) keeps one spare per launch key: the same command, directory and environment,
// since none of those can change after a process has started. Starting a session takes the spare
// if one matches and starts the next spare once its own worker is ready.
import { createHash } from "node:crypto";
import type { Worker } from "./worker.ts";

/**
 * The key a worker must match to be adopted: its command line, directory and environment, and the
 * sandbox profile it runs under (`profile`: its JSON, "" for none; the bwrap argv also carries it).
 */
export function spareKey(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv, profile = ""): string {
  const hash = createHash("sha256");
  hash.update(JSON.stringify(argv));
  hash.update("\0");
  hash.update(profile);
  hash.update("\0");
  hash.update(cwd);
  for (const name of Object.keys(env).sort()) {
    hash.update("\0");
    hash.update(name);
    hash.update("=");
    hash.update(env[name] ?? "");
  }
  return hash.digest("hex");
}

/** How long a spare may take to answer the ping that precedes its adoption. */
const SPARE_PING_LOCAL_MS = 1_000;
const SPARE_PING_REMOTE_MS = 3_000;

export class SpareWorkers implements AsyncDisposable {
  /** Keys in insertion order; the oldest spare is closed when there are more than maxKeys. */
  private readonly spares = new Map<string, Promise<Worker | null>>();
  private closed = false;

  constructor(readonly maxKeys = 2) {}

  get size(): number {
    return this.spares.size;
  }

  /** The process ids of the spares that are ready (for listings and tests). */
  async pids(): Promise<number[]> {
    const workers = await Promise.all(this.spares.values());
    return workers.filter((w): w is Worker => w !== null && w.state === "ready").map((w) => w.pid);
  }

  /** The spare for `key` once it is ready and warm, or null (none, or it failed or died). */
  async take(key: string): Promise<Worker | null> {
    const spare = this.spares.get(key);
    if (!spare) return null;
    this.spares.delete(key);
    const worker = await spare;
    if (!worker || worker.state !== "ready") return null;
    // It may have died a moment ago, before its exit reached us, or (behind ssh, in a container) its
    // transport may be up while the worker behind it is gone: it must answer a ping in time (~0.1 ms
    // locally, one round trip remotely). One that does not is ended, and the caller starts a fresh one.
    if (!(await worker.ping(worker.kind === "transport" ? SPARE_PING_REMOTE_MS : SPARE_PING_LOCAL_MS))) {
      worker.kill();
      return null;
    }
    return worker;
  }

  /** Starts a spare for `key` in the background, unless there is one already. */
  fill(key: string, start: () => Promise<Worker>): void {
    if (this.closed || this.spares.has(key)) return;
    const spare = start()
      .then(async (worker) => {
        // The runtime's first request sets up its loop and imports; answer one now, not in a cell.
        await worker.request({ type: "list_names" });
        if (this.closed) {
          await worker.close(0);
          return null;
        }
        void worker.exited.then(() => {
          if (this.spares.get(key) === spare) this.spares.delete(key);
        });
        return worker;
      })
      .catch(() => {
        if (this.spares.get(key) === spare) this.spares.delete(key);
        return null;
      });
    this.spares.set(key, spare);
    while (this.spares.size > this.maxKeys) {
      const [oldest, old] = this.spares.entries().next().value as [string, Promise<Worker | null>];
      this.spares.delete(oldest);
      void old.then((w) => w?.close(0));
    }
  }

  /** Ends every spare; later fill() calls do nothing. */
  async closeAll(): Promise<void> {
    this.closed = true;
    const all = [...this.spares.values()];
    this.spares.clear();
    await Promise.all(all.map(async (spare) => (await spare)?.close(0)));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.closeAll();
  }
}

// Test harness: runtime.py as a real subprocess, spoken to over its pipes.
// Every wait has a timeout; every spawned runtime is killed (with its process group) by closeAll().
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { readFileSync } from "node:fs";
import { setDefaultTimeout } from "bun:test";
import { PYTHON } from "./common.ts";
import { deadline, DeadlineError } from "../../lib/core/deadline.ts";

// Each test spawns real interpreters; on a loaded machine bun's 5 s default is too tight.
setDefaultTimeout(30_000);

export const RUNTIME_PATH = fileURLToPath(new URL("../../runtime.py", import.meta.url));

export type Event = { event: string; id?: string | null; [k: string]: unknown };

export type ExecOutcome = {
  done: Event;
  stdout: string; // text tagged with the cell's id
  stderr: string;
  rawStdout: string; // id-null text that arrived between the request and its done
  rawStderr: string;
  result: string | null;
  error: Event | null;
  events: Event[]; // every event carrying this id, in order
};

const live = new Set<Runtime>();
let seq = 0;

/** The BOOTSTRAP constant, read from runtime.py's source (the host embeds the same string). */
export function bootstrapSource(): string {
  const src = readFileSync(RUNTIME_PATH, "utf8");
  const m = /^BOOTSTRAP = \(\n([\s\S]*?)\n\)/m.exec(src);
  if (!m?.[1]) throw new Error("BOOTSTRAP constant not found in runtime.py");
  // The constant is a parenthesised run of adjacent Python string literals using only \" escapes.
  return [...m[1].matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((x) => x[1]!.replace(/\\"/g, '"')).join("");
}

export class Runtime {
  readonly proc: ChildProcess;
  readonly events: Event[] = [];
  stderrText = "";
  exitCode: number | null = null;
  exitSignal: string | null = null;
  readonly exited: Promise<void>;
  private waiters: Array<() => void> = [];
  private buf = "";
  badLines: string[] = [];

  private constructor(argv: string[], env: Record<string, string | undefined>, cwd?: string) {
    this.proc = spawn(argv[0]!, argv.slice(1), {
      cwd,
      stdio: ["pipe", "pipe", "pipe"],
      detached: true, // own process group, like the host does
      env: { ...process.env, ...env },
    });
    this.proc.stdin!.on("error", () => {});
    this.proc.stdout!.setEncoding("utf8");
    this.proc.stdout!.on("data", (chunk: string) => this.onData(chunk));
    this.proc.stderr!.setEncoding("utf8");
    this.proc.stderr!.on("data", (chunk: string) => (this.stderrText += chunk));
    this.exited = new Promise((resolve) => {
      this.proc.on("exit", (code, signal) => {
        this.exitCode = code;
        this.exitSignal = signal;
        this.notify();
        resolve();
      });
    });
    live.add(this);
  }

  /** Spawn `PYTHON -u runtime.py` (or through the bootstrap) and wait for `ready`. */
  static async start(
    opts: {
      bootstrap?: boolean;
      env?: Record<string, string | undefined>;
      python?: string;
      timeoutMs?: number;
      cwd?: string;
      /** Run this copy of runtime.py instead of the repository's. */
      script?: string;
    } = {},
  ): Promise<Runtime> {
    const py = opts.python ?? PYTHON;
    const argv = opts.bootstrap ? [py, "-u", "-c", bootstrapSource()] : [py, "-u", opts.script ?? RUNTIME_PATH];
    const rt = new Runtime(argv, opts.env ?? {}, opts.cwd);
    if (opts.bootstrap) {
      const src = readFileSync(RUNTIME_PATH);
      rt.proc.stdin!.write(`${src.length}\n`);
      rt.proc.stdin!.write(src);
    }
    await rt.waitFor((e) => e.event === "ready", opts.timeoutMs ?? 10_000);
    return rt;
  }

  get pid(): number {
    return this.proc.pid!;
  }

  private onData(chunk: string) {
    this.buf += chunk;
    let i: number;
    while ((i = this.buf.indexOf("\n")) >= 0) {
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      try {
        this.events.push(JSON.parse(line) as Event);
      } catch {
        this.badLines.push(line);
      }
    }
    this.notify();
  }

  private notify() {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  /** Resolves with the first event (from index `from`) matching pred; rejects after timeoutMs. */
  async waitFor(pred: (e: Event) => boolean, timeoutMs = 10_000, from = 0): Promise<Event> {
    let stopped = false;
    const found = new Promise<Event>((resolve, reject) => {
      const check = () => {
        for (let k = from; k < this.events.length; k++) {
          if (pred(this.events[k]!)) {
            resolve(this.events[k]!);
            return true;
          }
        }
        if (this.exitCode !== null || this.exitSignal !== null) {
          reject(new Error(`runtime exited (${this.exitCode ?? this.exitSignal}) while waiting; stderr: ${this.stderrText}`));
          return true;
        }
        return stopped;
      };
      const loop = () => {
        if (!check()) this.waiters.push(loop);
      };
      loop();
    });
    try {
      return await deadline(found, timeoutMs, "a runtime event");
    } catch (err) {
      if (!(err instanceof DeadlineError)) throw err;
      stopped = true;
      throw new Error(`timed out after ${timeoutMs} ms; last events: ${JSON.stringify(this.events.slice(-5))}`);
    }
  }

  send(msg: unknown): void {
    this.proc.stdin!.write(JSON.stringify(msg) + "\n");
  }

  sendRaw(data: string | Uint8Array): void {
    this.proc.stdin!.write(data);
  }

  newId(prefix = "r"): string {
    return `${prefix}${++seq}`;
  }

  /** Send an id'd request and wait for its done; returns the done and all events with that id. */
  async request(msg: Record<string, unknown>, timeoutMs = 10_000): Promise<{ done: Event; events: Event[]; start: number }> {
    const id = (msg.id as string | undefined) ?? this.newId(String(msg.type));
    const start = this.events.length;
    this.send({ ...msg, id });
    const done = await this.waitFor((e) => e.event === "done" && e.id === id, timeoutMs, start);
    return { done, events: this.events.slice(start).filter((e) => e.id === id), start };
  }

  async exec(code: string, timeoutMs = 10_000, id?: string): Promise<ExecOutcome> {
    const { done, events, start } = await this.request({ type: "execute", id, code }, timeoutMs);
    const doneAt = this.events.indexOf(done);
    const between = this.events.slice(start, doneAt);
    const text = (evs: Event[], chan: string) => evs.filter((e) => e.event === chan).map((e) => e.text as string).join("");
    const nulls = between.filter((e) => e.id === null);
    const result = events.find((e) => e.event === "result");
    return {
      done,
      events,
      stdout: text(events, "stdout"),
      stderr: text(events, "stderr"),
      rawStdout: text(nulls, "stdout"),
      rawStderr: text(nulls, "stderr"),
      result: result ? (result.text as string) : null,
      error: events.find((e) => e.event === "error") ?? null,
    };
  }

  /** Wait for the process to exit; false on timeout. */
  waitExit(timeoutMs: number): Promise<boolean> {
    return deadline(this.exited.then(() => true), timeoutMs, "the runtime's exit").catch((err) => {
      if (err instanceof DeadlineError) return false;
      throw err;
    });
  }

  kill(): void {
    try {
      process.kill(-this.pid, "SIGKILL");
    } catch {}
    try {
      this.proc.kill("SIGKILL");
    } catch {}
    live.delete(this);
  }
}

/** Kill every runtime (and its process group) still alive: call from afterEach. */
export function closeAll(): void {
  for (const rt of live) rt.kill();
  live.clear();
}

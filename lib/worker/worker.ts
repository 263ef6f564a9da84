// One Python process speaking the runtime protocol: spawn (in its own process group), handshake on
// `ready`, one id -> pending request map, event routing, interrupt, kill. When the process exits,
// every pending request is rejected with one clear error naming the exit code or signal (a request
// the process was already gone for says so: UndeliveredRequestError), and later sends fail at once.
import { type ChildProcess, spawn } from "node:child_process";
import { AwreplError } from "../core/errors.ts";
import { killGroup } from "../core/process.ts";
import { LineSplitter } from "../wire/lines.ts";
import { PipeWriter } from "../wire/pipe_writer.ts";
import type { DisplayEvent, DoneEvent, ErrorEvent, IdRequest, ReadyEvent, RuntimeEvent } from "../protocol/runtime.ts";
import { type RawText, readOutputFrame } from "../wire/output_frames.ts";

export type WorkerState = "starting" | "ready" | "closed" | "dead";

/** Handlers for the events of one request; output with id null goes to the active execute's handlers. */
export type RequestHandlers = {
  output?(stream: "stdout" | "stderr", text: string): void;
  /** Output not yet decoded (lib/wire/output_frames.ts); when absent, `output` gets the decoded text. */
  rawOutput?(stream: "stdout" | "stderr", raw: RawText): void;
  display?(data: Record<string, unknown>, event: DisplayEvent): void;
  result?(text: string): void;
  error?(event: ErrorEvent): void;
};

export type WorkerExit = { code: number | null; signal: string | null };

/**
 * The rejection of a request the process never read: it was gone before the request was written (its
 * exit already seen, or its stdin closed). A caller may send it again to a fresh worker: it cannot have
 * run. (A request written just before the process died may or may not have been read: that one is an
 * ordinary "worker_died".)
 */
export class UndeliveredRequestError extends AwreplError {
  constructor(message: string) {
    super("worker_died", message);
  }
}

export type WorkerListeners = {
  /** Output that belongs to no pending request (a background thread writing between cells). */
  onUnclaimedOutput?(stream: "stdout" | "stderr", text: string): void;
  /** Called once when the process has exited and every pending request has been rejected. */
  onExit?(exit: WorkerExit, worker: Worker): void;
};

export type WorkerOptions = WorkerListeners & {
  /** The command to run: [interpreter, ...args]. */
  argv: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Bytes written to stdin before any request (the bootstrap's length line and the runtime source). */
  stdinPreamble?: Uint8Array;
  /** The Python command as the user gave it, for messages (default: argv joined, bootstrap and all). */
  label?: string;
  /** How long to wait for `ready`. Default 15 s (ssh and containers can be slow). */
  startTimeoutMs?: number;
};

type Pending = {
  id: string;
  type: IdRequest["type"];
  handlers: RequestHandlers | undefined;
  /** Written after the process was gone: it never ran (see UndeliveredRequestError). */
  undelivered: boolean;
  resolve(done: DoneEvent): void;
  reject(err: Error): void;
};

type RequestBody = IdRequest extends infer R ? (R extends IdRequest ? Omit<R, "id"> : never) : never;

const STDERR_KEEP = 8192;
/** Said when a command never got ready: the usual cause is a --python that is not an interpreter. */
const NOT_PYTHON = "(is it a Python interpreter?)";
const START_DETAIL_CHARS = 200;
const UTF8 = new TextDecoder();
/** A frame longer than this is not the protocol; the worker is stopped rather than buffering forever. */
const MAX_LINE_BYTES = 1 << 30;

export function describeExit(exit: WorkerExit): string {
  if (exit.signal) return `was killed by signal ${exit.signal}`;
  return `exited with code ${exit.code}`;
}

export class Worker {
  state: WorkerState = "starting";
  readonly pid: number;
  readonly argv: string[];
  /** What messages call the Python command: the user's command line, not the runtime's bootstrap. */
  readonly label: string;
  ready: ReadyEvent | null = null;
  exit: WorkerExit | null = null;
  /** Resolves when the process has exited and all of its pending requests were rejected. */
  readonly exited: Promise<WorkerExit>;

  private readonly child: ChildProcess;
  private readonly stdin: PipeWriter;
  private readonly pending = new Map<string, Pending>();
  /** The execute request currently running (requests run in order; output with id null is its). */
  private active: Pending | null = null;
  private nextId = 0;
  /** The protocol pipe's lines; the chunks are ours to keep (see LineSplitter). */
  private readonly lines = new LineSplitter(MAX_LINE_BYTES, false, false);
  private stderrTail = "";
  private noise = "";
  private killedByUs = false;
  private resolveExited!: (exit: WorkerExit) => void;
  private readyWaiter: { resolve(): void; reject(err: Error): void } | null = null;
  private listeners: WorkerListeners;

  private constructor(options: WorkerOptions) {
    this.listeners = { onUnclaimedOutput: options.onUnclaimedOutput, onExit: options.onExit };
    this.argv = options.argv;
    this.label = options.label ?? options.argv.join(" ");
    this.exited = new Promise((r) => {
      this.resolveExited = r;
    });
    const [cmd, ...args] = options.argv;
    if (!cmd) throw new AwreplError("no_interpreter", "The Python command is empty");
    this.child = spawn(cmd, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ["pipe", "pipe", "pipe"],
      // Its own process group, so a timeout can kill the worker and everything it started at once.
      detached: process.platform !== "win32",
      windowsHide: true,
    });
    this.pid = this.child.pid ?? -1;
    this.stdin = new PipeWriter(this.child.stdin);
    this.child.on("error", (err) => this.onSpawnError(err));
    this.child.stdin?.on("error", () => {
      // EPIPE after the process died: the exit handler reports it.
    });
    this.child.stdout?.on("data", (chunk: Buffer) => this.onData(chunk));
    this.child.stderr?.setEncoding("utf8");
    this.child.stderr?.on("data", (text: string) => {
      this.stderrTail = (this.stderrTail + text).slice(-STDERR_KEEP);
    });
    this.child.on("exit", (code, signal) => this.onProcessExit({ code, signal }));
  }

  /** Spawns the process and waits for its `ready` event. */
  static async start(options: WorkerOptions): Promise<Worker> {
    const worker = new Worker(options);
    const timeoutMs = options.startTimeoutMs ?? 15_000;
    const ready = new Promise<void>((resolve, reject) => {
      worker.readyWaiter = { resolve, reject };
    });
    if (options.stdinPreamble) worker.stdin.write(options.stdinPreamble);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(
          new AwreplError("no_interpreter", `Python command ${JSON.stringify(worker.label)} did not get ready within ${timeoutMs} ms ${NOT_PYTHON}${worker.startFailureDetail()}`),
        );
      }, timeoutMs);
    });
    try {
      await Promise.race([ready, timeout]);
    } catch (err) {
      worker.kill();
      await worker.exited;
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return worker;
  }

  /** Sends one request and resolves with its `done`; rejects when the worker dies or is closed first. */
  request(body: RequestBody, handlers?: RequestHandlers): Promise<DoneEvent> {
    if (this.state !== "ready") return Promise.reject(this.unavailable(body.type));
    const id = String(++this.nextId);
    return new Promise<DoneEvent>((resolve, reject) => {
      const pending: Pending = { id, type: body.type, handlers, resolve, reject, undelivered: false };
      this.pending.set(id, pending);
      if (body.type === "execute" && this.active === null) this.active = pending;
      // Its exit seen (the rest of its output still on the way) or its stdin closed: the process is gone.
      pending.undelivered = !this.write(JSON.stringify({ ...body, id })) || this.exit !== null;
    });
  }

  /** Replaces the listeners (a spare worker started by one owner is adopted by another). */
  setListeners(listeners: WorkerListeners): void {
    this.listeners = listeners;
  }

  /** The id the latest request() was sent with (read right after the call to target an interrupt at it). */
  get lastId(): string {
    return String(this.nextId);
  }

  /** Asks the runtime to interrupt a request (the running one when no id is given). */
  interrupt(id?: string): void {
    if (this.state !== "ready") return;
    this.write(id === undefined ? '{"type":"interrupt"}' : JSON.stringify({ type: "interrupt", id }));
  }

  /** Kills the whole process group at once. Pending requests are rejected when the exit is seen. */
  kill(): void {
    if (this.exit) return;
    this.killedByUs = true;
    killGroup(this.pid, this.child);
  }

  /** True once kill() was called (a timeout or close), so a caller can tell that death from a crash. */
  get wasKilled(): boolean {
    return this.killedByUs;
  }

  /**
   * Asks the runtime to shut down, waits up to graceMs for the exit, then kills the process group.
   * Pending requests are rejected with "worker_closed".
   */
  async close(graceMs = 1000): Promise<void> {
    if (this.state === "closed" || this.state === "dead") {
      await this.exited;
      return;
    }
    // A running request would hold the shutdown back: interrupt it first.
    const busy = this.pending.size > 0;
    this.state = "closed";
    this.failPending(new AwreplError("worker_closed", "The session was closed while this request was pending"));
    try {
      if (busy) this.stdin.write('{"type":"interrupt"}\n');
      this.stdin.write('{"type":"shutdown"}\n');
      this.stdin.end();
    } catch {
      // Already gone.
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const exitedInTime = await Promise.race([
      this.exited.then(() => true),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(false), graceMs);
      }),
    ]);
    clearTimeout(timer);
    if (!exitedInTime) this.kill();
    await this.exited;
  }

  /** The tail of the process's own stderr and any non-protocol stdout, for error messages. */
  diagnostics(): string {
    const text = `${this.noise}${this.stderrTail}`.trim();
    return text ? `: ${text.split("\n").slice(-5).join("\n")}` : "";
  }

  /**
   * The one line of what a process that never got ready wrote that says why: a Python traceback's
   * last line (the exception), otherwise the first line (a program's usage line, a shell's "not
   * found"); cut short, so a failed start stays a one-line message.
   */
  startFailureDetail(): string {
    const lines = `${this.noise}${this.stderrTail}`.split("\n").map((l) => l.trim()).filter(Boolean);
    const line = lines.some((l) => l.startsWith("Traceback (most recent call last)")) ? lines.at(-1) : lines[0];
    if (!line) return "";
    return `: ${line.length > START_DETAIL_CHARS ? `${line.slice(0, START_DETAIL_CHARS)}...` : line}`;
  }

  /** False when the process is known not to get the line (its stdin is closed); the exit handler reports why. */
  private write(line: string): boolean {
    try {
      return this.stdin.write(`${line}\n`);
    } catch {
      // The exit handler rejects whatever is pending.
      return true;
    }
  }

  private unavailable(type: IdRequest["type"]): AwreplError {
    if (this.state === "closed") return new AwreplError("worker_closed", "The worker was closed");
    if (this.state === "dead" && this.exit) return this.diedError(this.exit, type);
    return new AwreplError("internal", `The worker is not ready (state ${this.state})`);
  }

  /** The worker's death as the error of a pending request; of one it never read when `undelivered` names its type. */
  private diedError(exit: WorkerExit, undelivered?: IdRequest["type"]): AwreplError {
    const how = this.killedByUs ? "was killed by awrepl" : describeExit(exit);
    if (undelivered) return new UndeliveredRequestError(`The Python worker (pid ${this.pid}) ${how} before it got the ${undelivered} request${this.diagnostics()}`);
    return new AwreplError("worker_died", `The Python worker (pid ${this.pid}) ${how}${this.diagnostics()}`);
  }

  private onData(chunk: Buffer): void {
    try {
      this.lines.split(chunk, this.onFrame);
    } catch {
      // Only the line cap throws (onFrame keeps a failing handler's error for diagnostics).
      this.keepNoise(`[a frame longer than ${MAX_LINE_BYTES} bytes]`);
      this.kill();
    }
  }

  /** Keeps a line for diagnostics(): what the process wrote that is not the protocol, or what went wrong reading it. */
  private keepNoise(line: string): void {
    this.noise = `${this.noise}${line}\n`.slice(-STDERR_KEEP);
  }

  /** A handler that throws must not stop the frames that follow (the done would never arrive): said in diagnostics. */
  private keepHandlerFailure(event: string, err: unknown): void {
    this.keepNoise(`[a handler failed on a ${event} event: ${(err as Error)?.message ?? err}]`);
  }

  /** One frame's bytes: output frames are read without decoding their text, the rest parsed. */
  private readonly onFrame = (line: Uint8Array): void => {
    if (line.length === 0) return;
    const frame = readOutputFrame(line);
    if (!frame) {
      this.onLine(UTF8.decode(line));
      return;
    }
    try {
      this.deliverOutput(frame.stream, frame.id, frame.raw);
    } catch (err) {
      this.keepHandlerFailure(frame.stream, err);
    }
  };

  /**
   * The request that output or a display belongs to: the one its id names while that one is pending;
   * id null (fd-level output) and ids of finished cells (their background tasks) belong to the execute
   * that runs now, if any.
   */
  private ownerOf(id: string | null): Pending | null {
    return (id === null ? undefined : this.pending.get(id)) ?? this.active;
  }

  /** Output to its owner's handlers: undecoded when it came undecoded and they take it so; else to the listeners. */
  private deliverOutput(stream: "stdout" | "stderr", id: string | null, output: RawText | string): void {
    const handlers = this.ownerOf(id)?.handlers;
    if (typeof output !== "string" && handlers?.rawOutput) {
      handlers.rawOutput(stream, output);
      return;
    }
    const text = typeof output === "string" ? output : output.text();
    if (handlers?.output) handlers.output(stream, text);
    else this.listeners.onUnclaimedOutput?.(stream, text);
  }

  private onLine(line: string): void {
    let event: RuntimeEvent;
    try {
      event = JSON.parse(line);
    } catch {
      // Not a frame (a remote shell's banner, a crash message): keep it for diagnostics.
      this.keepNoise(line.slice(0, 500));
      return;
    }
    try {
      this.dispatch(event);
    } catch (err) {
      this.keepHandlerFailure(String((event as { event?: unknown } | null)?.event), err);
    }
  }

  private dispatch(event: RuntimeEvent): void {
    switch (event.event) {
      case "stdout":
      case "stderr":
        this.deliverOutput(event.event, event.id, event.text);
        return;
      case "result":
        this.pending.get(event.id)?.handlers?.result?.(event.text);
        return;
      case "display":
        this.ownerOf(event.id)?.handlers?.display?.(event.data, event);
        return;
      case "error": {
        if (event.id === null) {
          // A ProtocolError for a line we sent: nothing to attach it to but diagnostics.
          this.keepNoise(`${event.ename}: ${event.evalue}`);
          return;
        }
        this.pending.get(event.id)?.handlers?.error?.(event);
        return;
      }
      case "done": {
        const p = this.pending.get(event.id);
        if (!p) return;
        this.pending.delete(event.id);
        if (this.active === p) this.active = this.nextActiveExecute();
        p.resolve(event);
        return;
      }
      case "ready":
        if (this.state === "starting") {
          this.ready = event;
          this.state = "ready";
          this.readyWaiter?.resolve();
          this.readyWaiter = null;
        }
        return;
      case "host_request":
        // No host bridge in the library yet: answer so the awaiting cell does not hang.
        this.write(JSON.stringify({ type: "host_reply", id: event.id, data: { error: "no host bridge in this awrepl host" } }));
        return;
    }
  }

  private nextActiveExecute(): Pending | null {
    for (const p of this.pending.values()) if (p.type === "execute") return p;
    return null;
  }

  private onSpawnError(err: Error): void {
    const code = (err as NodeJS.ErrnoException).code;
    const what =
      code === "ENOENT"
        ? `Python command ${JSON.stringify(this.argv[0])} was not found`
        : `Python command ${JSON.stringify(this.label)} could not start: ${err.message}`;
    const error = new AwreplError("no_interpreter", what, { cause: err });
    this.readyWaiter?.reject(error);
    this.readyWaiter = null;
    // A failed spawn emits no "exit": finish here.
    if (!this.exit) this.onProcessExit({ code: null, signal: null }, error);
  }

  private onProcessExit(exit: WorkerExit, spawnError?: AwreplError): void {
    if (this.exit) return;
    this.exit = exit;
    // Let the last frames on stdout (already in the pipe) arrive before failing what is pending.
    const finish = () => {
      if (this.state !== "closed") this.state = "dead";
      // Whatever the worker left in its process group (subprocesses) goes with it.
      if (this.pid > 0) killGroup(this.pid);
      const died = !spawnError && !this.readyWaiter;
      const error =
        spawnError ??
        (died
          ? this.diedError(exit)
          : new AwreplError("no_interpreter", `Python command ${JSON.stringify(this.label)} ${describeExit(exit)} before it was ready ${NOT_PYTHON}${this.startFailureDetail()}`));
      this.readyWaiter?.reject(error);
      this.readyWaiter = null;
      this.failPending(error, died ? exit : undefined);
      this.resolveExited(exit);
      this.listeners.onExit?.(exit, this);
    };
    const stdout = this.child.stdout;
    if (!stdout || stdout.readableEnded || stdout.destroyed || spawnError) {
      finish();
      return;
    }
    let done = false;
    const once = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      finish();
    };
    // A grandchild holding the pipe open must not stall the report forever.
    const timer = setTimeout(once, 200);
    stdout.once("end", once);
    stdout.once("close", once);
  }

  /** Rejects every pending request with `error`; after a death (`diedOf`), undelivered ones say so. */
  private failPending(error: AwreplError, diedOf?: WorkerExit): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    this.active = null;
    for (const p of all) p.reject(p.undelivered && diedOf ? this.diedError(diedOf, p.type) : error);
  }
}

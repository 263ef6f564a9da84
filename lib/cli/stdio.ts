// Writing to stdout/stderr from a command that ends with process.exit(). Under Bun a write to a pipe
// returns before the bytes reach the OS, and process.exit() drops what is still queued (measured:
// 3 MB written, 64 KiB arrived), while `writableLength` and `writableNeedDrain` stay 0. Only a write's
// own callback (or promise) says when it is done. So every write is tracked, and main() waits for the
// last one of each stream before exiting.
//
// Two ways to write, one order:
// - writeStream() (run's output, every error line): under Bun, straight to the file descriptor.
//   Merely touching process.stdout or process.stderr under Bun builds a Node stream, which costs
//   2.5–4 ms of a ~14 ms warm `awrepl -s s run "1+1"`. A write(2) that takes everything at once is
//   the common case and needs no event-loop turn; what a full pipe (EAGAIN) or a partial write leaves
//   goes through Bun.write, which waits for the reader. Elsewhere (Node), process.stdout/stderr.
// - trackStdio() wraps process.stdout/stderr.write for the commands that use the Node streams
//   (commander's help, the supervisor commands, serve). main() installs it only off the fast path.
// A write of either kind made while a write of the other kind is still in flight waits for it, so
// text reaches the OS in the order it was written.
//
// A reader that goes away (`awrepl run ... | head -1`: EPIPE) is not an error of the cell: later
// output to that stream is dropped quietly and the exit status stays the command's.

import { writeSync } from "node:fs";

type StreamName = "stdout" | "stderr";
type Write = (chunk: unknown, encoding?: unknown, callback?: unknown) => boolean;

/** Resolves when the latest write of each stream (of either kind) is done. */
const last: Record<StreamName, Promise<void>> = { stdout: Promise.resolve(), stderr: Promise.resolve() };
/** Writes in flight per stream, by kind. */
const inFlight = { native: { stdout: 0, stderr: 0 }, node: { stdout: 0, stderr: 0 } };
const closed = new Set<StreamName>();
let installed = false;

const bun = typeof Bun !== "undefined" ? Bun : undefined;

function target(name: StreamName): NodeJS.WriteStream {
  return name === "stdout" ? process.stdout : process.stderr;
}

/** Wraps process.stdout/stderr.write so drainStdio() can wait for everything written. Idempotent. */
export function trackStdio(): void {
  if (installed) return;
  installed = true;
  for (const name of ["stdout", "stderr"] as const) {
    const stream = target(name);
    stream.on("error", (err) => streamFailed(name, err));
    const original = stream.write.bind(stream) as Write;
    const tracked: Write = (chunk, encoding, callback) => {
      const cb = typeof encoding === "function" ? encoding : callback;
      const enc = typeof encoding === "function" ? undefined : encoding;
      if (closed.has(name)) {
        if (typeof cb === "function") queueMicrotask(() => cb());
        return true;
      }
      inFlight.node[name]++;
      let done: () => void = () => {};
      const written = new Promise<void>((resolve) => (done = resolve));
      const finish = (err?: Error | null) => {
        inFlight.node[name]--;
        if (err) streamFailed(name, err);
        done();
        if (typeof cb === "function") cb(err);
      };
      const write = (): boolean => {
        try {
          return original(chunk, enc, finish);
        } catch (err) {
          finish(err as Error);
          return true;
        }
      };
      if (inFlight.native[name] === 0) {
        last[name] = written;
        return write();
      }
      // Behind a native write still in flight: keep the order.
      last[name] = last[name].then(write).then(() => written);
      return true;
    };
    (stream as unknown as { write: Write }).write = tracked;
  }
}

/** Resolves once every write made so far has reached the OS (or its reader has gone away). */
export async function drainStdio(): Promise<void> {
  await Promise.all([last.stdout, last.stderr]);
}

/** Writes to stdout/stderr; resolves once the text is handed to the OS. */
export function writeStream(name: StreamName, text: string): Promise<void> {
  if (text === "" || closed.has(name)) return last[name];
  if (!bun || installed) {
    // The Node stream (built anyway once trackStdio() ran): its own queue keeps the order.
    trackStdio();
    target(name).write(text);
    return last[name];
  }
  let rest: string | Uint8Array = text;
  if (inFlight.native[name] === 0 && inFlight.node[name] === 0) {
    const bytes = Buffer.from(text);
    let n = 0;
    try {
      n = writeSync(name === "stdout" ? 1 : 2, bytes);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "EAGAIN" && code !== "EWOULDBLOCK") {
        streamFailed(name, err);
        return last[name];
      }
    }
    if (n >= bytes.length) return last[name];
    rest = bytes.subarray(n);
  }
  inFlight.native[name]++;
  const write = (): Promise<void> =>
    closed.has(name)
      ? Promise.resolve()
      : bun.write(name === "stdout" ? bun.stdout : bun.stderr, rest).then(
          () => {},
          (err: unknown) => streamFailed(name, err),
        );
  const done = () => {
    inFlight.native[name]--;
  };
  const busy = inFlight.native[name] > 1 || inFlight.node[name] > 0;
  last[name] = (busy ? last[name].then(write) : write()).then(done);
  return last[name];
}

let stdoutLost = false;

/** True when stdout failed for a reason other than its reader leaving (a full disk): the result was not delivered. */
export function stdoutWasLost(): boolean {
  return stdoutLost;
}

function streamFailed(name: StreamName, err: unknown): void {
  if (closed.has(name)) return;
  closed.add(name);
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (name === "stdout" && code !== "EPIPE" && code !== "ERR_STREAM_DESTROYED") {
    stdoutLost = true;
    if (!closed.has("stderr")) void writeStream("stderr", `awrepl: cannot write to stdout: ${(err as Error)?.message ?? String(err)}\n`);
  }
}

// Writing to stdout/stderr from a command that ends with process.exit(). Under Bun a write to a pipe
// through process.stdout returns before the bytes reach the OS, and process.exit() drops what is still
// queued (measured: 3 MB written, 64 KiB arrived), while `writableLength` and `writableNeedDrain` stay
// 0. Only a write's own callback (or promise) says when it is done. So every write is tracked, and
// main() waits for the last one of each stream before exiting.
//
// Two ways to write, one order:
// - writeStream() (run's output, every error line, the fast paths): under Bun, through a FileSink of
//   the file descriptor (Bun.stdout.writer()). Merely touching process.stdout or process.stderr under
//   Bun builds a Node stream, which costs ~8 ms of CPU per start, and node:fs (for writeSync) ~1 ms.
//   The sink writes at once what the descriptor takes (the common case: no event-loop turn) and keeps
//   the rest, in order, until the reader takes it (its flush() promise); and it keeps the order when
//   stdout and stderr are one regular file (`>log 2>&1`), which Bun.write does not (Bun.write writes a
//   regular file from a thread pool). Elsewhere (Node), process.stdout/stderr.
// - trackStdio() wraps process.stdout/stderr.write for the commands that use the Node streams
//   (commander, serve, mcp). main() installs it only off the fast paths; writeStream() then writes
//   through the Node streams too, so one queue keeps the order.
//
// A reader that goes away (`awrepl run ... | head -1`: EPIPE) is not an error of the cell: later
// output to that stream is dropped quietly and the exit status stays the command's.
import type { FileSink } from "bun";

type StreamName = "stdout" | "stderr";
type Write = (chunk: unknown, encoding?: unknown, callback?: unknown) => boolean;

/** Resolves when the latest write of each stream (of either kind) is done. */
const last: Record<StreamName, Promise<void>> = { stdout: Promise.resolve(), stderr: Promise.resolve() };
/** writeStream()'s writes still waiting for their reader, per stream. */
const nativeInFlight: Record<StreamName, number> = { stdout: 0, stderr: 0 };
const closed = new Set<StreamName>();
let installed = false;

const bun = typeof Bun !== "undefined" ? Bun : undefined;
/** Under Bun, writeStream()'s writers (made on first use). */
const sinks: Partial<Record<StreamName, FileSink>> = {};

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
      let done: () => void = () => {};
      const written = new Promise<void>((resolve) => (done = resolve));
      const finish = (err?: Error | null) => {
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
      if (nativeInFlight[name] === 0) {
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
  const sink = (sinks[name] ??= (name === "stdout" ? bun.stdout : bun.stderr).writer());
  let waits: Promise<number>[];
  try {
    // Each returns a promise when the descriptor did not take everything at once (it then rejects
    // if the reader goes away before it does).
    waits = [sink.write(text), sink.flush()].filter((w): w is Promise<number> => typeof w !== "number");
  } catch (err) {
    streamFailed(name, err);
    return last[name];
  }
  if (waits.length === 0) return last[name]; // all of it is with the OS
  // The rest waits in the sink (later writes queue behind it there) until the reader takes it.
  nativeInFlight[name]++;
  const done = Promise.all(waits).then(
    () => {},
    (err: unknown) => streamFailed(name, err),
  );
  last[name] = Promise.all([last[name], done]).then(() => {
    nativeInFlight[name]--;
  });
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

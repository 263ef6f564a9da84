// Writing to stdout/stderr from a command that ends with process.exit(). Under Bun a write to a pipe
// returns before the bytes reach the OS, and process.exit() drops what is still queued (measured:
// 3 MB written, 64 KiB arrived), while `writableLength` and `writableNeedDrain` stay 0. Only a write's
// own callback says when it is done. So main() tracks the last write of each stream — every write,
// whoever makes it (run, serve, the supervisor commands) — and waits for it before exiting.
//
// A reader that goes away (`awrepl run ... | head -1`: EPIPE) is not an error of the cell: later
// output to that stream is dropped quietly and the exit status stays the command's.

type StreamName = "stdout" | "stderr";
type Write = (chunk: unknown, encoding?: unknown, callback?: unknown) => boolean;

const last: Record<StreamName, Promise<void>> = { stdout: Promise.resolve(), stderr: Promise.resolve() };
const closed = new Set<StreamName>();
let installed = false;

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
      last[name] = new Promise<void>((resolve) => (done = resolve));
      const finish = (err?: Error | null) => {
        if (err) streamFailed(name, err);
        done();
        if (typeof cb === "function") cb(err);
      };
      try {
        return original(chunk, enc, finish);
      } catch (err) {
        finish(err as Error);
        return true;
      }
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
  if (text === "" || closed.has(name)) return Promise.resolve();
  trackStdio();
  target(name).write(text);
  return last[name];
}

function streamFailed(name: StreamName, err: unknown): void {
  if (closed.has(name)) return;
  closed.add(name);
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (name === "stdout" && code !== "EPIPE" && code !== "ERR_STREAM_DESTROYED" && !closed.has("stderr")) {
    process.stderr.write(`awrepl: cannot write to stdout: ${(err as Error)?.message ?? String(err)}\n`);
  }
}

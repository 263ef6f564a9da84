// The supervisor's socket: newline-delimited connections over it (where it lives: lib/settings/home.ts).
// The client side is the CLI's hot path: under Bun it uses Bun.connect (about 10 ms cheaper per call
// than node:net here); elsewhere (Node, Deno) and for Windows named pipes it uses node:net. The server
// side always uses node:net: it is long-lived, so its start-up cost does not matter.
// node:net is imported lazily: loading it costs ~2 ms, a fifth of the CLI's hot-path budget.
import type { Server, Socket } from "node:net";
import { LineSplitter } from "./lines.ts";

export type LineHandlers = {
  onLine(line: string): void;
  /** Sees each line's bytes first (valid only during the call); true when it handled the line. */
  onLineBytes?(line: Uint8Array): boolean;
  /** Called once, when the connection is gone for any reason (error carries why, if known). */
  onClose(error?: Error): void;
};

/** One client connection: write whole lines, close. */
export interface LineConnection {
  write(line: string): void;
  close(): void;
}

/** Max bytes of one reply line the client accepts (a result carries at most the output cap, twice). */
const CLIENT_MAX_LINE = 256 * 1024 * 1024;

/**
 * Connects to the socket. Rejects with an error whose `code` is the errno name (ENOENT,
 * ECONNREFUSED, ...) so the caller can tell "nobody there" from other failures.
 */
export function connectLines(path: string, handlers: LineHandlers): Promise<LineConnection> {
  if (typeof Bun !== "undefined" && process.platform !== "win32") return connectBun(path, handlers);
  return connectNode(path, handlers);
}

async function connectBun(path: string, handlers: LineHandlers): Promise<LineConnection> {
  const splitter = new LineSplitter(CLIENT_MAX_LINE);
  const decoder = new TextDecoder();
  // Bun's write() may take only part of the data; the rest waits for `drain`.
  let pending: Uint8Array | null = null;
  let closed = false;
  const finish = (error?: Error) => {
    if (closed) return;
    closed = true;
    handlers.onClose(error);
  };
  const socket = await Bun.connect({
    unix: path,
    socket: {
      data(_s, chunk) {
        let lines: Uint8Array[];
        try {
          lines = splitter.pushBytes(chunk);
        } catch (err) {
          _s.end();
          finish(err as Error);
          return;
        }
        for (const line of lines) {
          if (handlers.onLineBytes?.(line)) continue;
          handlers.onLine(decoder.decode(line));
        }
      },
      drain(s) {
        if (!pending) return;
        const n = s.write(pending);
        pending = n < pending.length ? pending.subarray(Math.max(n, 0)) : null;
      },
      close() {
        finish();
      },
      error(_s, err) {
        finish(err);
      },
    },
  });
  return {
    write(line) {
      if (closed) return;
      const bytes = Buffer.from(line + "\n");
      if (pending) {
        pending = Buffer.concat([pending, bytes]);
        return;
      }
      const n = socket.write(bytes);
      if (n < bytes.length) pending = bytes.subarray(Math.max(n, 0));
    },
    close() {
      // terminate(), not end(): a process exiting with a half-closed Bun socket spends ~13 ms in exit.
      // Nothing is lost: whatever is still pending was never going to be answered.
      if (pending) socket.end();
      else socket.terminate();
    },
  };
}

/** The node:net client (Node, Deno, Windows named pipes); exported so tests can run it under Bun. */
export async function connectNode(path: string, handlers: LineHandlers): Promise<LineConnection> {
  const { connect: netConnect } = await import("node:net");
  return new Promise((resolve, reject) => {
    const socket = netConnect(path);
    let open = false;
    let closed = false;
    socket.once("connect", () => {
      open = true;
      resolve({ write: (line) => void socket.write(line + "\n"), close: () => void socket.end() });
    });
    wireLines(socket, {
      maxLineBytes: CLIENT_MAX_LINE,
      onLine: (line) => handlers.onLine(line ?? ""),
      onClose: (error) => {
        if (!open) {
          reject(error ?? Object.assign(new Error("Connection closed"), { code: "ECONNRESET" }));
          return;
        }
        if (closed) return;
        closed = true;
        handlers.onClose(error);
      },
    });
  });
}

export type SocketLineOptions = {
  /** A longer line ends the connection. */
  maxLineBytes: number;
  /** Each complete line; null for one that is not valid UTF-8 when `strict`. */
  onLine(line: string | null): void;
  /** Called once, when the connection is gone for any reason (error carries why, if known). */
  onClose(error?: Error): void;
  /** What to tell the peer about a line over the cap before the connection is closed. */
  lastWords?(error: RangeError): string;
  /** Lines that are not valid UTF-8 come out as null (the server rejects them) instead of decoded with replacement characters. */
  strict?: boolean;
};

/** Feeds a node:net socket's data, line by line, to `options.onLine`. */
export function wireLines(socket: Socket, options: SocketLineOptions): void {
  const { onLine, onClose, lastWords } = options;
  const splitter = new LineSplitter(options.maxLineBytes, options.strict === true);
  let error: Error | undefined;
  socket.on("data", (chunk: Buffer) => {
    if (error) return;
    let lines: (string | null)[];
    try {
      lines = splitter.push(chunk);
    } catch (err) {
      error = err as Error;
      if (!lastWords) {
        socket.destroy();
        return;
      }
      // Say why, then half-close and keep discarding what the peer still sends: closing with unread
      // data would reset the connection and the peer could lose the explanation.
      socket.end(lastWords(err as RangeError) + "\n");
      setTimeout(() => socket.destroy(), 5000).unref();
      return;
    }
    for (const line of lines) {
      if (socket.destroyed) return;
      onLine(line);
    }
  });
  socket.on("error", (err) => {
    error ??= err;
  });
  socket.on("close", () => onClose(error));
}

/** Listens on the socket path (the caller has made sure no live supervisor owns it). */
export async function listenSocket(path: string, onConnection: (socket: Socket) => void): Promise<Server> {
  const { createServer } = await import("node:net");
  return new Promise((resolve, reject) => {
    const server = createServer({ allowHalfOpen: false }, onConnection);
    server.once("error", reject);
    server.listen(path, () => {
      server.off("error", reject);
      resolve(server);
    });
  });
}

// The supervisor's socket: taking it at start-up, and knowing whether it is still ours. Many clients
// may start a supervisor at once; the start-up lock (start_lock.ts) lets one of them bind, and only
// after checking that nobody answers on the path already. The socket is 0600 from the start, and a
// supervisor whose path was removed or replaced (by a newer supervisor, or by hand) never touches the
// path again: it belongs to someone else by then.
import { chmodSync, lstatSync, mkdirSync, renameSync, rmSync, statSync, unlinkSync } from "node:fs";
import { connect as netConnect, type Server, type Socket } from "node:net";
import { dirname, join } from "node:path";
import { deadline } from "../core/deadline.ts";
import { AwreplError } from "../core/errors.ts";
import { type HomeLayout, shortSocketDir } from "../settings/home.ts";
import { listenSocket } from "../wire/socket.ts";
import { acquireStartLock } from "./start_lock.ts";

type Log = (line: string) => void;

/** The socket this supervisor listens on, for as long as the path is still its own. */
export class OwnedSocket {
  private constructor(
    private readonly server: Server,
    readonly path: string,
    /** The inode we bound: another one at the path means someone else owns it now. */
    private readonly ino: number,
  ) {}

  /**
   * Takes the socket of `layout`, or resolves null when that is another supervisor's to do: one is
   * starting (it holds the start-up lock) or one already answers.
   */
  static async take(layout: HomeLayout, log: Log, onConnection: (socket: Socket) => void): Promise<OwnedSocket | null> {
    const lock = acquireStartLock(layout.lock);
    if (!lock) {
      log("another supervisor is starting; leaving it to that one");
      return null;
    }
    try {
      if (await socketAnswers(layout.socket)) {
        log("a supervisor already answers on the socket; exiting");
        return null;
      }
      if (dirname(layout.socket) === shortSocketDir()) ensureShortSocketDir(layout.socket);
      removeStaleSocket(layout.socket, log);
      const server = await listenPrivately(layout.socket, onConnection);
      return new OwnedSocket(server, layout.socket, socketInode(layout.socket));
    } finally {
      lock.release();
    }
  }

  /** False once the path was removed or replaced: nobody can reach this supervisor any more. */
  stillOurs(): boolean {
    return process.platform === "win32" || socketInode(this.path) === this.ino;
  }

  /** Stops listening, and unlinks the path if it is still ours (so that a new client starts a new supervisor). */
  close(): void {
    this.server.close();
    if (process.platform === "win32" || !this.stillOurs()) return;
    try {
      unlinkSync(this.path);
    } catch {
      // already gone
    }
  }
}

/** True when something accepts connections on the socket (a live supervisor). */
async function socketAnswers(path: string): Promise<boolean> {
  const socket = netConnect(path);
  const answered = new Promise<boolean>((resolve) => {
    socket.once("connect", () => resolve(true));
    socket.once("error", () => resolve(false));
  });
  try {
    // It exists and is slow to answer: do not steal it.
    return await deadline(answered, 2000, "the socket to answer").catch(() => true);
  } finally {
    socket.destroy();
  }
}

function removeStaleSocket(path: string, log: Log): void {
  if (process.platform === "win32") return;
  try {
    const st = lstatSync(path);
    if (!st.isSocket()) throw new AwreplError("internal", `${path} exists and is not a socket; remove it`);
    unlinkSync(path);
    log(`removed stale socket ${path}`);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
}

/** /tmp/awrepl-<uid>: ours, a real directory, private. Anything else is refused, not used. */
function ensureShortSocketDir(socket: string): void {
  const dir = dirname(socket);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  const uid = process.getuid?.();
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) {
    throw new AwreplError("internal", `${dir} is not a directory owned by this user; refusing to put the socket there`);
  }
  if ((st.mode & 0o077) !== 0) chmodSync(dir, 0o700);
}

/**
 * Listens on `path`, mode 0600 from the start. On Unix the server binds a name in a private (0700)
 * directory of its own beside `path` and renames it into place: the state directory may be readable
 * by others (`mkdir -p` makes it 0755), and a socket is connectable with the mode bind gave it until
 * the chmod; and closing a Bun/Node server unlinks the path it bound, which must never be `path`
 * (another supervisor may own it by the time this one stops). The private name is gone after the
 * rename, so closing unlinks nothing.
 */
async function listenPrivately(path: string, onConnection: (socket: Socket) => void): Promise<Server> {
  if (process.platform === "win32") return listenSocket(path, onConnection);
  const privateDir = join(dirname(path), `.sock-${process.pid}`);
  rmSync(privateDir, { recursive: true, force: true }); // one left by an earlier process with this pid
  mkdirSync(privateDir, { mode: 0o700 });
  const bound = join(privateDir, "s");
  try {
    let server: Server;
    try {
      server = await listenSocket(bound, onConnection);
    } catch (err) {
      removeQuietly(bound); // a bind that got as far as the file (a full disk) leaves nothing behind
      throw err;
    }
    try {
      chmodSync(bound, 0o600);
      renameSync(bound, path);
    } catch (err) {
      server.close();
      removeQuietly(bound);
      throw err;
    }
    return server;
  } finally {
    rmSync(privateDir, { recursive: true, force: true });
  }
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // not there
  }
}

function socketInode(path: string): number {
  try {
    return statSync(path).ino;
  } catch {
    return -1;
  }
}

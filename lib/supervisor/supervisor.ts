// The background supervisor: one per state directory, started detached by the first client that needs
// it (lib/client_start.ts), holding named sessions (lib/supervisor_sessions.ts) and serving the
// client <-> supervisor protocol (lib/protocol.ts, docs/supervisor-protocol.md) on its socket.
// It exits on `stop`, on SIGTERM/SIGINT/SIGHUP, after idleExitMs with no sessions and no clients, or
// when its socket is taken away; every exit closes every worker first. If it is SIGKILLed, the
// workers see EOF on their stdin and exit by themselves (runtime.py).
// Persistence (lib/persistence.ts): sessions it creates restore their snapshot and may autosave;
// shutdown snapshots every session before closing it; `close` forgets a session's snapshot.
import { chmodSync, existsSync, lstatSync, mkdirSync, renameSync, statSync, unlinkSync } from "node:fs";
import { connect as netConnect, type Server, type Socket } from "node:net";
import { dirname, join } from "node:path";
import { builtinConfig, type Config, loadConfig } from "../settings/config.ts";
import { AwreplError } from "../core/errors.ts";
import { ensurePrivateDir } from "../settings/home.ts";
import { forgetClosedSession, persistentSessionOptions, snapshotBeforeStop } from "./persistence.ts";
import { defaultSnapshotPath, readSessionSpec, savedSessionNames, writeSessionSpec } from "../session/snapshot_files.ts";
import type { ClientRequest, RequestId, SessionCallRequest, SessionSpec, SupervisorReply } from "../protocol/supervisor.ts";
import { outputFramePieces, type RawText } from "../wire/output_frames.ts";
import { ReplSession } from "../session/session.ts";
import { SpareWorkers } from "../worker/spare.ts";
import { acquireStartLock } from "./start_lock.ts";
import { AWREPL_VERSION, buildId, SUPERVISOR_PROTOCOL } from "../core/version.ts";
import { type ClientOptions, resolveHome, type HomeLayout, homeLayout } from "../settings/home.ts";
import { checkRequest, readRequestLine } from "./requests.ts";
import { asAwreplError, type Call, processRss, SessionTable } from "./session_table.ts";
import { listenSocket, wireLines } from "../wire/socket.ts";
import { shortSocketDir } from "../settings/home.ts";

/** Longest request line: a cell's code travels in one line. */
const MAX_REQUEST_BYTES = 64 * 1024 * 1024;
/** Live output for a client that does not read is dropped past this much unsent data. */
const MAX_BACKLOG_BYTES = 32 * 1024 * 1024;
const NEWLINE = Buffer.from("\n");
/** How often the supervisor checks that its socket is still its own. */
const SOCKET_CHECK_MS = 10_000;

type Connection = {
  socket: Socket;
  hello: "pending" | "ok" | "mismatch";
  /** Live output bytes dropped because the client read too slowly (reported once it catches up). */
  dropped: number;
  /** Reply lines waiting for this turn's write, and their size. */
  /** Reply lines waiting for this turn's write: JSON text, or the pieces of a forwarded output line. */
  outbox: (string | Uint8Array[])[];
  outboxBytes: number;
};

export async function runSupervisor(options: ClientOptions = {}): Promise<number> {
  const env = options.env ?? process.env;
  const home = ensurePrivateDir(resolveHome(options));
  const paths = homeLayout(home);
  const log = (line: string) => process.stderr.write(`${new Date().toISOString()} [${process.pid}] ${line}\n`);
  // The executable starts with a reluctant JIT (scripts/build.ts), right for a short CLI call; a
  // long-lived supervisor wants the normal one.
  if (typeof Bun !== "undefined") Bun.unsafe.setJITPolicy?.(1);

  const lock = acquireStartLock(paths.lock);
  if (!lock) {
    log("another supervisor is starting; leaving it to that one");
    return 0;
  }
  let server: Server;
  let supervisor: Supervisor;
  try {
    if (await socketAnswers(paths.socket)) {
      log("a supervisor already answers on the socket; exiting");
      return 0;
    }
    if (dirname(paths.socket) === shortSocketDir()) ensureShortSocketDir(paths.socket);
    removeStaleSocket(paths.socket, log);
    supervisor = new Supervisor(paths, readConfig(env, home, log), log);
    server = await listenPrivately(paths.socket, (socket) => supervisor.accept(socket));
  } finally {
    lock.release();
  }
  log(`supervisor ${AWREPL_VERSION} build ${buildId()} (protocol ${SUPERVISOR_PROTOCOL}) listening on ${paths.socket}`);
  return supervisor.serve(server);
}

class Supervisor {
  private readonly sessions: SessionTable;
  /** Warm workers, so a new session's first result does not wait for Python to start. */
  private readonly spares = new SpareWorkers();
  private readonly connections = new Set<Connection>();
  private readonly startedAt = Date.now();
  /** Other builds of this version that have connected (logged once each). */
  private readonly buildsSeen = new Set<string>();
  private server: Server | null = null;
  private socketIno = 0;
  private idleTimer: ReturnType<typeof setTimeout> | null = null;
  private stopping: Promise<void> | null = null;
  /** parkIdleSessions is running. */
  private parking = false;
  private finished!: (code: number) => void;

  constructor(
    private readonly paths: HomeLayout,
    private readonly config: Config,
    private readonly log: (line: string) => void,
  ) {
    this.sessions = new SessionTable((name, spec) => this.startSession(name, spec), () => this.checkIdle(), log);
  }

  serve(server: Server): Promise<number> {
    this.server = server;
    this.socketIno = socketInode(this.paths.socket);
    const done = new Promise<number>((resolve) => {
      this.finished = resolve;
    });
    for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
      process.on(signal, () => void this.shutdown(`received ${signal}`));
    }
    // A bug in one request's handling must not take every session down with it.
    process.on("uncaughtException", (err) => this.log(`uncaught exception: ${err?.stack ?? err}`));
    process.on("unhandledRejection", (err) => this.log(`unhandled rejection: ${(err as Error)?.stack ?? err}`));
    setInterval(() => this.checkSocket(), SOCKET_CHECK_MS).unref();
    const sessionIdle = this.config.sessionIdleMs;
    if (sessionIdle > 0) setInterval(() => void this.parkIdleSessions(), Math.min(60_000, Math.max(250, sessionIdle / 4))).unref();
    this.checkIdle();
    return done;
  }

  accept(socket: Socket): void {
    const conn: Connection = { socket, hello: "pending", dropped: 0, outbox: [], outboxBytes: 0 };
    this.connections.add(conn);
    this.checkIdle();
    wireLines(
      socket,
      MAX_REQUEST_BYTES,
      (line) => this.onLine(conn, line),
      () => {
        this.connections.delete(conn);
        this.sessions.dropOwner(conn);
        this.checkIdle();
      },
      (err) => JSON.stringify({ event: "error", id: null, code: "protocol", message: `${err.message}: closing the connection` }),
      true,
    );
  }

  private onLine(conn: Connection, line: string | null): void {
    if (line === null) {
      this.reply(conn, { event: "error", id: null, code: "protocol", message: "Request is not valid UTF-8" });
      return;
    }
    const read = readRequestLine(line);
    if ("error" in read) {
      this.reply(conn, { event: "error", id: read.id, code: read.error.code, message: read.error.message });
      return;
    }
    // Until a hello of our version, only hello and stop are read any further: a client of another
    // version may spell everything else its own way, and gets version_mismatch for it.
    if (read.type !== "hello" && read.type !== "stop" && conn.hello !== "ok") {
      const [code, message] =
        conn.hello === "pending"
          ? ["protocol", "The first request must be hello"]
          : ["version_mismatch", `This supervisor is awrepl ${AWREPL_VERSION} (protocol ${SUPERVISOR_PROTOCOL}); stop it and start your own`];
      this.reply(conn, { event: "error", id: read.id, code, message });
      return;
    }
    let request: ClientRequest;
    try {
      request = checkRequest(read);
    } catch (err) {
      const error = asAwreplError(err);
      this.reply(conn, { event: "error", id: read.id, code: error.code, message: error.message });
      return;
    }
    if (request.type === "hello") {
      // Builds of one version are compatible by contract: only the version and protocol decide. (A
      // rebuilt binary replacing the supervisor would end every session whenever a test suite or a
      // developer rebuilds; the build is reported, so `daemon status` shows which code runs.)
      const build = buildId();
      const ok = request.protocol === SUPERVISOR_PROTOCOL && request.version === AWREPL_VERSION;
      const otherBuild = request.build !== undefined && request.build !== build && !this.buildsSeen.has(request.build);
      if (!ok || otherBuild) {
        if (request.build !== undefined) this.buildsSeen.add(request.build);
        this.log(`client of version ${request.version} build ${request.build ?? "?"} (protocol ${request.protocol}) connected; this is ${AWREPL_VERSION} build ${build}`);
      }
      conn.hello = ok ? "ok" : "mismatch";
      this.reply(conn, { event: "hello", type: "hello", ok, protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION, build, pid: process.pid });
      return;
    }
    if (request.type === "stop") {
      // Accepted whatever the hello said: a client of another version replaces us this way.
      this.reply(conn, { event: "ok", id: read.id, value: null });
      void this.shutdown("stop requested");
      return;
    }
    if (this.stopping) {
      this.reply(conn, { event: "error", id: request.id, code: "supervisor_unreachable", message: "The supervisor is stopping" });
      return;
    }
    try {
      this.dispatch(conn, request);
    } catch (err) {
      const error = asAwreplError(err);
      this.reply(conn, { event: "error", id: request.id, code: error.code, message: error.message });
    }
  }

  private dispatch(conn: Connection, request: Exclude<ClientRequest, { type: "hello" | "stop" }>): void {
    const ok = (id: RequestId, value: unknown) => this.reply(conn, { event: "ok", id, value });
    const later = (id: RequestId, value: Promise<unknown>) =>
      value.then(
        (v) => ok(id, v),
        (err: unknown) => {
          const error = asAwreplError(err);
          this.reply(conn, { event: "error", id, code: error.code, message: error.message });
        },
      );
    switch (request.type) {
      case "interrupt":
        void later(request.id, this.sessions.interrupt(request.session).then((interrupted) => ({ interrupted })));
        return;
      case "cancel":
        ok(request.id, { cancelled: this.sessions.cancel(conn, request.target) });
        return;
      case "close":
        void later(request.id, this.close(request.session, request.keep === true));
        return;
      case "close_all":
        void later(request.id, this.closeAll(request.keep === true));
        return;
      case "list":
        ok(request.id, this.sessions.list());
        return;
      case "status":
        ok(request.id, this.status());
        return;
    }
    // Everything else runs in the session's FIFO.
    const { id, session: name } = request;
    if (request.spec?.existing && !this.sessions.has(name) && !existsSync(defaultSnapshotPath(this.paths.home, name))) {
      throw new AwreplError("session_not_found", `No session named ${JSON.stringify(name)}`);
    }
    let created = false;
    const call: Call = {
      owner: conn,
      id,
      abort: new AbortController(),
      fail: (error) => this.reply(conn, { event: "error", id, code: error.code, message: error.message }),
      run: async (session, signal) => {
        if (request.type === "execute") {
          // Asked for by a later caller (`run --autosave`): switched on, never off, by a spec.
          if (request.spec?.autosave === true) session.autosave = true;
          const stream = request.stream === true;
          // Past the client's live_limit its output is not shown: not forwarding it saves copying
          // (and buffering, for a slow reader) what the result's head and tail carry anyway.
          let liveLeft = request.live_limit ?? Number.POSITIVE_INFINITY;
          const result = await session.execute(request.code, {
            timeoutMs: request.timeout_ms,
            maxOutputBytes: request.max_output_bytes,
            filename: request.filename,
            signal,
            // Forwarded as the runtime wrote it: never decoded and re-encoded here.
            onRawOutput: stream
              ? (s, raw) => {
                  if (liveLeft <= 0) return;
                  liveLeft -= raw.bytes;
                  this.streamRaw(conn, s, id, raw);
                }
              : undefined,
            onDisplay: stream ? (item) => this.stream(conn, { event: "display", id, item }, 0) : undefined,
          });
          result.session = name;
          // A session re-created from its snapshot says so in `restored`; without one its state is gone.
          if (created && request.known && !result.restored) {
            const lost = `Session ${name} was not running (closed, or its supervisor stopped); this call ran in a fresh worker and the earlier state is gone.`;
            result.notice = result.notice ? `${lost} ${result.notice}` : lost;
          }
          this.reply(conn, { event: "result", id, result });
          return;
        }
        if (request.type === "open") return ok(id, { created, pid: session.pid });
        // Its client went away (or cancelled it): interrupt the request too, a listing stuck in a __repr__ say.
        const onAbort = () => void session.interrupt();
        signal.addEventListener("abort", onAbort, { once: true });
        try {
          ok(id, await sessionCall(session, request));
        } finally {
          signal.removeEventListener("abort", onAbort);
        }
      },
    };
    created = this.sessions.submit(name, request.spec, call);
  }

  /**
   * Ends a session (if it runs) and forgets its snapshot (also when it does not run); with `keep`, a
   * running session is snapshotted first instead, so its next use restores it as it was.
   */
  private async close(name: string, keep: boolean): Promise<{ closed: boolean; forgot: boolean }> {
    if (keep) await snapshotBeforeStop(this.sessions.live().filter(([n]) => n === name), this.log);
    const closed = await this.sessions.close(name);
    const forgot = forgetClosedSession(this.paths.home, name, keep);
    if (forgot) this.log(`session ${name}: snapshot forgotten`);
    return { closed, forgot };
  }

  private async closeAll(keep: boolean): Promise<{ closed: string[]; forgot: string[] }> {
    if (keep) await snapshotBeforeStop(this.sessions.live(), this.log);
    const closed = await this.sessions.closeAll();
    const forgot = keep ? [] : savedSessionNames(this.paths.home).filter((name) => forgetClosedSession(this.paths.home, name, false));
    if (forgot.length) this.log(`snapshots forgotten: ${forgot.join(", ")}`);
    return { closed, forgot };
  }

  private startSession(name: string, requested: SessionSpec): Promise<ReplSession> {
    const spec = this.specFor(name, requested);
    try {
      writeSessionSpec(this.paths.home, name, spec);
    } catch (err) {
      this.log(`session ${name}: cannot save its spec: ${(err as Error).message}`);
    }
    return ReplSession.start(name, {
      ...persistentSessionOptions(this.config, spec.autosave),
      python: spec.python ?? this.config.python,
      cwd: spec.cwd,
      env: spec.env && exactEnv(spec.env, this.paths.home),
      timeoutMs: spec.timeout_ms ?? this.config.timeoutMs,
      maxOutputBytes: spec.max_output_bytes ?? this.config.maxOutputBytes,
      graceMs: spec.grace_ms ?? this.config.graceMs,
      home: this.paths.home,
      spares: this.spares,
    });
  }

  /**
   * A session re-created from its snapshot is made as it was first made (interpreter, directory,
   * environment, limits: saved beside the snapshot), not as this caller would make a new one; an
   * explicit --python still wins, and a caller's autosave switches autosave on.
   */
  private specFor(name: string, requested: SessionSpec): SessionSpec {
    if (!existsSync(defaultSnapshotPath(this.paths.home, name))) return requested;
    const saved = savedSpec(this.paths.home, name);
    if (!saved) return requested;
    const python = requested.python_given ? requested.python : (saved.python ?? requested.python);
    this.log(`session ${name}: re-created as it was saved (${python ?? "default python"} in ${saved.cwd ?? "?"})`);
    // A directory removed since is not a reason to lose the state: the caller's is used instead.
    const cwd = saved.cwd !== undefined && existsSync(saved.cwd) ? saved.cwd : requested.cwd;
    return { ...saved, python, cwd, python_given: undefined, autosave: saved.autosave || requested.autosave || undefined };
  }

  private status() {
    return {
      pid: process.pid,
      version: AWREPL_VERSION,
      build: buildId(),
      protocol: SUPERVISOR_PROTOCOL,
      socket: this.paths.socket,
      log: this.paths.log,
      home: this.paths.home,
      uptime_ms: Date.now() - this.startedAt,
      sessions: this.sessions.size,
      spares: this.spares.size,
      connections: this.connections.size,
      idle_exit_ms: this.config.idleExitMs,
      rss_bytes: processRss(process.pid),
    };
  }

  /**
   * Queues a reply line; the lines queued in one turn of the event loop (a worker's chunk of output
   * events, say) go out in one write, which is what keeps a chatty cell's throughput up.
   */
  private reply(conn: Connection, message: SupervisorReply): void {
    const socket = conn.socket;
    if (socket.destroyed || !socket.writable) return;
    // A client of another version reads replies by protocol 1's `type`: everything said before a
    // matching hello carries that spelling too, so that it learns the versions differ.
    const line = JSON.stringify(conn.hello === "ok" ? message : { ...message, type: message.event });
    this.queue(conn, line, line.length);
  }

  private queue(conn: Connection, line: string | Uint8Array[], bytes: number): void {
    conn.outbox.push(line);
    conn.outboxBytes += bytes;
    if (conn.outbox.length === 1) queueMicrotask(() => this.flush(conn));
  }

  private flush(conn: Connection): void {
    const lines = conn.outbox;
    conn.outbox = [];
    conn.outboxBytes = 0;
    if (lines.length === 0 || conn.socket.destroyed || !conn.socket.writable) return;
    if (lines.every((l) => typeof l === "string")) {
      conn.socket.write(lines.join("\n") + "\n");
      return;
    }
    // One copy for the turn's lines, however many output frames they forward.
    const parts: Uint8Array[] = [];
    for (const l of lines) {
      if (typeof l === "string") parts.push(Buffer.from(l));
      else parts.push(...l);
      parts.push(NEWLINE);
    }
    conn.socket.write(Buffer.concat(parts));
  }

  /** Live output as `{"event":"stdout","id":ID,"text":"..."}`, its text copied from the runtime's frame. */
  private streamRaw(conn: Connection, type: "stdout" | "stderr", id: RequestId, raw: RawText): void {
    if (conn.socket.writableLength + conn.outboxBytes > MAX_BACKLOG_BYTES) {
      conn.dropped += raw.bytes;
      return;
    }
    this.noteDropped(conn, id);
    // The pieces are copied once, in flush(), this turn: the text's bytes are still the worker's chunk.
    const { pieces, bytes } = outputFramePieces(type, id, raw);
    this.queue(conn, pieces, bytes);
  }

  /** Says how much live output a slow client missed, once it reads again. */
  private noteDropped(conn: Connection, id: RequestId): void {
    if (conn.dropped === 0) return;
    const note = `\n[awrepl: ${conn.dropped} bytes of live output not shown: the client read too slowly]\n`;
    conn.dropped = 0;
    this.reply(conn, { event: "stderr", id, text: note });
  }

  /** Live output: dropped (and counted) while the client has too much unread. */
  private stream(conn: Connection, message: SupervisorReply, size: number): void {
    if (conn.socket.writableLength + conn.outboxBytes > MAX_BACKLOG_BYTES) {
      conn.dropped += size;
      return;
    }
    if (message.event !== "display") this.noteDropped(conn, (message as { id: RequestId }).id);
    this.reply(conn, message);
  }

  /**
   * Sessions with no call for sessionIdleMs are snapshotted and closed, keeping the snapshot: their
   * worker's memory is given back, and the next use of the name restores them.
   */
  private async parkIdleSessions(): Promise<void> {
    if (this.stopping || this.parking) return;
    this.parking = true;
    try {
      for (const [name, session] of this.sessions.idleFor(this.config.sessionIdleMs)) {
        const [outcome] = await snapshotBeforeStop([[name, session]], this.log);
        if (outcome && "error" in outcome) continue; // keep it running rather than lose its state
        if (await this.sessions.closeIfIdle(name)) this.log(`session ${name}: closed after ${this.config.sessionIdleMs} ms idle; its snapshot is kept`);
      }
    } finally {
      this.parking = false;
    }
  }

  private checkIdle(): void {
    const idle = this.sessions.size === 0 && this.connections.size === 0 && this.config.idleExitMs > 0;
    if (!idle) {
      if (this.idleTimer) clearTimeout(this.idleTimer);
      this.idleTimer = null;
      return;
    }
    this.idleTimer ??= setTimeout(() => {
      this.idleTimer = null;
      if (this.sessions.size === 0 && this.connections.size === 0) void this.shutdown(`idle for ${this.config.idleExitMs} ms`);
    }, this.config.idleExitMs);
  }

  /** Another supervisor took the socket path (or it was deleted): nobody can reach us any more. */
  private checkSocket(): void {
    if (this.stopping || process.platform === "win32") return;
    if (socketInode(this.paths.socket) !== this.socketIno) void this.shutdown(`socket ${this.paths.socket} was removed or replaced`, true);
  }

  /**
   * `orphaned`: the socket path is no longer ours, so another supervisor may hold these names now;
   * then a name's default snapshot is written only when the one on disk is older than this session's
   * last activity (nobody wrote a newer state since), never over a newer one.
   */
  private mayOverwriteSnapshot(name: string, session: ReplSession): boolean {
    const mtime = statSync(defaultSnapshotPath(this.paths.home, name), { throwIfNoEntry: false })?.mtimeMs;
    if (mtime === undefined || mtime < session.lastActiveAt) return true;
    this.log(`session ${name}: not snapshotted: the snapshot on disk is newer than this session's last call (another supervisor owns the name now)`);
    return false;
  }

  shutdown(reason: string, orphaned = false): Promise<void> {
    this.stopping ??= (async () => {
      this.log(`stopping: ${reason}`);
      if (this.idleTimer) clearTimeout(this.idleTimer);
      this.server?.close();
      // Unlink first, so a new client starts a new supervisor instead of reaching this one.
      if (process.platform !== "win32" && socketInode(this.paths.socket) === this.socketIno) {
        try {
          unlinkSync(this.paths.socket);
        } catch {
          // already gone
        }
      }
      // Every planned stop (stop, a client of another version, a signal, idle exit) snapshots first;
      // the next use of a name restores it.
      const live = this.sessions.live();
      await snapshotBeforeStop(orphaned ? live.filter(([name, session]) => this.mayOverwriteSnapshot(name, session)) : live, this.log);
      const closing = Promise.all([this.sessions.closeAll(), this.spares.closeAll()]);
      const timeout = new Promise((r) => setTimeout(r, 10_000).unref());
      await Promise.race([closing, timeout]);
      for (const conn of this.connections) conn.socket.end();
      this.log("stopped");
      this.finished(0);
    })();
    return this.stopping;
  }
}

/** The answer to a session request other than execute. */
async function sessionCall(session: ReplSession, request: SessionCallRequest): Promise<unknown> {
  switch (request.type) {
    case "variables":
      return session.variables();
    case "inspect":
      return session.inspect(request.name);
    case "reset":
      await session.reset();
      return null;
    case "complete":
      return session.complete(request.code, request.cursor);
    case "is_complete":
      return session.isComplete(request.code);
    case "snapshot":
      return session.snapshot(request.path);
    case "restore":
      return session.restore(request.path);
  }
}

/**
 * The spec saved beside a session's snapshot. A supervisor of protocol 1 wrote its limits in
 * camelCase: read them too, so that an upgrade keeps them.
 */
export function savedSpec(home: string, name: string): SessionSpec | null {
  const saved = readSessionSpec(home, name) as (SessionSpec & { timeoutMs?: number; maxOutputBytes?: number; graceMs?: number }) | null;
  if (!saved) return null;
  const { timeoutMs, maxOutputBytes, graceMs, ...spec } = saved;
  spec.timeout_ms ??= timeoutMs;
  spec.max_output_bytes ??= maxOutputBytes;
  spec.grace_ms ??= graceMs;
  return spec;
}

/**
 * A worker environment of exactly `env` (the creating client's) rather than `env` over the
 * supervisor's own: ReplSession merges over process.env, so every variable of ours that the client
 * lacks is masked (spawn skips undefined values). AWREPL_HOME stays: `awrepl` run from a cell reaches
 * this state directory.
 */
function exactEnv(env: Record<string, string>, home: string): Record<string, string> {
  const masked: Record<string, string | undefined> = {};
  for (const k of Object.keys(process.env)) masked[k] = undefined;
  return { ...masked, ...env, AWREPL_HOME: home } as Record<string, string>;
}

function readConfig(env: NodeJS.ProcessEnv, home: string, log: (line: string) => void): Config {
  try {
    return loadConfig({ env, cwd: home });
  } catch (err) {
    log(`config ignored: ${(err as Error).message}`);
    return builtinConfig;
  }
}

/** True when something accepts connections on the socket (a live supervisor). */
function socketAnswers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = netConnect(path);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(true); // it exists and is slow: do not steal it
    }, 2000);
    socket.once("connect", () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
}

function removeStaleSocket(path: string, log: (line: string) => void): void {
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
 * Listens on `path`, mode 0600 from the start. On Unix the server binds a private name in the same
 * directory and renames it into place: closing a Bun/Node server unlinks the path it bound, and that
 * must never be `path`, which another supervisor may own by the time this one stops (its socket
 * deleted or replaced). The private name is gone after the rename, so closing unlinks nothing.
 */
async function listenPrivately(path: string, onConnection: (socket: Socket) => void): Promise<Server> {
  if (process.platform === "win32") return listenSocket(path, onConnection);
  const bound = join(dirname(path), `.sock-${process.pid}`);
  try {
    unlinkSync(bound);
  } catch {
    // none left by an earlier process with this pid
  }
  const server = await listenSocket(bound, onConnection);
  try {
    chmodSync(bound, 0o600);
    renameSync(bound, path);
  } catch (err) {
    server.close();
    throw err;
  }
  return server;
}

function socketInode(path: string): number {
  try {
    return statSync(path).ino;
  } catch {
    return -1;
  }
}

// The background supervisor: one per state directory, started detached by the first client that needs
// it (lib/client/start.ts), holding named sessions and serving the client <-> supervisor protocol
// (lib/protocol/supervisor.ts, docs/supervisor-protocol.md) on its socket. This module puts it
// together; each concern has its own:
//   listener.ts          taking the socket (start-up lock, stale socket, 0600) and knowing it is still ours
//   client_connection.ts one client's hello state and outbox (backpressure on live output)
//   dispatch.ts          what a request line does: hello/stop, immediate requests, calls for a session
//   session_table.ts     the named sessions, and who owns which call in them (each session queues its own)
//   session_spec.ts      how a session is created from a client's spec (or the one saved with it)
//   lifecycle.ts         idle exit, parking idle sessions, the shutdown that snapshots every session
//   persistence.ts       snapshots around stops; requests.ts, start_lock.ts
import type { Socket } from "node:net";
import { processRss } from "../core/process.ts";
import { AWREPL_VERSION, buildId, SUPERVISOR_PROTOCOL } from "../core/version.ts";
import type { DaemonStatus, StopSnapshot } from "../protocol/supervisor.ts";
import { builtinConfig, type Config, loadConfig } from "../settings/config.ts";
import { type ClientOptions, ensurePrivateDir, type HomeLayout, layoutOf } from "../settings/home.ts";
import { SpareWorkers } from "../worker/spare.ts";
import { wireLines } from "../wire/socket.ts";
import { ClientConnection } from "./client_connection.ts";
import { handleLine, type RequestHost } from "./dispatch.ts";
import { Lifecycle, type LifecycleHost } from "./lifecycle.ts";
import { OwnedSocket } from "./listener.ts";
import { peerCheckAvailable, peerProblem } from "./peer.ts";
import { SessionTable } from "./session_table.ts";
import { sessionFactory } from "./session_spec.ts";

/** Longest request line: a cell's code travels in one line. */
const MAX_REQUEST_BYTES = 64 * 1024 * 1024;

type Log = (line: string) => void;

/** Runs the supervisor of the state directory `options` name until it stops; resolves its exit status. */
export async function runSupervisor(options: ClientOptions = {}): Promise<number> {
  const layout = layoutOf(options);
  ensurePrivateDir(layout.home);
  const log: Log = (line) => process.stderr.write(`${new Date().toISOString()} [${process.pid}] ${line}\n`);
  // The executable starts with a reluctant JIT (scripts/build.ts), right for a short CLI call; a
  // long-lived supervisor wants the normal one.
  if (typeof Bun !== "undefined") Bun.unsafe.setJITPolicy?.(1);

  const supervisor = new Supervisor(layout, await readConfig(options.env ?? process.env, layout.home, log), log);
  const socket = await OwnedSocket.take(layout, log, (s) => supervisor.accept(s));
  if (!socket) return 0;
  // A bug in one request's handling must not take every session down with it.
  process.on("uncaughtException", (err) => log(`uncaught exception: ${err?.stack ?? err}`));
  process.on("unhandledRejection", (err) => log(`unhandled rejection: ${(err as Error)?.stack ?? err}`));
  log(`supervisor ${AWREPL_VERSION} build ${buildId()} (protocol ${SUPERVISOR_PROTOCOL}) listening on ${layout.socket}`);
  if (!peerCheckAvailable()) log("the check that refuses clients inside a sandbox (their namespaces) is not available here");
  return supervisor.lifecycle.run(socket);
}

class Supervisor implements RequestHost, LifecycleHost {
  readonly sessions: SessionTable;
  /** Warm workers, so a new session's first result does not wait for Python to start. */
  readonly spares = new SpareWorkers();
  readonly connections = new Set<ClientConnection>();
  readonly buildsSeen = new Set<string>();
  readonly lifecycle = new Lifecycle(this);
  private readonly startedAt = Date.now();

  constructor(
    readonly layout: HomeLayout,
    readonly config: Config,
    readonly log: Log,
  ) {
    this.sessions = new SessionTable(sessionFactory(layout, config, this.spares, log), () => this.lifecycle.checkIdle(), log);
  }

  get stopping(): boolean {
    return this.lifecycle.stopping;
  }

  stop(reason: string): Promise<StopSnapshot[]> {
    return this.lifecycle.stop(reason);
  }

  accept(socket: Socket): void {
    // A process inside a sandbox never gets a word in, whatever the mount table let it reach (peer.ts).
    const refusal = peerProblem(socket);
    if (refusal) {
      this.log(`refused a connection: ${refusal}`);
      socket.end(`${JSON.stringify({ event: "error", type: "error", id: null, code: "usage", message: `Refused: ${refusal}` })}\n`);
      socket.destroySoon?.();
      return;
    }
    const client = new ClientConnection(socket);
    this.connections.add(client);
    this.lifecycle.checkIdle();
    wireLines(socket, {
      maxLineBytes: MAX_REQUEST_BYTES,
      strict: true,
      onLine: (line) => handleLine(this, client, line),
      onClose: () => {
        this.connections.delete(client);
        this.sessions.dropOwner(client);
        this.lifecycle.checkIdle();
      },
      // Too big a request is the caller's input (a cell over the limit): a usage error it can act on.
      lastWords: (err) =>
        client.encode({
          event: "error",
          id: null,
          code: "usage",
          message: `Request too large: ${err.message} (a cell sent to a named session is at most ${MAX_REQUEST_BYTES / 1024 / 1024} MiB); closing the connection`,
        }),
    });
  }

  status(): DaemonStatus {
    return {
      pid: process.pid,
      version: AWREPL_VERSION,
      build: buildId(),
      protocol: SUPERVISOR_PROTOCOL,
      socket: this.layout.socket,
      log: this.layout.log,
      home: this.layout.home,
      uptime_ms: Date.now() - this.startedAt,
      sessions: this.sessions.size,
      spares: this.spares.size,
      connections: this.connections.size,
      idle_exit_ms: this.config.idleExitMs,
      rss_bytes: processRss(process.pid),
    };
  }
}

async function readConfig(env: NodeJS.ProcessEnv, home: string, log: Log): Promise<Config> {
  try {
    return await loadConfig({ env, cwd: home });
  } catch (err) {
    log(`config ignored: ${(err as Error).message}`);
    return builtinConfig;
  }
}

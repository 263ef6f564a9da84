// The client <-> supervisor protocol, declarations only (served by lib/supervisor/, spoken by
// lib/client/; documented in docs/supervisor-protocol.md). Newline-delimited JSON over the
// supervisor's socket, UTF-8, in the runtime protocol's convention: a request is
// `{"type": NAME, "id": ID, ...}`, a reply `{"event": NAME, "id": ID, ...}`, every field snake_case.
// The first line a client sends is `hello`; every other request carries a client-chosen `id` (unique
// on its connection) that every reply to it repeats. Replies to different requests interleave; the
// replies to one request arrive in order and end with `result`, `ok` or `error`.
//
// Compatibility across versions: `hello`, its reply and `stop` also carry protocol 1's spelling (`op`
// for requests, `type` for replies), and so does every reply on a connection whose hello did not match,
// so that any two versions can tell they differ and the newer client can stop the older supervisor
// (or the other way round).
import type { InspectInfo, NameFailure } from "./runtime.ts";
import type { SandboxProfile } from "./api.ts";
import type { LimitsUsage, ResourceLimits } from "./limits.ts";
import type { DisplayItem, ExecResult, RestoreReport } from "./result.ts";

/**
 * How a session is created when a request names one that does not exist yet. Also what the supervisor
 * saves beside a session's snapshot (lib/session/snapshot_files.ts writeSessionSpec).
 */
export type SessionSpec = {
  python?: string;
  /** The virtual environment the session runs in (an absolute directory, created on first use: SessionOptions.venv). */
  venv?: string;
  /**
   * Run the worker in a sandbox with this profile; `false`: explicitly none (`--no-sandbox`);
   * absent: none, and no preference. Part of the saved spec: a session re-created from it gets the
   * same sandbox, whatever the re-creating caller asks for.
   */
  sandbox?: SandboxProfile | false;
  cwd?: string;
  env?: Record<string, string>;
  timeout_ms?: number;
  max_output_bytes?: number;
  grace_ms?: number;
  /**
   * Resource limits of the session's worker (SessionOptions.limits; docs/limits.md). Part of the saved
   * spec: a session re-created from it gets the same limits, whatever the re-creating caller asks for.
   */
  limits?: ResourceLimits;
  /** Snapshot after every cell that changed the namespace (default: the supervisor's config). */
  autosave?: boolean;
  /**
   * `python` was chosen explicitly (--python, attach's `python`), not a default: it beats the
   * interpreter saved with the session when the session is re-created from its snapshot.
   */
  python_given?: boolean;
  /**
   * Use the session only if it runs or has a snapshot to restore: a missing one with nothing saved
   * is `session_not_found`, not created empty (read-only commands: a typo must not look like lost state).
   */
  existing?: boolean;
};

export type RequestId = number | string;

/**
 * What a stop (`stop`, `close --keep`, idle exit, an upgrade) did with one session's state. `saved`:
 * its snapshot was written. `failed`: it was not (`error` says why). `no_worker`: its worker was gone
 * before the stop, so there was nothing live to save. `not_written`: not tried (another supervisor owns
 * the name now). For `failed` and `no_worker`, `kept` is the snapshot the session's next use restores
 * instead, older than its state (`age_ms` old at the stop), or null: none, the state is lost.
 */
export type StopSnapshot = {
  session: string;
  status: "saved" | "failed" | "no_worker" | "not_written";
  path?: string;
  saved?: number;
  skipped?: NameFailure[];
  bytes?: number;
  error?: string;
  kept?: { path: string; taken_at: string; age_ms: number } | null;
};

/**
 * `build` tells two builds of one version apart (lib/core/version.ts buildId); optional. `op` is
 * protocol 1's spelling of `type`, which hello keeps so that every version reads it.
 */
export type HelloRequest = { type: "hello"; op: "hello"; protocol: number; version: string; build?: string; client?: ClientKind };

/** Who a connection is (hello's `client`; absent: "library"): what a session's history says ran each cell. */
export type ClientKind = "cli" | "serve" | "mcp" | "library" | "python" | "kernel";

/**
 * One cell of a session's history (lib/supervisor/history.ts): its number in the session (1, 2, ...;
 * numbers are never reused, also after the oldest cells were dropped), its code, who ran it, when it
 * started (ISO 8601, UTC), and the result as the caller got it (already bounded by its output limit).
 */
export type HistoryCell = { n: number; code: string; client: ClientKind; started_at: string; duration_ms: number; status: ExecResult["status"]; result: ExecResult };
/** `total`: cells ever recorded; `dropped`: the oldest cells left out by the history's bounds. */
export type HistoryValue = { session: string; cells: HistoryCell[]; total: number; dropped: number };
/** Ends every session and the supervisor. Accepted whatever the hello said (version upgrades); `op` as in hello. */
export type StopRequest = { type: "stop"; op: "stop"; id?: RequestId };
/** Creates the session if it does not exist (with `spec`), otherwise just checks it. */
export type OpenRequest = { type: "open"; id: RequestId; session: string; spec?: SessionSpec; owned?: boolean };
export type ExecuteCallRequest = {
  type: "execute";
  id: RequestId;
  session: string;
  code: string;
  timeout_ms?: number;
  max_output_bytes?: number;
  /** Send live `stdout`/`stderr`/`display` replies as the cell produces them. */
  stream?: boolean;
  /**
   * Bytes (UTF-8 of the text) of live stdout/stderr the client will show: the supervisor stops
   * forwarding them for this call once that many went out (the result still has head and tail).
   */
  live_limit?: number;
  spec?: SessionSpec;
  /** The client used this session before: if it has to be created now, the result says the state is gone. */
  known?: boolean;
  /** The file the code came from (`run -f`): tracebacks name it and `__file__` is set (ExecuteOptions.filename). At most 4096 characters. */
  filename?: string;
  /**
   * Keep running if this connection goes away (queued or running), and keep the result in the session
   * for a later `collect` when it cannot be delivered (or when `keep_result` asked for it). Without
   * it, a connection that goes away has its call dropped or interrupted.
   */
  detach?: boolean;
  /**
   * The client answers the cell's host requests: each comes as a `host_request` reply, and a
   * `host_reply` request answers it. Without it the supervisor answers them with an error at once.
   */
  host_bridge?: boolean;
  /**
   * Create the session owned by this connection (docs/supervisor-protocol.md
   * "Owned sessions"): never restored or saved, closed when this connection closes, invisible to others.
   */
  owned?: boolean;
  /**
   * An idempotency key (ExecuteOptions.id): a repeat runs nothing and gets the first call's result
   * marked `replayed`, or waits for it; other code under the same key is a usage error.
   */
  idempotency_key?: string;
};
/** The answer to a `host_request` reply of the client's running execute `target`. */
export type HostReplyCallRequest = { type: "host_reply"; id: RequestId; target: RequestId; host_id: string; data: Record<string, unknown> };
export type SessionCallRequest =
  | { type: "variables"; id: RequestId; session: string; spec?: SessionSpec }
  /** `full`: the whole docstring and every attribute name (InspectOptions). */
  | { type: "inspect"; id: RequestId; session: string; name: string; full?: boolean; spec?: SessionSpec }
  | { type: "reset"; id: RequestId; session: string; spec?: SessionSpec }
  | { type: "complete"; id: RequestId; session: string; code: string; cursor?: number; spec?: SessionSpec }
  | { type: "is_complete"; id: RequestId; session: string; code: string; spec?: SessionSpec }
  /** `timeout_ms`: this call's deadline instead of the session's (a restore of a large file, `restore --timeout`). */
  | { type: "snapshot"; id: RequestId; session: string; path?: string; timeout_ms?: number; spec?: SessionSpec }
  | { type: "restore"; id: RequestId; session: string; path?: string; timeout_ms?: number; spec?: SessionSpec };
export type ControlRequest =
  /** Interrupts the session's running cell, whoever sent it. Never queued. */
  | { type: "interrupt"; id: RequestId; session: string }
  /**
   * Withdraws one of this connection's own requests: dropped if queued, interrupted if running (and
   * its result no longer kept); a waiting `collect` answers at once without taking a result.
   */
  | { type: "cancel"; id: RequestId; target: RequestId }
  /**
   * The result of a detached cell: a kept one at once (handed out once, then forgotten), else waits up
   * to `wait_ms` (default 0) for the session's oldest detached call still queued or running.
   */
  | { type: "collect"; id: RequestId; session: string; wait_ms?: number; key?: string; output?: boolean }
  /**
   * Keep the result of this connection's detached execute `target` in its session for `collect`, even
   * though it is still sent here: for a client that may end before it hands the result on.
   */
  | { type: "keep_result"; id: RequestId; target: RequestId }
  /** Ends the session and forgets its snapshot, unless `keep`; also forgets the snapshot of a session that is not running. */
  | { type: "close"; id: RequestId; session: string; keep?: boolean }
  | { type: "close_all"; id: RequestId; keep?: boolean }
  | { type: "list"; id: RequestId }
  | { type: "status"; id: RequestId }
  /** The session's history (`last`: only the newest N cells). Answered at once, from memory or from the file beside the snapshot. */
  | { type: "history"; id: RequestId; session: string; last?: number }
  /**
   * Follows the session: `watching`, then a `cell` reply as each cell starts (from any client), its
   * live output and display items, and `cell_end`; until the connection closes or a `cancel` of it
   * (then `ok`). A watcher that reads too slowly loses replies and hears `dropped`.
   */
  | { type: "watch"; id: RequestId; session: string };

export type ClientRequest = HelloRequest | StopRequest | OpenRequest | ExecuteCallRequest | HostReplyCallRequest | SessionCallRequest | ControlRequest;
export type RequestType = ClientRequest["type"];
/** The request of one type. */
export type RequestOf<T extends RequestType> = Extract<ClientRequest, { type: T }>;

/** One row of `sessions`: wire names, as `sessions --json` prints them. */
export type SessionInfo = {
  name: string;
  /** The worker's pid on this machine; over ssh or in a container, its pid on the far side (see host). */
  pid: number | null;
  /** The host name the worker runs on (its own os.uname()), null when unknown. */
  host: string | null;
  /** What the supervisor's process for it is: the interpreter itself, bubblewrap around it, or a transport (ssh, docker exec, ...) to elsewhere; null when unknown. */
  worker: "local" | "sandbox" | "transport" | null;
  /** The worker runs in a sandbox (`--sandbox`). */
  sandbox: boolean;
  /** The interpreter the worker runs: its real executable (symlinks resolved), version, and venv if any. */
  python: string;
  /** The command it was started from (`python3`, a pyenv shim, `--python`), null when unknown. */
  python_command: string | null;
  /** The worker's working directory, as the worker reports it. */
  cwd: string;
  state: "idle" | "busy";
  /** Calls waiting behind the running one. */
  queued: number;
  cells_run: number;
  age_ms: number;
  idle_ms: number;
  rss_bytes: number | null;
  /** The worker's resource limits, each one's mechanism and what it uses now; absent: no limits (or no live worker). */
  limits?: LimitsUsage;
  /** Owned by one connection (`owned: true`): closed with it, never saved, and only that connection may use it. */
  owned: boolean;
};

export type DaemonStatus = {
  pid: number;
  version: string;
  build: string;
  protocol: number;
  socket: string;
  log: string;
  home: string;
  uptime_ms: number;
  sessions: number;
  /** Warm workers waiting for a new session. */
  spares: number;
  connections: number;
  idle_exit_ms: number;
  rss_bytes: number | null;
};

/**
 * What `collect` answers. `mine`: the cell was sent on this connection. `elapsed_ms`: how long it has
 * been running (null: still queued behind another call).
 */
export type CollectValue =
  | { state: "done"; result: ExecResult; mine: boolean; finished_ms_ago?: number }
  /** `output`: with a `key` and `output: true`, the cell's latest output so far (its last OUTPUT_SO_FAR_CHARS characters, stdout and stderr as they came). */
  | { state: "running"; elapsed_ms: number | null; mine: boolean; output?: string }
  | { state: "idle" }
  /** Only for a `key`: the session no longer keeps that key's result (`reason` says why: its bounds, or it never ran). */
  | { state: "dropped"; reason: string };

/** The `value` of an `ok` reply, per request type. */
export type OkValue = {
  open: { created: boolean; pid: number | null };
  variables: Record<string, string>;
  inspect: InspectInfo;
  reset: null;
  complete: string[];
  is_complete: { status: "complete" | "incomplete" | "invalid"; indent: string };
  snapshot: { path: string; saved: string[]; skipped: NameFailure[]; pruned: string[]; bytes: number };
  restore: RestoreReport;
  interrupt: { interrupted: boolean };
  cancel: { cancelled: boolean };
  collect: CollectValue;
  /** false: no such detached call is queued or running here (it finished: its result was sent before this reply). */
  keep_result: { kept: boolean };
  /** `delivered`: the cell was still waiting for this answer (false: it ended, or the id is unknown). */
  host_reply: { delivered: boolean };
  /** `closed`: a running session was ended; `forgot`: its snapshot was removed; `snapshot`: with `keep`, what became of its state. */
  close: { closed: boolean; forgot: boolean; snapshot?: StopSnapshot };
  /** `forgot`: the names whose snapshots were removed (running or not); `snapshots`: with `keep`, one per running session. */
  close_all: { closed: string[]; forgot: string[]; snapshots?: StopSnapshot[] };
  list: SessionInfo[];
  status: DaemonStatus;
  history: HistoryValue;
  /** A watch ended by its `cancel`: how many cells it saw start. */
  watch: { cells: number };
  /** Sent once every session's snapshot was tried (before the workers end). Null from an awrepl before 0.2. */
  stop: { snapshots: StopSnapshot[] } | null;
};

/** `type` is protocol 1's spelling of `event`, which the hello reply keeps so that every version reads it. */
export type HelloReply = { event: "hello"; type: "hello"; ok: boolean; protocol: number; version: string; build?: string; pid: number };
/** Live output: the same frame the runtime writes (lib/wire/output_frames.ts reads and writes both). */
export type OutputReply = { event: "stdout" | "stderr"; id: RequestId; text: string };
/** A host request of a streamed execute `id` whose client set `host_bridge`: answered by a `host_reply` request naming `host_id`. */
export type HostRequestReply = { event: "host_request"; id: RequestId; host_id: string; data: Record<string, unknown> };
export type StreamReply = OutputReply | { event: "display"; id: RequestId; item: DisplayItem } | HostRequestReply;
export type ResultReply = { event: "result"; id: RequestId; result: ExecResult };
/**
 * `notice`: something the caller must hear beside the value (it asked a live session for another
 * interpreter or sandbox than the session has, which it keeps).
 */
export type OkReply = { event: "ok"; id: RequestId | null; value: unknown; notice?: string };
/** `code` is one of lib/core/errors.ts's ErrorCode values; `id` is null when the line could not be read. */
export type ErrorReply = { event: "error"; id: RequestId | null; code: string; message: string };

/**
 * A `watch`'s replies (besides live `stdout`/`stderr`/`display` under the watch's id): `watching` once
 * (`cells`: how many the history holds), `cell` as a cell starts, `cell_end` as it ends, `dropped` once
 * the watcher reads again after `lines` replies were left out for it.
 */
export type WatchReply =
  | { event: "watching"; id: RequestId; session: string; cells: number }
  | { event: "cell"; id: RequestId; n: number; code: string; client: ClientKind; started_at: string }
  | { event: "cell_end"; id: RequestId; n: number; status: ExecResult["status"]; duration_ms: number; value: string | null; exception: string | null }
  | { event: "dropped"; id: RequestId; lines: number };

export type SupervisorReply = HelloReply | StreamReply | ResultReply | OkReply | ErrorReply | WatchReply;
export type ReplyEvent = SupervisorReply["event"];

// The client <-> supervisor protocol, declarations only (owned by lib/supervisor/ and lib/client/;
// documented in docs/supervisor-protocol.md). Newline-delimited JSON over the supervisor's socket, UTF-8.
import type { InspectInfo, NameFailure } from "./runtime.ts";
import type { DisplayItem, ExecResult, RestoreReport } from "./result.ts";

// =============================================================================================
// Client <-> supervisor protocol (owned by lib/supervisor.ts / lib/client.ts; documented in
// docs/supervisor-protocol.md). Newline-delimited JSON over the supervisor's socket, UTF-8.
// The first line a client sends is `hello`; every other request carries a client-chosen `id`
// (unique on its connection) that every reply to it repeats. Replies to different requests
// interleave; the replies to one request arrive in order and end with `result`, `ok` or `error`.
// =============================================================================================

/** How a session is created when a request names one that does not exist yet. */
export type SessionSpec = {
  python?: string;
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  maxOutputBytes?: number;
  graceMs?: number;
  /** Snapshot after every cell that changed the namespace (default: the supervisor's config). */
  autosave?: boolean;
  /**
   * `python` was chosen explicitly (--python, attach's `python`), not a default: it beats the
   * interpreter saved with the session when the session is re-created from its snapshot.
   */
  pythonGiven?: boolean;
  /**
   * Use the session only if it runs or has a snapshot to restore: a missing one with nothing saved
   * is `session_not_found`, not created empty (read-only commands: a typo must not look like lost state).
   */
  existing?: boolean;
};

export type RequestId = number | string;

/** `build` tells two builds of one version apart (see supervisor_paths.ts buildId); optional. */
export type HelloRequest = { op: "hello"; protocol: number; version: string; build?: string };
/** Creates the session if it does not exist (with `spec`), otherwise just checks it. */
export type OpenRequest = { op: "open"; id: RequestId; session: string; spec?: SessionSpec };
export type ExecuteCallRequest = {
  op: "execute";
  id: RequestId;
  session: string;
  code: string;
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** Send live `stdout`/`stderr`/`display` replies as the cell produces them. */
  stream?: boolean;
  /**
   * Bytes (UTF-8 of the text) of live stdout/stderr the client will show: the supervisor stops
   * forwarding them for this call once that many went out (the result still has head and tail).
   */
  liveLimit?: number;
  spec?: SessionSpec;
  /** The client used this session before: if it has to be created now, the result says the state is gone. */
  known?: boolean;
  /** The file the code came from (`run -f`): tracebacks name it and `__file__` is set (ExecuteOptions.filename). At most 4096 characters. */
  filename?: string;
};
export type SessionCallRequest =
  | { op: "variables"; id: RequestId; session: string; spec?: SessionSpec }
  | { op: "inspect"; id: RequestId; session: string; name: string; spec?: SessionSpec }
  | { op: "reset"; id: RequestId; session: string; spec?: SessionSpec }
  | { op: "complete"; id: RequestId; session: string; code: string; cursor?: number; spec?: SessionSpec }
  | { op: "is_complete"; id: RequestId; session: string; code: string; spec?: SessionSpec }
  | { op: "snapshot"; id: RequestId; session: string; path?: string; spec?: SessionSpec }
  | { op: "restore"; id: RequestId; session: string; path?: string; spec?: SessionSpec };
export type ControlRequest =
  /** Interrupts the session's running cell, whoever sent it. Never queued. */
  | { op: "interrupt"; id: RequestId; session: string }
  /** Withdraws one of this connection's own requests: dropped if queued, interrupted if running. */
  | { op: "cancel"; id: RequestId; target: RequestId }
  /** Ends the session and forgets its snapshot, unless `keep`; also forgets the snapshot of a session that is not running. */
  | { op: "close"; id: RequestId; session: string; keep?: boolean }
  | { op: "close_all"; id: RequestId; keep?: boolean }
  | { op: "list"; id: RequestId }
  | { op: "status"; id: RequestId }
  /** Ends every session and the supervisor. Accepted whatever the hello said (version upgrades). */
  | { op: "stop"; id?: RequestId };

export type ClientRequest = HelloRequest | OpenRequest | ExecuteCallRequest | SessionCallRequest | ControlRequest;
export type ClientOp = ClientRequest["op"];

/** One row of `sessions`: wire names, as `sessions --json` prints them. */
export type SessionInfo = {
  name: string;
  pid: number | null;
  python: string;
  cwd: string;
  state: "idle" | "busy";
  /** Calls waiting behind the running one. */
  queued: number;
  cells_run: number;
  age_ms: number;
  idle_ms: number;
  rss_bytes: number | null;
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

/** The `value` of an `ok` reply, per request op. */
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
  /** `closed`: a running session was ended; `forgot`: its snapshot was removed. */
  close: { closed: boolean; forgot: boolean };
  /** `forgot`: the names whose snapshots were removed (running or not). */
  close_all: { closed: string[]; forgot: string[] };
  list: SessionInfo[];
  status: DaemonStatus;
  stop: null;
};

export type HelloReply = { type: "hello"; ok: boolean; protocol: number; version: string; build?: string; pid: number };
export type StreamReply =
  | { type: "stdout" | "stderr"; id: RequestId; text: string }
  | { type: "display"; id: RequestId; item: DisplayItem };
export type ResultReply = { type: "result"; id: RequestId; result: ExecResult };
export type OkReply = { type: "ok"; id: RequestId | null; value: unknown };
/** `code` is one of lib/errors.ts's ErrorCode values; `id` is null when the line could not be read. */
export type ErrorReply = { type: "error"; id: RequestId | null; code: string; message: string };

export type SupervisorReply = HelloReply | StreamReply | ResultReply | OkReply | ErrorReply;

// Wire types, declaration only. Two protocols live here:
//  1. the runtime protocol v3 spoken by runtime.py over a worker's stdin/stdout (see docs/protocol.md);
//  2. the client <-> supervisor messages spoken over the Unix socket (named pipe on Windows).
// A request or event added here is added to runtime.py's docstring table and docs/protocol.md too.

// ---------------------------------------------------------------------------------------------
// Runtime protocol v3: host -> runtime requests (one JSON object per line on the worker's stdin)
// ---------------------------------------------------------------------------------------------

export type ExecuteRequest = {
  type: "execute";
  id: string;
  code: string;
  /** awrepl addition: the file the code came from (`run -f`): tracebacks name it, `__file__` is set to it for the cell. */
  filename?: string;
};
export type InterruptRequest = { type: "interrupt"; id?: string };
export type HostReplyRequest = { type: "host_reply"; id: string; data: Record<string, unknown> };
export type SnapshotRequest = {
  type: "snapshot";
  id: string;
  path: string;
  manifest_path: string;
  max_bytes?: number;
  max_variable_bytes?: number;
  prune_oversized?: boolean;
};
export type RestoreRequest = { type: "restore"; id: string; path: string };
export type ListNamesRequest = { type: "list_names"; id: string };
export type SignaturesRequest = { type: "signatures"; id: string; modules?: string[] };
export type ShutdownRequest = { type: "shutdown"; id?: string };
// awrepl's additions, answered in their `done`.
export type VariablesRequest = { type: "variables"; id: string };
export type InspectRequest = { type: "inspect"; id: string; name: string };
export type ResetRequest = { type: "reset"; id: string };
export type CompleteRequest = { type: "complete"; id: string; code: string; cursor?: number };
export type IsCompleteRequest = { type: "is_complete"; id: string; code: string };

export type RuntimeRequest =
  | ExecuteRequest
  | InterruptRequest
  | HostReplyRequest
  | SnapshotRequest
  | RestoreRequest
  | ListNamesRequest
  | SignaturesRequest
  | ShutdownRequest
  | VariablesRequest
  | InspectRequest
  | ResetRequest
  | CompleteRequest
  | IsCompleteRequest;

/** Requests that get exactly one `done` (the ones carrying an id). */
export type IdRequest = Exclude<RuntimeRequest, InterruptRequest | HostReplyRequest | ShutdownRequest>;

// ---------------------------------------------------------------------------------------------
// Runtime protocol v3: runtime -> host events (one JSON object per line on the private fd)
// ---------------------------------------------------------------------------------------------

export type ReadyEvent = { event: "ready"; protocol: number; python: string; capabilities: string[]; pid?: number };
export type OutputEvent = { event: "stdout" | "stderr"; id: string | null; text: string };
export type ResultEvent = { event: "result"; id: string; text: string };
export type DisplayEvent = { event: "display"; id: string | null; data: Record<string, unknown> };
export type HostRequestEvent = { event: "host_request"; id: string; data: Record<string, unknown> };
export type ErrorEvent = { event: "error"; id: string | null; ename: string; evalue: string; traceback: string[] };

export type NameFailure = { name: string; reason: string };

/** `done` carries extra fields depending on the request it ends. */
export type DoneEvent = {
  event: "done";
  id: string;
  /** "ok" | "error"; for `is_complete` the contract puts the code's completeness here instead. */
  status: "ok" | "error" | "complete" | "incomplete" | "invalid";
  reason?: string;
  // snapshot
  saved?: string[];
  skipped?: NameFailure[] | string[];
  pruned?: string[];
  bytes?: number;
  // restore
  restored?: string[];
  failed?: NameFailure[];
  // list_names
  names?: string[];
  // signatures
  calls?: number;
  digest?: string;
  // variables
  variables?: Record<string, string>;
  // inspect
  info?: InspectInfo;
  // complete
  matches?: string[];
  // is_complete (its completeness travels in `status`)
  indent?: string;
};

export type RuntimeEvent =
  | ReadyEvent
  | OutputEvent
  | ResultEvent
  | DisplayEvent
  | HostRequestEvent
  | ErrorEvent
  | DoneEvent;

/** What `inspect` reports about one name; fields appear as they apply to the value. */
export type InspectInfo = {
  name?: string;
  type: string;
  repr: string;
  doc?: string | null;
  len?: number;
  keys?: string[];
  signature?: string;
  dir?: string[];
  module?: string;
  file?: string;
  shape?: string;
  dtype?: string;
  [extra: string]: unknown;
};

// ---------------------------------------------------------------------------------------------
// The result of one cell: one shape for the library, `--json` and the supervisor.
// ---------------------------------------------------------------------------------------------

export type ExecStatus = "ok" | "error" | "timeout" | "interrupted" | "died";

/** One display event: MIME type -> text data, or a file path for binary payloads. */
export type DisplayItem = Record<string, string>;

export type RestoreReport = {
  /** Where the state came from: the snapshot file restored. */
  source: string;
  restored: string[];
  /** Names not restored: those the worker could not load, and those the snapshot could not save ("not in the snapshot: ..."). */
  failed: NameFailure[];
};

export type ExecResult = {
  stdout: string;
  stderr: string;
  value: string | null;
  exception: string | null;
  traceback: string;
  duration_ms: number;
  truncated: boolean;
  truncated_bytes: number;
  status: ExecStatus;
  session: string | null;
  display: DisplayItem[];
  /** Set when this call ran in a fresh worker because the previous one was lost; says what happened. */
  notice?: string;
  /** Set when this call's worker was restored from a snapshot before it ran. */
  restored?: RestoreReport;
};

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

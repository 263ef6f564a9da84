// The runtime protocol v3, declarations only: what a host writes to runtime.py's stdin (requests)
// and what it reads back (events), one JSON object per line. Documented in docs/protocol.md; the same
// names stand in runtime.py's docstring table, and lib/protocol/declared_once.test.ts keeps the three
// in step.

// ---------------------------------------------------------------------------------------------
// Runtime protocol v3: host -> runtime requests (one JSON object per line on the worker's stdin)
// ---------------------------------------------------------------------------------------------

export type ExecuteRequest = {
  type: "execute";
  id: string;
  code: string;
  /** awrepl addition: the file the code came from (`run -f`): tracebacks name it, `__file__` is set to it for the cell. */
  filename?: string;
  /** awrepl addition: how matplotlib figures are rendered (default "png"). */
  figure_format?: "png" | "svg";
  /** awrepl addition: display entries the cell may ship; past it they are only counted (done's `display_dropped`). 0 = no limit. */
  max_display_entries?: number;
  /**
   * awrepl addition: bytes of one display payload; a bigger one is left out before it is encoded and
   * the entry's `error` says so. Absent: 32 MiB (DEFAULTS.displayMaxPayloadBytes); 0 = no limit.
   */
  max_display_payload_bytes?: number;
};
export type InterruptRequest = { type: "interrupt"; id?: string };
export type HostReplyRequest = { type: "host_reply"; id: string; data: Record<string, unknown> };
/**
 * Either `path` + `manifest_path` (the worker writes both files itself: a local worker), or, an awrepl
 * addition, `to: "host"`: the payload streams back as `data` events (never whole in the worker's
 * memory) and the `done` carries its size, sha256 and the manifest for the host to write
 * (remote and sandboxed workers, which cannot write the host's state directory).
 */
export type SnapshotRequest = {
  type: "snapshot";
  id: string;
  path?: string;
  manifest_path?: string;
  to?: "host";
  max_bytes?: number;
  max_variable_bytes?: number;
  /** awrepl addition: a name that takes longer than this to pickle is skipped (pure-Python pickling; C code cannot be cut short). */
  max_variable_ms?: number;
  /** Path mode only (a payload sent to the host may not be kept, so nothing is pruned). */
  prune_oversized?: boolean;
  /** With `to: "host"`: raw bytes per `data` event (default 256 KiB, at most 16 MiB). */
  chunk_bytes?: number;
  /**
   * awrepl addition, with `to: "host"` (a runtime with the `binary_data` capability): the payload
   * comes as binary frames, a header line `{"event":"data","id","seq","bytes":N}` and N raw bytes.
   */
  binary?: boolean;
  /** awrepl addition, path mode: false skips the fsync before the rename (an autosave; an explicit snapshot stays durable). */
  fsync?: boolean;
};
/**
 * Either `path` (the worker reads the file), or, an awrepl addition, `from: "host"` with the payload's
 * exact size in `bytes` (the host caps it first: the worker allocates it) and optionally its sha256;
 * the payload follows in `data` requests carrying this request's id.
 */
export type RestoreRequest = {
  type: "restore";
  id: string;
  path?: string;
  from?: "host";
  bytes?: number;
  sha256?: string;
  /** With `from: "host"` (`binary_data`): the pieces come as binary frames, and the sha256 after the last one. */
  binary?: boolean;
};
/**
 * awrepl addition, no done, not queued: the next piece (base64) of restore `id`'s payload; with a
 * binary restore, `bytes: N` (N raw bytes follow the line), and at the end `sha256` of all of them.
 */
export type DataRequest = { type: "data"; id: string; data?: string; bytes?: number; sha256?: string };
export type ListNamesRequest = { type: "list_names"; id: string };
export type SignaturesRequest = { type: "signatures"; id: string; modules?: string[] };
/**
 * Queued, `done` only with an id. awrepl addition: `now: true` is not queued and gets no done: the
 * process exits at once and its process group (the cells' children) is killed.
 */
export type ShutdownRequest = { type: "shutdown"; id?: string; now?: true };
/** awrepl addition, not queued: a heartbeat for the watchdog; with an id, a `done` with `time`. */
export type PingRequest = { type: "ping"; id?: string };
/**
 * awrepl addition, not queued: from now on, no ping (and no growth of the unread bytes on stdin) for
 * `timeout_ms` ends the worker's process group, even in a C loop; 0 turns it off. `done` + `watchdog`.
 */
export type HeartbeatRequest = { type: "heartbeat"; id: string; timeout_ms: number };
/** awrepl addition, not queued: the worker's own facts (`done` + `facts`), also while a cell runs. */
export type InfoRequest = { type: "info"; id: string };
// awrepl's additions, answered in their `done`.
/** `form`: "line" (default) says what each value is in one line; "repr" gives `type: short repr` (what autosave compares). */
export type VariablesRequest = { type: "variables"; id: string; form?: "line" | "repr" };
/** `full`: the whole docstring and every attribute name (dunders too), instead of the first paragraph and 40 public names. */
export type InspectRequest = { type: "inspect"; id: string; name: string; full?: boolean };
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
  | IsCompleteRequest
  | DataRequest
  | PingRequest
  | HeartbeatRequest
  | InfoRequest;

/** Requests that get exactly one `done` (the ones carrying an id; a ping gets one when it has an id). */
export type IdRequest = Exclude<RuntimeRequest, InterruptRequest | HostReplyRequest | ShutdownRequest | DataRequest>;

/**
 * The requests a runtime answers the moment it reads them, also while a cell runs (runtime.py's
 * dispatch table, its `now` column; `shutdown` only with `now: true`). Every other request is queued:
 * run strictly in order, one at a time.
 */
export type AtOnceType = "interrupt" | "host_reply" | "data" | "ping" | "heartbeat" | "info" | "shutdown";

// ---------------------------------------------------------------------------------------------
// Runtime protocol v3: runtime -> host events (one JSON object per line on the private fd)
// ---------------------------------------------------------------------------------------------

export type ReadyEvent = { event: "ready"; protocol: number; python: string; capabilities: string[]; pid?: number };
export type OutputEvent = { event: "stdout" | "stderr"; id: string | null; text: string };
export type ResultEvent = { event: "result"; id: string; text: string };
export type DisplayEvent = {
  event: "display";
  id: string | null;
  data: Record<string, unknown>;
  /** awrepl addition: "value" for the trailing value's richer forms (its text is the `result`). */
  source?: "value";
  /** awrepl addition: the repr methods that raised while the entry was built. */
  error?: string;
};
export type HostRequestEvent = { event: "host_request"; id: string; data: Record<string, unknown> };
export type ErrorEvent = { event: "error"; id: string | null; ename: string; evalue: string; traceback: string[] };
/** awrepl addition: the next piece (base64) of snapshot `id`'s payload (`to: "host"`), `seq` from 0. */
export type DataEvent = { event: "data"; id: string; seq: number; data: string };

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
  /** snapshot to "host": the payload's sha256 (hex) and the manifest the host writes beside it. */
  sha256?: string;
  manifest?: WireManifest;
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
  // execute: display entries past max_display_entries, not shipped
  display_dropped?: number;
  // heartbeat: false when no watchdog runs (nothing enforces the heartbeat then)
  watchdog?: boolean;
  // ping with an id: the worker's clock (seconds since the epoch)
  time?: number;
  // info
  facts?: WorkerFacts;
};

export type RuntimeEvent =
  | ReadyEvent
  | OutputEvent
  | ResultEvent
  | DisplayEvent
  | HostRequestEvent
  | ErrorEvent
  | DoneEvent
  | DataEvent;

/**
 * What `inspect` reports about one name; fields appear as they apply to the value, the ones that say
 * how big it is first (shape, columns, dtypes or dtype, len, elements, summary), then repr, signature,
 * docstring, module, file, keys, dir.
 */
export type InspectInfo = {
  name?: string;
  type: string;
  /** A DataFrame's or an ndarray's shape, as Python prints the tuple: "(7, 2)". */
  shape?: string;
  /** A DataFrame's column names (at most 100). */
  columns?: string[];
  /** A DataFrame's dtype per column (at most 100), as pandas names them. */
  dtypes?: Record<string, string>;
  /** An ndarray's (or Series') dtype: "float64". */
  dtype?: string;
  len?: number;
  /** A builtin container's element types, from its first 50 items: "int", "int | str", "str, int" for a dict. */
  elements?: string;
  /** The value's `variables` line: "DataFrame 7×2 [a: float64, b: object]". */
  summary?: string;
  repr: string;
  signature?: string;
  /** The value's __doc__ (the original awrepl's key): its first paragraph unless the request asked for `full`. */
  docstring?: string;
  module?: string;
  file?: string;
  /** A mapping's keys (at most 100). */
  keys?: string[];
  /** Attribute names: at most 40 public ones; with `full`, every name. */
  dir?: string[];
  /** What was left out and `full` gives: characters of the docstring, attribute names. */
  more?: { docstring?: number; dir?: number };
  [extra: string]: unknown;
};

/** The manifest a snapshot to "host" reports in its `done` (the file a path-mode snapshot writes). */
export type WireManifest = {
  version: number;
  savedNames: string[];
  skipped: NameFailure[];
  pruned: string[];
  bytes: number;
  pythonVersion: string;
  /** Seconds since the epoch. */
  timestamp: number;
  serializer: "dill" | "pickle";
  serializers: Record<string, "dill" | "pickle">;
  support: string[];
};

/** What `info` answers: facts measured where the worker runs (null where the platform has no answer). */
export type WorkerFacts = {
  /** The runtime's pid in its own pid namespace (2 inside bwrap; the far side's over ssh). */
  pid: number;
  ppid?: number;
  pgid?: number;
  /** Whether the runtime leads its process group (its cells' children end with it). */
  own_group: boolean;
  uid?: number;
  /** os.uname().nodename: the far side's host name over ssh. */
  host: string | null;
  cwd: string | null;
  /** Resident memory and its peak, in bytes (/proc/self/status; peak only from getrusage elsewhere). */
  rss: number | null;
  peak_rss: number | null;
  python: string;
  executable: string;
  prefix: string;
  base_prefix: string;
  /** Whether the watchdog process runs (it enforces the heartbeat and ends the group on exit). */
  watchdog: boolean;
  /** The request running now, if any. */
  busy: { id: string; type: string } | null;
};

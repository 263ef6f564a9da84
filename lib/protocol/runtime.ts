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
  // execute: display entries past max_display_entries, not shipped
  display_dropped?: number;
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
  /** The value's __doc__ (the original awrepl's key). */
  docstring?: string;
  /** The value's own doc, when it is not just its builtin type's. */
  doc?: string | null;
  len?: number;
  keys?: string[];
  signature?: string;
  /** Public attribute names (at most 200), for every value. */
  dir?: string[];
  module?: string;
  file?: string;
  shape?: string;
  dtype?: string;
  [extra: string]: unknown;
};

// The library's public shapes that are not on the wire: options and the one session interface that
// ReplSession (a local worker), attach() (a supervisor-held session) and `serve` all share.
import type { DisplayItem, ExecResult, RestoreReport } from "./result.ts";
import type { InspectInfo, NameFailure } from "./runtime.ts";
import type { NetAllowList, ResourceLimits } from "./limits.ts";

/**
 * The `--sandbox` profile (Linux, bubblewrap): no network, the filesystem read-only except the
 * session's cwd and a private /tmp and $HOME, home secrets hidden, new pid namespace and session, the
 * environment reduced to an allowlist (PATH, HOME, LANG, LC_*, TERM, TZ, NO_COLOR, VIRTUAL_ENV,
 * PYTHON*). Each field widens it. Part of a session's spec: a re-created session gets the same sandbox.
 */
export type SandboxProfile = {
  /** Keep the host's network (`--sandbox-net`). */
  network?: boolean;
  /** Extra writable paths (each must exist). */
  writable?: string[];
  /** Extra environment variable names passed through (`--env NAME`); their values never go on a command line. */
  env?: string[];
  /**
   * `.git` writable (`--sandbox-git`): git works inside, and what the cell leaves in `.git` (other
   * than its hooks and config, still read-only) is trusted to run later. Default: `.git` read-only.
   */
  git?: boolean;
  /**
   * Your home directory (or a directory holding it) may be the cwd or a writable path
   * (`--sandbox-home`): its credential stores stay hidden and its rc files read-only, but a file the
   * cell creates there (a new rc file, a program in ~/.local/bin) may run later. Default: refused.
   */
  home?: boolean;
  /**
   * The hosts the sandbox may reach through awrepl's proxy (`--sandbox-allow HOST[:PORT]`), without a
   * network of its own: `host`, `host:port`, `*.domain`, an address (docs/limits.md). Excludes `network`.
   */
  allow?: NetAllowList;
};

export type SessionOptions = {
  /** Per-cell timeout in ms; 0 means none. It covers the wait for the call's turn too. Default 30 000. */
  timeoutMs?: number;
  /** Cap on stdout+stderr kept per cell, in UTF-8 bytes; 0 means none. Default 65 536. */
  maxOutputBytes?: number;
  /** After an interrupt at the deadline, how long to wait before killing the worker. Default 2 000. */
  graceMs?: number;
  /** Interpreter command line (`python3`, `/usr/bin/python3`, `docker exec -i box python3`). */
  python?: string;
  /**
   * Run in this virtual environment (a directory; relative to `cwd`): its python, created on first use
   * with `python -m venv` by the interpreter the session would otherwise run (`python`, or the usual
   * order). In a sandbox the directory is writable, so `pip install` persists in it.
   */
  venv?: string;
  /** Working directory of the worker. Default: the caller's. */
  cwd?: string;
  /** Extra environment for the worker. */
  env?: Record<string, string>;
  /** State directory (AWREPL_HOME): runtime cache, snapshots, display files. */
  home?: string;
  /**
   * Snapshot to the default place after every cell that changed the namespace, so a timeout kill or a
   * worker death goes back to the state before the cell that caused it (docs/persistence.md).
   */
  autosave?: boolean;
  /** Run the worker in a sandbox (Linux: bubblewrap on PATH); see SandboxProfile. Local interpreters only. */
  sandbox?: SandboxProfile;
  /**
   * Resource limits of the worker and everything it starts (`--memory`, `--max-procs`, `--cpu`,
   * `--max-file-size`): a cgroup where the machine allows one, else rlimits; a limit that cannot be
   * enforced fails the start unless `best_effort` (docs/limits.md). Local and sandboxed interpreters.
   */
  limits?: ResourceLimits;
};

export type ExecuteOptions = {
  /** The file the code came from (`run -f`): tracebacks name it and `__file__` is set while it runs. */
  filename?: string;
  /** This call's timeout (covering its wait for its turn) and output cap, instead of the session's. */
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** Live output as the cell produces it (before truncation is applied to the result). */
  onOutput?: (stream: "stdout" | "stderr", text: string) => void;
  onDisplay?: (item: DisplayItem) => void;
  /** Aborting (Ctrl-C, a client that went away) withdraws the call while it waits for its turn (it never runs), and interrupts the cell once it runs. */
  signal?: AbortSignal;
  /**
   * Answers the cell's `await awrepl.host_request(data)`: what it returns (or resolves) is the data the
   * cell gets. Without it the cell gets `{"error": "no host bridge in this awrepl host"}`.
   */
  onHostRequest?: HostRequestHandler;
  /**
   * An idempotency key: a call with a key the session has seen runs nothing, and gets the first
   * call's result marked `replayed: true` (waiting for it while it still runs); the same key with
   * other code is a usage error. At most 128 characters; a session keeps its last 128 keys for a day
   * (lib/core/limits.ts IDEMPOTENCY), with its snapshot.
   */
  id?: string;
};

/** A host request's data in, the reply's data out (an object; anything else arrives as `{value}`). */
export type HostRequestHandler = (data: Record<string, unknown>) => unknown;

export type CompletenessStatus = "complete" | "incomplete" | "invalid";

export type SnapshotReport = {
  path: string;
  saved: string[];
  skipped: NameFailure[];
  pruned: string[];
  bytes: number;
};

/** `full`: the whole docstring and every attribute name (dunders too), not the first paragraph and 40 public names. */
export type InspectOptions = { full?: boolean };

export interface Session extends AsyncDisposable {
  readonly id: string;
  execute(code: string, options?: ExecuteOptions): Promise<ExecResult>;
  variables(): Promise<Record<string, string>>;
  inspect(name: string, options?: InspectOptions): Promise<InspectInfo>;
  reset(): Promise<void>;
  /** Interrupts the running cell, if any; resolves at once. */
  interrupt(): Promise<void>;
  complete(code: string, cursor?: number): Promise<string[]>;
  isComplete(code: string): Promise<{ status: CompletenessStatus; indent: string }>;
  snapshot(path?: string): Promise<SnapshotReport>;
  restore(path?: string): Promise<RestoreReport>;
  close(): Promise<void>;
}

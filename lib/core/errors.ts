// One error type for everything awrepl itself reports: a stable code a caller can switch on, and the
// process exit status the CLI uses for it. Messages are one sentence naming the offending value.
// The exit statuses (and what a cell's status maps to) live here and nowhere else.
import type { ExecStatus } from "../protocol/result.ts";

export const ExitCode = {
  ok: 0,
  cellRaised: 1,
  /** `daemon stop`, `close --keep`: a session's state could not be saved (each one is said). */
  stateNotSaved: 1,
  usage: 2,
  timeout: 124,
  internal: 125,
  interrupted: 130,
} as const;

/** Every error code awrepl reports, and the exit status the CLI gives it. */
const EXIT_FOR_CODE = {
  usage: ExitCode.usage, // bad flags, a bad session name, a missing file
  no_interpreter: ExitCode.internal, // the Python command could not be started
  worker_died: ExitCode.internal, // the worker exited while a request was pending
  worker_closed: ExitCode.internal, // a request was sent after close()
  timeout: ExitCode.timeout,
  protocol: ExitCode.internal, // the worker or supervisor sent something that is not the protocol
  supervisor_unreachable: ExitCode.internal,
  version_mismatch: ExitCode.internal,
  session_not_found: ExitCode.usage,
  session_exists: ExitCode.usage,
  session_busy: ExitCode.usage, // (MCP) the cell this server reported as running has not been collected or interrupted yet
  session_closed: ExitCode.internal, // the call's session was closed (close, a stop) before or while it ran
  cancelled: ExitCode.interrupted, // a call withdrawn by its client before it ran
  name_not_found: ExitCode.cellRaised, // inspect of an unknown name
  snapshot_failed: ExitCode.internal,
  restore_failed: ExitCode.internal,
  internal: ExitCode.internal,
} as const;

export type ErrorCode = keyof typeof EXIT_FOR_CODE;

/** True for a code this build knows (a reply from another build may carry one it does not). */
export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === "string" && Object.hasOwn(EXIT_FOR_CODE, code);
}

/** The exit status of a cell that ran: its status decides. */
const EXIT_FOR_STATUS: Record<ExecStatus, number> = {
  ok: ExitCode.ok,
  error: ExitCode.cellRaised,
  timeout: ExitCode.timeout,
  interrupted: ExitCode.interrupted,
  died: ExitCode.internal,
};

export function exitCodeForStatus(status: ExecStatus): number {
  return EXIT_FOR_STATUS[status] ?? ExitCode.internal;
}

export class AwreplError extends Error {
  override readonly name = "AwreplError";
  readonly code: ErrorCode;
  readonly exitCode: number;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.exitCode = EXIT_FOR_CODE[code];
  }
}

export function usageError(message: string): AwreplError {
  return new AwreplError("usage", message);
}

/** `err` as an AwreplError: itself when it is one, else an `internal` error carrying its message. */
export function asAwreplError(err: unknown): AwreplError {
  if (err instanceof AwreplError) return err;
  return new AwreplError("internal", (err as Error)?.message ?? String(err));
}

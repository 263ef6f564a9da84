// One error type for everything awrepl itself reports: a stable code a caller can switch on, and the
// process exit status the CLI uses for it. Messages are one sentence naming the offending value.

export const ExitCode = {
  ok: 0,
  cellRaised: 1,
  usage: 2,
  timeout: 124,
  internal: 125,
  interrupted: 130,
} as const;

export type ErrorCode =
  | "usage" // bad flags, a bad session name, a missing file
  | "no_interpreter" // the Python command could not be started
  | "worker_died" // the worker exited while a request was pending
  | "worker_closed" // a request was sent after close()
  | "timeout"
  | "protocol" // the worker or supervisor sent something that is not the protocol
  | "supervisor_unreachable"
  | "version_mismatch"
  | "session_not_found"
  | "session_exists"
  | "name_not_found" // inspect of an unknown name
  | "snapshot_failed"
  | "restore_failed"
  | "internal";

const exitFor: Record<ErrorCode, number> = {
  usage: ExitCode.usage,
  no_interpreter: ExitCode.internal,
  worker_died: ExitCode.internal,
  worker_closed: ExitCode.internal,
  timeout: ExitCode.timeout,
  protocol: ExitCode.internal,
  supervisor_unreachable: ExitCode.internal,
  version_mismatch: ExitCode.internal,
  session_not_found: ExitCode.usage,
  session_exists: ExitCode.usage,
  name_not_found: ExitCode.cellRaised,
  snapshot_failed: ExitCode.internal,
  restore_failed: ExitCode.internal,
  internal: ExitCode.internal,
};

export class AwreplError extends Error {
  override readonly name = "AwreplError";
  readonly code: ErrorCode;
  readonly exitCode: number;
  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.exitCode = exitFor[code];
  }
}

export function usageError(message: string): AwreplError {
  return new AwreplError("usage", message);
}

// The package entry: the library API of DESIGN.md.
export { ReplSession, type ReplSessionInfo, type ReplSessionOptions } from "./session.ts";
export { SpareWorkers } from "./spare.ts";
export { SessionPool } from "./pool.ts";
export { AwreplError, ExitCode, type ErrorCode } from "./errors.ts";
export type { CompletenessStatus, ExecuteOptions, Session, SessionOptions, SnapshotReport } from "./types.ts";
export type { DisplayItem, ExecResult, ExecStatus, InspectInfo, NameFailure, RestoreReport } from "./protocol.ts";
export {
  attach,
  type AttachOptions,
  closeAllSessions,
  closeSession,
  daemonStatus,
  interruptSession,
  listSessions,
  RemoteSession,
  stopDaemon,
} from "./client.ts";

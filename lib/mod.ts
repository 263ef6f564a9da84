// The package entry: the library API (README, "Library API"; docs/architecture.md, "Layers").
export { ReplSession, type ReplSessionInfo, type ReplSessionOptions } from "./session/session.ts";
export { SpareWorkers } from "./worker/spare.ts";
export { SessionPool } from "./session/pool.ts";
export { AwreplError, type ErrorCode, ExitCode } from "./core/errors.ts";
export type { CompletenessStatus, ExecuteOptions, InspectOptions, SandboxProfile, Session, SessionOptions, SnapshotReport } from "./protocol/api.ts";
export type { DisplayItem, ExecResult, ExecStatus, RestoreReport } from "./protocol/result.ts";
export type { InspectInfo, NameFailure } from "./protocol/runtime.ts";
export { attach, type AttachOptions, type Collected, type DetachedCell, RemoteSession } from "./client/attach.ts";
export { closeAllSessions, closeSession, collectResult, daemonStatus, type DaemonStopReport, interruptSession, listSessions, stopDaemon, stopDaemonReport } from "./client/daemon.ts";
export type { ClientKind, HistoryCell, HistoryValue, StopSnapshot } from "./protocol/supervisor.ts";
export type { LimitsUsage, NetAllowList, ResourceLimits } from "./protocol/limits.ts";

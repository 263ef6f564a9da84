// The result of one cell, declarations only: one shape for the library, `--json`, the supervisor
// and MCP (README "The JSON result").
import type { NameFailure } from "./runtime.ts";

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

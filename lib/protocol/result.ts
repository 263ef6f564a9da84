// The result of one cell, declarations only: one shape for the library, `--json`, the supervisor
// and MCP (README "The JSON result").
import type { NameFailure } from "./runtime.ts";

// ---------------------------------------------------------------------------------------------
// The result of one cell: one shape for the library, `--json` and the supervisor.
// ---------------------------------------------------------------------------------------------

export type ExecStatus = "ok" | "error" | "timeout" | "interrupted" | "died";

/** What awrepl says about one representation of a display entry: `bytes`, the size of its file. */
export type DisplayFileInfo = { bytes: number };

/**
 * One display entry (README "Rich output"): every key with a "/" is a MIME type whose value is the
 * data inline (text, markdown, HTML, LaTeX, JSON as JSON text) or, for an image or other binary
 * payload, the path of the file it was written to. The other keys are awrepl's:
 * - `metadata`: MIME type -> facts about that representation (`bytes` of each file);
 * - `source: "value"`: the trailing value's richer forms (its text is the result's `value`);
 * - `error`: a repr method that raised (its type is left out; the cell still succeeds).
 */
export type DisplayItem = {
  [mime: string]: string | Record<string, DisplayFileInfo> | undefined;
  metadata?: Record<string, DisplayFileInfo>;
  source?: "value";
  error?: string;
};

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
  /** Display entries left out of `display` (over the per-cell count or the output limit); absent when none. */
  display_dropped?: number;
  /** Set when this call ran in a fresh worker because the previous one was lost; says what happened. */
  notice?: string;
  /** Set when this call's worker was restored from a snapshot before it ran. */
  restored?: RestoreReport;
  /** This call repeated an idempotency key: nothing ran, this is the first call's result. */
  replayed?: boolean;
};

// What `awrepl run` was asked to do, as its parser (commander, or the fast path in run.ts) leaves it:
// read by run.ts for one cell and by notebook_run.ts for a notebook's cells.
export type RunArgs = {
  code?: string;
  file?: string;
  json?: boolean;
  traceback?: boolean;
  timeoutMs?: number;
  maxOutputBytes?: number;
  python?: string;
  /** Switch autosave on for the session (docs/persistence.md). */
  autosave?: boolean;
  /** Move the cell's display files (images) here: created if missing, never cleaned by awrepl. */
  displayDir?: string;
  /** An idempotency key (named sessions only): a repeat runs nothing and gets the first result. */
  id?: string;
  /** Start the cell detached and print its id (named sessions only): `wait ID` collects it. */
  detach?: boolean;
  /** `-f FILE.ipynb`: run every code cell, not stopping at the first that fails (lib/cli/notebook_run.ts). */
  keepGoing?: boolean;
};

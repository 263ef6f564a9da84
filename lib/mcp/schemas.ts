// The MCP tools' argument and result schemas (zod 4, as @modelcontextprotocol/server 2.x takes them;
// the SDK turns them into the JSON Schemas `tools/list` advertises and checks every call against them).
// Arguments are strict: a misspelt argument (`timeout` for `timeout_ms`) is an error the agent sees,
// not a value silently ignored. Results are loose: the advertised schema does not say
// `additionalProperties: false`, so a field added to ExecResult later (as `notice` and `restored`
// were) cannot make a strict client reject every result. The SDK validates `structuredContent`
// against the output schema before sending it, so ExecResult's statuses must all be listed here
// (schemas.test.ts checks that ExecResult fits).
import * as z from "zod";
import { IDEMPOTENCY, MAX_DELAY_MS } from "../core/limits.ts";
import { SESSION_NAME } from "../core/names.ts";

/** The defaults the descriptions state (they come from flags and the config). */
export type SchemaDefaults = { waitMs: number; timeoutMs: number; maxOutputBytes: number };

/** Cells the `history` tool returns unless asked (its results carry each cell's output), and at most. */
export const HISTORY_TOOL_DEFAULT_CELLS = 20;
export const HISTORY_TOOL_MAX_CELLS = 1_000;

/** Bytes of stdout+stderr a call may ask to keep. */
export const MAX_OUTPUT_RANGE = { min: 256, max: 16 * 1024 * 1024 } as const;

export function argumentSchemas(d: SchemaDefaults) {
  const session = z
    .string()
    .regex(SESSION_NAME, "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    .optional()
    .describe("Session name (default: this server's session). Sessions are shared with `awrepl -s NAME ...` in a shell.");
  const waitMs = z
    .number()
    .int()
    .min(0)
    .max(MAX_DELAY_MS)
    .optional()
    .describe(`How long to wait for the result before returning status "running" (ms; default ${d.waitMs}). The cell keeps running; collect it with \`wait\`.`);
  return {
    run: z.strictObject({
      code: z.string().describe("Python code. The trailing expression's repr is returned as `value`, as in a REPL."),
      session,
      timeout_ms: z
        .number()
        .int()
        .min(0)
        .max(MAX_DELAY_MS)
        .optional()
        .describe(`Interrupt the cell after this long (ms; 0 = never; default ${d.timeoutMs}). A cell that ignores the interrupt is killed and the session's state is lost.`),
      max_output: z
        .number()
        .int()
        .min(MAX_OUTPUT_RANGE.min)
        .max(MAX_OUTPUT_RANGE.max)
        .optional()
        .describe(`Bytes of stdout+stderr kept (head and tail; default ${d.maxOutputBytes}).`),
      wait_ms: waitMs,
      idempotency_key: z
        .string()
        .min(1)
        .max(IDEMPOTENCY.maxKeyLength)
        .optional()
        .describe(
          "A key of your choosing for this cell. Send it again when you retry a call whose answer you did not get: the cell is not run twice; the retry gets the first call's result, marked `replayed`, or waits for it. The same key with other code is an error.",
        ),
    }),
    wait: z.strictObject({ session, wait_ms: waitMs }),
    session: z.strictObject({ session }),
    inspect: z.strictObject({
      name: z.string().min(1).describe("A name in the session's namespace"),
      full: z.boolean().optional().describe("The whole docstring and every attribute name, dunders too (default: the first paragraph, 40 public names)."),
      session,
    }),
    none: z.strictObject({}),
    history: z.strictObject({
      session,
      last: z.number().int().min(0).max(HISTORY_TOOL_MAX_CELLS).optional().describe(`Only the newest N cells (default ${HISTORY_TOOL_DEFAULT_CELLS}; at most ${HISTORY_TOOL_MAX_CELLS}).`),
    }),
    close: z.strictObject({
      session,
      keep_snapshot: z.boolean().optional().describe("Keep the session's snapshot so that its next use restores it (default false)."),
    }),
  };
}

export type Arguments = ReturnType<typeof argumentSchemas>;
export type RunArgs = z.infer<Arguments["run"]>;
export type WaitArgs = z.infer<Arguments["wait"]>;
export type SessionArgs = z.infer<Arguments["session"]>;
export type InspectArgs = z.infer<Arguments["inspect"]>;
export type CloseArgs = z.infer<Arguments["close"]>;
export type HistoryArgs = z.infer<Arguments["history"]>;

/** DisplayItem (lib/protocol/result.ts): MIME type -> text or file path, plus awrepl's metadata/source/error keys. */
const fileInfo = z.record(z.string(), z.looseObject({ bytes: z.number() }));
const display = z
  .object({ metadata: fileInfo.optional(), source: z.literal("value").optional(), error: z.string().optional() })
  .catchall(z.union([z.string(), fileInfo]).optional());
const nameFailure = z.looseObject({ name: z.string(), reason: z.string() });

/** ExecResult (lib/protocol/result.ts), plus two statuses of MCP's own: `running` and `idle`. */
export const execResult = z.looseObject({
  stdout: z.string(),
  stderr: z.string(),
  value: z.string().nullable(),
  exception: z.string().nullable(),
  traceback: z.string(),
  duration_ms: z.number(),
  truncated: z.boolean(),
  truncated_bytes: z.number().int(),
  status: z
    .enum(["ok", "error", "timeout", "interrupted", "died", "running", "idle"])
    .describe("running: not finished within wait_ms and still running (call `wait`); idle: nothing to wait for"),
  session: z.string().nullable(),
  display: z.array(display).describe("One entry per display event: MIME type -> text, or the path of a file for binary data"),
  display_dropped: z.number().int().optional().describe("Display entries left out (over the per-cell count or the output limit)"),
  notice: z.string().optional(),
  restored: z.looseObject({ source: z.string(), restored: z.array(z.string()), failed: z.array(nameFailure) }).optional(),
  replayed: z.boolean().optional().describe("true: this call repeated an idempotency_key; nothing ran, this is the first call's result"),
});

export const variablesResult = z.looseObject({ session: z.string(), variables: z.record(z.string(), z.string()) });
export const inspectResult = z.looseObject({ type: z.string(), repr: z.string() });
export const interruptResult = z.looseObject({
  session: z.string(),
  interrupted: z.boolean().describe("false: no cell was running"),
  result: execResult.optional().describe("The interrupted cell's result, when it was sent by this server or left by an earlier one"),
});
export const sessionsResult = z.looseObject({
  sessions: z.array(
    z.looseObject({
      name: z.string(),
      pid: z.number().nullable(),
      python: z.string(),
      cwd: z.string(),
      state: z.enum(["idle", "busy"]),
      queued: z.number(),
      cells_run: z.number(),
      age_ms: z.number(),
      idle_ms: z.number(),
      rss_bytes: z.number().nullable(),
    }),
  ),
  saved: z.array(z.string()).describe("Sessions not running that have a snapshot: their next use restores them"),
  default_session: z.string(),
});
export const resetResult = z.looseObject({ session: z.string(), reset: z.boolean() });
export const closeResult = z.looseObject({ session: z.string(), closed: z.boolean().describe("false: there was neither a session nor a snapshot of that name") });
export const historyResult = z.looseObject({
  session: z.string(),
  cells: z.array(
    z.looseObject({
      n: z.number().int(),
      code: z.string(),
      client: z.string().describe("Who ran it: cli, serve, mcp, library, python or kernel"),
      started_at: z.string(),
      duration_ms: z.number(),
      status: z.string(),
      result: execResult,
    }),
  ),
  total: z.number().int().describe("Cells ever recorded in this session's history"),
  dropped: z.number().int().describe("The oldest cells the history's bounds left out"),
});

// ExecResult -> an MCP tool result. `structuredContent` is the ExecResult itself (file paths, never
// base64: hosts have put structuredContent into the model's context as text beside the native image).
// The text block reads like `awrepl run`'s terminal output (the CLI's renderer, handed in by the
// command: stdout, display text and `[image/png] /path` lines, the value, then stderr, notices and the
// short traceback), so a host that ignores structured content still shows the right thing. Display
// images come back as image blocks up to a size cap, their paths in the text either way. awrepl's own
// failures become isError results carrying the stable error code.
import { readFileSync, statSync } from "node:fs";
import { isAbsolute } from "node:path";
import { AwreplError } from "../core/errors.ts";
import { durationMs } from "../core/units.ts";
import type { DisplayItem, ExecResult } from "../protocol/result.ts";
import type { SessionInfo } from "../protocol/supervisor.ts";
import { representations } from "../session/mime.ts";

/** The SDK's CallToolResult, as far as we build it (structural: this module does not load the SDK). */
export type ToolResult = {
  content: ({ type: "text"; text: string } | { type: "image"; data: string; mimeType: string })[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
  _meta?: Record<string, unknown>;
};

/**
 * How the CLI shows things, handed in by `awrepl mcp` (lib/cli sits above this layer): a result as
 * `awrepl run` prints it, and the `sessions` table.
 */
export type Format = {
  result(result: ExecResult): { stdout: string; stderr: string };
  sessions(rows: SessionInfo[]): string;
};

/** Image types a model can look at; other binary display data (PDF, TIFF, ...) stays a path. */
const IMAGE_MIMES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
/** At most this many images per result (each counts against the host's token limit). */
export const MAX_IMAGES = 8;

export type ContentOptions = {
  format: Format;
  /** Largest image attached as base64 (bytes of the file); larger ones: the path only. */
  maxImageBytes: number;
};

export function execContent(result: ExecResult, options: ContentOptions): ToolResult {
  const { stdout, stderr } = options.format.result(result);
  const notes: string[] = [];
  if (result.replayed) notes.push("(replayed: this idempotency_key ran before; nothing ran now, this is its first result)");
  const images = imageBlocks(result.display, options.maxImageBytes, notes);
  let text = joinText(stdout, stderr, notes.join("\n"));
  // Some hosts show nothing at all for an empty text block.
  if (text === "") text = result.status === "ok" ? "(no output)" : `(${result.status})`;
  return { content: [{ type: "text", text }, ...images], structuredContent: asRecord(result) };
}

/** A cell still running after wait_ms: its output so far (the tail) and what to do next. */
export function runningContent(snapshot: ExecResult, what: string): ToolResult {
  const parts: string[] = [];
  const out = joinText(snapshot.stdout, snapshot.stderr, "");
  if (out) parts.push(snapshot.truncated ? `[... ${snapshot.truncated_bytes} earlier bytes of output not shown]\n${out}` : out);
  parts.push(what);
  return { content: [{ type: "text", text: joinText(...parts) }], structuredContent: asRecord({ ...snapshot, notice: what }) };
}

/** Nothing to wait for: an ExecResult-shaped `idle` result whose notice says why. */
export function idleContent(session: string, notice: string): ToolResult {
  return { content: [{ type: "text", text: notice }], structuredContent: asRecord({ ...emptyResult(session, "idle"), notice }) };
}

/** An ExecResult with no output, of MCP's own statuses (`running`, `idle`). */
export function emptyResult(session: string, status: "running" | "idle", elapsedMs = 0): ExecResult {
  return {
    stdout: "",
    stderr: "",
    value: null,
    exception: null,
    traceback: "",
    duration_ms: durationMs(elapsedMs),
    truncated: false,
    truncated_bytes: 0,
    status: status as ExecResult["status"],
    session,
    display: [],
  };
}

/** A notice prepended to a result (text and structuredContent alike). */
export function withNotice(result: ToolResult, notice: string): ToolResult {
  const sc = result.structuredContent as ExecResult | undefined;
  if (sc) sc.notice = sc.notice ? `${notice} ${sc.notice}` : notice;
  const first = result.content[0];
  if (first?.type === "text") first.text = first.text === "(no output)" ? `awrepl: ${notice}` : `${first.text}${first.text.endsWith("\n") ? "" : "\n"}awrepl: ${notice}`;
  return result;
}

/** Anything a tool handler threw: awrepl's failures keep their code; anything else is `internal`. */
export function errorContent(err: unknown): ToolResult {
  const code = err instanceof AwreplError ? err.code : "internal";
  const message = err instanceof Error ? err.message : String(err);
  return {
    content: [{ type: "text", text: `awrepl: ${message}\n(error code: ${code})` }],
    isError: true,
    _meta: { "awrepl/error": { code, message } },
  };
}

function imageBlocks(display: DisplayItem[], maxBytes: number, notes: string[]): ToolResult["content"] {
  const images: ToolResult["content"] = [];
  for (const item of display) {
    for (const [mime, path] of representations(item)) {
      if (!IMAGE_MIMES.has(mime) || !isAbsolute(path)) continue; // not a file (inline text, a failed write)
      const size = statSync(path, { throwIfNoEntry: false })?.size;
      if (size === undefined) notes.push(`[${mime}] ${path}: file not found, not attached`);
      else if (size > maxBytes) notes.push(`[${mime}] ${path}: not attached (${size} bytes; the image limit is ${maxBytes})`);
      else if (images.length >= MAX_IMAGES) notes.push(`[${mime}] ${path}: not attached (at most ${MAX_IMAGES} images per result)`);
      else images.push({ type: "image", data: readFileSync(path).toString("base64"), mimeType: mime });
    }
  }
  return images;
}

function joinText(...parts: string[]): string {
  let out = "";
  for (const p of parts) {
    if (!p) continue;
    out += out === "" || out.endsWith("\n") ? p : `\n${p}`;
  }
  return out;
}

function asRecord(result: ExecResult): Record<string, unknown> {
  return result as unknown as Record<string, unknown>;
}

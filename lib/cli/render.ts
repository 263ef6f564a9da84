// ExecResult -> what the user sees, and the exit status. Shared by `run`, `serve` and the supervisor
// commands so one cell looks the same whichever way it ran.
//
// Text mode: the cell's stdout on stdout and stderr on stderr, display entries (one text form each,
// markdown first, none for an image's `<...>` placeholder; files as `[image/png] PATH`), the
// trailing value on stdout, then on stderr any
// display errors, notice and, on failure, the error.
// An exception is shown short by default — the innermost frame of the cell's own code with its source
// line, then `ExceptionType: message` — because that is what a reader (or an agent's context window)
// needs to act; `--traceback` shows every frame. JSON mode: exactly one object, the ExecResult.
import { fileMimes, isTextMime, representations, storedAsFile } from "../session/mime.ts";
import { byteLimit, LINE_SNAP_BYTES } from "../core/limits.ts";
import { utf8Length, utf8Prefix } from "../core/utf8.ts";
import type { DisplayItem, ExecResult } from "../protocol/result.ts";
import type { RawText } from "../wire/output_frames.ts";
import { writeStream } from "./stdio.ts";

export type RenderOptions = {
  /** Show every traceback frame instead of the short form. */
  traceback?: boolean;
  /** Colour the error line (only ever on a terminal, never with NO_COLOR). */
  color?: boolean;
  /** The cell's stdout/stderr were already streamed live (see LiveEcho): print only what is left. */
  echoed?: { stdout: string; stderr: string };
  /** What the short traceback says shows the frames it leaves out (default: the CLI's flag; MCP names the result's field). */
  omittedFramesHint?: string;
};

export type Rendered = { stdout: string; stderr: string };

export function renderJson(result: ExecResult): string {
  return `${JSON.stringify(result, wellFormed)}\n`;
}

/**
 * Lone surrogates (Python text decoded with surrogateescape) become U+FFFD, as they do on a text
 * stream: a `\udcff` escape is valid JSON, but strict parsers (Rust's serde_json, Go's) reject it.
 */
function wellFormed(_key: string, value: unknown): unknown {
  return typeof value === "string" ? (value as string & { toWellFormed(): string }).toWellFormed() : value;
}

export function renderText(result: ExecResult, options: RenderOptions = {}): Rendered {
  let out = remainder(result.stdout, options.echoed?.stdout);
  let err = remainder(result.stderr, options.echoed?.stderr);
  const shownOut = options.echoed?.stdout ?? "";
  const shownErr = options.echoed?.stderr ?? "";
  let value = result.value;
  for (const item of result.display) {
    const shown = renderDisplay(item);
    if (shown.text) out = line(out, shown.text, shownOut);
    // A value whose repr says nothing (`<...Markdown object>`) is shown by its entry's text form.
    if (item.source === "value" && value !== null && shown.valueText && DEFAULT_REPR.test(value)) value = shown.valueText;
    if (item.error) err = line(err, `awrepl: display: ${item.error} (left out of the entry)`, shownErr);
  }
  if (value !== null) out = line(out, value, shownOut);
  const dropped = result.display_dropped ?? 0;
  if (dropped > 0) {
    err = line(err, `awrepl: ${dropped} display entr${dropped === 1 ? "y" : "ies"} dropped (over the cell's display limits: entries per cell, or --max-output bytes of their text)`, shownErr);
  }
  const notice = result.notice;
  // A restore is said once: by the notice when it tells this one (a recovery after a lost worker
  // names the snapshot it went back to, "its snapshot of <time> (<path>)"), else by its own line;
  // an empty snapshot that came back whole brings nothing to say.
  const said = result.restored && (result.restored.restored.length > 0 || result.restored.failed.length > 0);
  if (result.restored && said && !notice?.includes(`(${result.restored.source})`)) {
    const r = result.restored;
    const failed = r.failed.length ? `; could not restore ${r.failed.map((f) => f.name).join(", ")}` : "";
    err = line(err, `awrepl: restored ${r.restored.length} name(s) from ${r.source}${failed}`, shownErr);
  }
  if (notice) err = line(err, `awrepl: ${notice}`, shownErr);
  if (result.status !== "ok") {
    const text = formatFailure(result, options.traceback ?? false, options.omittedFramesHint);
    if (text) err = line(err, options.color ? colorLastLine(text) : text, shownErr);
  }
  return { stdout: out, stderr: err };
}

/** What is left of a stream after its live echo: the echo is a prefix of the kept text. */
function remainder(kept: string, echoed: string | undefined): string {
  if (!echoed) return kept;
  if (kept.startsWith(echoed)) return kept.slice(echoed.length);
  // The session kept a shorter head than was echoed (it ran with a smaller limit): print from where
  // the two part (the marker line and the tail) rather than repeat what was shown.
  let common = 0;
  while (common < echoed.length && kept.charCodeAt(common) === echoed.charCodeAt(common)) common++;
  // The echo may run past a head that was cut back to a line boundary: print from the marker line's
  // start (never from inside it), on a fresh line.
  const lineStart = kept.lastIndexOf("\n", common - 1) + 1;
  if (kept.startsWith("... [", lineStart)) common = lineStart;
  const rest = kept.slice(common);
  return common === lineStart && rest !== "" && !echoed.endsWith("\n") ? `\n${rest}` : rest;
}

/**
 * Appends `text` as its own line(s), starting a fresh line when the stream so far — `shown` (echoed
 * live) followed by `acc` — ends mid-line.
 */
function line(acc: string, text: string, shown = ""): string {
  const before = acc === "" ? shown : acc;
  const sep = before === "" || before.endsWith("\n") ? "" : "\n";
  return `${acc}${sep}${text}${text.endsWith("\n") ? "" : "\n"}`;
}

/** A repr that names only the type (`<pkg.Markdown object>`, `<Foo object at 0x7f…>`): it tells a reader nothing. */
const DEFAULT_REPR = /^<[\w.]+ object(?: at 0x[0-9a-fA-F]+)?>$/;

/** A one-line `<...>` repr: what stands in for an image in an entry's text/plain. */
const PLACEHOLDER = /^<[^<>\n]*>$/;

/**
 * One entry in text mode: its files as `[mime] PATH` lines and one text form — markdown, else
 * text/plain (unless it is a bare default repr and another text form exists), else the first other
 * text. The trailing value's entry prints only its files: its text is the value (`valueText` is the
 * text form that stands in for a value whose repr says nothing).
 */
function renderDisplay(item: DisplayItem): { text: string; valueText: string | null } {
  const reps = representations(item);
  const files = new Set(fileMimes(item));
  const inline = reps.filter(([mime]) => !files.has(mime) && isTextMime(mime) && !storedAsFile(mime));
  const pick = (mime: string) => inline.find(([m]) => m === mime)?.[1];
  const plain = pick("text/plain");
  const other = pick("text/markdown") ?? inline.find(([m]) => m !== "text/plain")?.[1];
  const text = pick("text/markdown") ?? (plain !== undefined && !(DEFAULT_REPR.test(plain) && other !== undefined) ? plain : other);
  const parts: string[] = [];
  // An image's placeholder text (`<Figure size 640x480 with 1 Axes>`) says nothing its file does not.
  const placeholder = text === plain && plain !== undefined && PLACEHOLDER.test(plain) && reps.some(([mime]) => files.has(mime) || !isTextMime(mime));
  if (item.source !== "value" && text !== undefined && !placeholder) parts.push(text);
  // Files (and what was said in place of a file that could not be written), and inline binary data.
  for (const [mime, data] of reps) if (files.has(mime) || !isTextMime(mime) || storedAsFile(mime)) parts.push(`[${mime}] ${data}`);
  return { text: parts.join("\n"), valueText: other ?? null };
}

/** The error text for a failed cell: short or full traceback, ending in `ExceptionType: message`. */
export function formatFailure(result: ExecResult, full: boolean, omittedFramesHint?: string): string {
  const exception = result.exception ?? statusWord(result);
  const tb = result.traceback.replace(/\n+$/, "");
  if (!tb) return exception;
  let text = full ? tb : shortTraceback(tb, omittedFramesHint);
  if (result.exception && !endsWithException(text, result.exception)) text = `${text}\n${result.exception}`;
  return text;
}

/**
 * True when the traceback text already ends with the exception: its `Type: message` line after the
 * last frame (a SyntaxError's may word it shorter; a huge message is cut there with its own marker).
 */
function endsWithException(text: string, exception: string): boolean {
  const exc = exception.replace(/\n+$/, "");
  if (text.endsWith(exc)) return true;
  const type = exc.split(":")[0] as string;
  const lines = text.split("\n");
  const at = lines.findLastIndex((l) => l === type || l.startsWith(`${type}:`));
  return at >= 0 && !lines.slice(at + 1).some((l) => l.startsWith("  File "));
}

function statusWord(result: ExecResult): string {
  switch (result.status) {
    case "timeout":
      return "TimeoutError: the cell exceeded its timeout";
    case "interrupted":
      return "KeyboardInterrupt";
    case "died":
      return "WorkerDied: the Python process exited";
    default:
      return "Error";
  }
}

type Frame = { lines: string[]; inCell: boolean };
const FRAME = /^ {2}File "([^"]*)", line \d+/;

/**
 * The short form of a Python traceback: the innermost frame in the cell's own code (`<cell-N>`) with
 * its source and caret lines, a one-line note when frames were left out, and the exception text.
 * Chained exceptions keep only the last one (the one that ended the cell). Text that does not look
 * like a traceback is returned whole.
 */
export function shortTraceback(traceback: string, omittedFramesHint = "--traceback shows them"): string {
  const tb = traceback.replace(/\n+$/, "");
  const all = tb.split("\n");
  const start = all.findLastIndex((l) => l.startsWith("Traceback (most recent call last):"));
  const lines = start >= 0 ? all.slice(start + 1) : all;
  const frames: Frame[] = [];
  let i = 0;
  for (; i < lines.length; i++) {
    const l = lines[i] as string;
    const m = FRAME.exec(l);
    if (m) frames.push({ lines: [l], inCell: (m[1] ?? "").startsWith("<cell-") });
    else if (frames.length && l.startsWith("    ")) frames[frames.length - 1]?.lines.push(l);
    else if (l.startsWith("  ") && frames.length) frames[frames.length - 1]?.lines.push(l); // "[Previous line repeated N more times]"
    else break;
  }
  const exception = lines.slice(i).join("\n");
  if (frames.length === 0) return start >= 0 ? exception : tb;
  const cellFrame = frames.findLast((f) => f.inCell) ?? (frames[frames.length - 1] as Frame);
  const kept = [cellFrame];
  const innermost = frames[frames.length - 1] as Frame;
  if (innermost !== cellFrame) kept.push(innermost);
  const omitted = frames.length - kept.length;
  const note = omitted > 0 ? [`  [${omitted} more frame${omitted === 1 ? "" : "s"}: ${omittedFramesHint}]`] : [];
  const body = kept.length === 2 ? [...(kept[0] as Frame).lines, ...note, ...innermost.lines] : [...note, ...cellFrame.lines];
  return [...body, exception].join("\n");
}

function colorLastLine(text: string): string {
  const cut = text.lastIndexOf("\n", text.length - 2);
  return `${text.slice(0, cut + 1)}\x1b[1;31m${text.slice(cut + 1).replace(/\n$/, "")}\x1b[0m`;
}

/** Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org) or TERM=dumb. */
export function useColor(isTTY: boolean | undefined, env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(isTTY) && !env.NO_COLOR && env.TERM !== "dumb";
}

/**
 * Streams a cell's output as it arrives, but only as much as the session keeps as the head of its
 * truncated result (the first half of the limit): the rest — marker line and tail — is printed from
 * the result at the end, so the terminal shows exactly the text the result holds and an endless
 * printer cannot flood the screen or an agent's context.
 */
export class LiveEcho {
  private headLeft: number;
  readonly echoed = { stdout: "", stderr: "" };
  /** A partial last line not shown yet (see output()): the result prints it, or the marker in its place. */
  private readonly held = { stdout: "", stderr: "" };

  constructor(
    limit: number,
    private readonly write: (stream: "stdout" | "stderr", text: string) => void,
  ) {
    this.headLeft = LiveEcho.headBytes(limit);
  }

  /** How much of a cell's output the echo shows for output limit `limit`: the result's head (Infinity: no limit). */
  static headBytes(limit: number): number {
    return Math.ceil(byteLimit(Math.max(0, limit)) / 2);
  }

  /** Output not decoded yet: decoded only while the head has room. */
  outputRaw(stream: "stdout" | "stderr", raw: RawText): void {
    if (this.headLeft > 0) this.output(stream, raw.text());
  }

  output(stream: "stdout" | "stderr", text: string): void {
    if (this.headLeft <= 0 || text === "") return;
    const bytes = utf8Length(text);
    let piece = text;
    if (bytes <= this.headLeft) this.headLeft -= bytes;
    else {
      piece = utf8Prefix(text, this.headLeft)[0];
      this.headLeft = 0;
    }
    let out = this.held[stream] + piece;
    this.held[stream] = "";
    // Near the head's end a partial last line waits: the result may cut its head back to that line's
    // start (LINE_SNAP_BYTES), and what the echo showed must be a prefix of what the result keeps.
    if (this.headLeft < LINE_SNAP_BYTES && !out.endsWith("\n")) {
      const partial = out.slice(out.lastIndexOf("\n") + 1);
      if (utf8Length(partial) <= LINE_SNAP_BYTES) {
        this.held[stream] = partial;
        out = out.slice(0, out.length - partial.length);
      }
    }
    if (out === "") return;
    this.echoed[stream] += out;
    this.write(stream, out);
  }
}

export async function writeRendered(r: Rendered): Promise<void> {
  await Promise.all([writeStream("stdout", r.stdout), writeStream("stderr", r.stderr)]);
}

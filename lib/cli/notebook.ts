// A session's history as a Jupyter notebook (nbformat 4.5) or as a script of `# %%` cells, and the
// code cells of a notebook read back for `run -f FILE.ipynb`. No Jupyter package is needed: the
// format is written and read here, and the tests check it with nbformat's own validator and nbclient.
// What each output becomes: stdout and stderr are `stream` outputs, each display entry a
// `display_data` (an image's file embedded, base64), the trailing value an `execute_result` (with the
// value's richer forms), an exception an `error` with its traceback's lines.
import { AwreplError, usageError } from "../core/errors.ts";
import type { HistoryCell, HistoryValue } from "../protocol/supervisor.ts";
import type { DisplayItem, ExecResult } from "../protocol/result.ts";

type MimeBundle = Record<string, unknown>;
type Output =
  | { output_type: "stream"; name: "stdout" | "stderr"; text: string[] }
  | { output_type: "display_data"; data: MimeBundle; metadata: Record<string, unknown> }
  | { output_type: "execute_result"; execution_count: number; data: MimeBundle; metadata: Record<string, unknown> }
  | { output_type: "error"; ename: string; evalue: string; traceback: string[] };

/** Reads a display entry's file (an image's path); null when it is gone (display files have caps). */
export type ReadDisplayFile = (path: string) => Uint8Array | null;

/** The history of a session as an nbformat 4.5 notebook (a JSON-ready object). */
export function historyNotebook(history: HistoryValue, readFile: ReadDisplayFile, now = new Date()): Record<string, unknown> {
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {
      kernelspec: { name: "awrepl", display_name: `awrepl (${history.session})`, language: "python" },
      language_info: { name: "python", file_extension: ".py", mimetype: "text/x-python" },
      awrepl: { session: history.session, exported_at: now.toISOString(), cells_total: history.total, cells_dropped: history.dropped },
    },
    cells: history.cells.map((cell) => ({
      cell_type: "code",
      id: `awrepl-${cell.n}`,
      execution_count: cell.n,
      metadata: { awrepl: { client: cell.client, started_at: cell.started_at, duration_ms: cell.duration_ms, status: cell.status } },
      source: lines(cell.code),
      outputs: cellOutputs(cell, readFile),
    })),
  };
}

/** The history as a script: each cell headed by `# %%` with its number, who ran it and when. */
export function historyScript(history: HistoryValue, now = new Date()): string {
  const head = `# awrepl session ${history.session}, exported ${now.toISOString()}${history.dropped ? ` (its ${history.dropped} oldest cells were dropped by the history's bounds)` : ""}\n`;
  const cells = history.cells.map((cell) => {
    const status = cell.status === "ok" ? "" : `, ${cell.status}`;
    const code = cell.code.endsWith("\n") ? cell.code : `${cell.code}\n`;
    return `# %% [${cell.n}] ${cell.client}, ${cell.started_at}${status}\n${code}`;
  });
  return [head, ...cells].join("\n");
}

function cellOutputs(cell: HistoryCell, readFile: ReadDisplayFile): Output[] {
  const r = cell.result;
  const outputs: Output[] = [];
  if (r.stdout) outputs.push({ output_type: "stream", name: "stdout", text: lines(r.stdout) });
  if (r.stderr) outputs.push({ output_type: "stream", name: "stderr", text: lines(r.stderr) });
  let valueForms: MimeBundle | null = null;
  for (const item of r.display ?? []) {
    const data = mimeBundle(item, readFile);
    if (item.source === "value") valueForms = data;
    else if (Object.keys(data).length > 0) outputs.push({ output_type: "display_data", data, metadata: {} });
  }
  if (r.value !== null) {
    const data: MimeBundle = { ...valueForms, "text/plain": lines(r.value) };
    outputs.push({ output_type: "execute_result", execution_count: cell.n, data, metadata: {} });
  }
  const failure = failureOutput(r);
  if (failure) outputs.push(failure);
  return outputs;
}

/** A display entry's MIME data as Jupyter has it: files read (binary base64, text as text), JSON as JSON. */
function mimeBundle(item: DisplayItem, readFile: ReadDisplayFile): MimeBundle {
  const data: MimeBundle = {};
  for (const [mime, value] of Object.entries(item)) {
    if (!mime.includes("/") || typeof value !== "string") continue;
    if (item.metadata?.[mime]) {
      // A file: what the entry holds is its path.
      const bytes = readFile(value);
      if (bytes === null) {
        data["text/plain"] ??= [`[${mime} not kept: its file ${value} is gone]`];
        continue;
      }
      data[mime] = isTextMime(mime) ? Buffer.from(bytes).toString("utf8") : Buffer.from(bytes).toString("base64");
    } else if (mime === "application/json" || mime.endsWith("+json")) {
      try {
        data[mime] = JSON.parse(value);
      } catch {
        data["text/plain"] ??= [value];
      }
    } else {
      data[mime] = lines(value);
    }
  }
  return data;
}

function isTextMime(mime: string): boolean {
  return mime.startsWith("text/") || mime === "image/svg+xml" || mime.endsWith("+xml");
}

/** An `error` output for a cell that did not end ok: `Type: message` split as Jupyter does. */
function failureOutput(r: ExecResult): Output | null {
  if (r.status === "ok" || r.exception === null) return null;
  const colon = r.exception.indexOf(": ");
  const ename = colon > 0 ? r.exception.slice(0, colon) : r.exception;
  const evalue = colon > 0 ? r.exception.slice(colon + 2) : "";
  const traceback = r.traceback ? r.traceback.replace(/\n$/, "").split("\n") : [r.exception];
  return { output_type: "error", ename, evalue, traceback };
}

/** Text as nbformat's multi-line strings: lines, each keeping its newline. */
function lines(text: string): string[] {
  return text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
}

/** One code cell of a notebook read for `run -f`: its index among all the notebook's cells (1-based) and its code. */
export type NotebookCell = { index: number; code: string };

/** The code cells of an nbformat 4 notebook, in order (markdown and raw cells are skipped). `where` names the file in errors. */
export function notebookCodeCells(text: string, where: string): NotebookCell[] {
  let nb: unknown;
  try {
    nb = JSON.parse(text);
  } catch (err) {
    throw usageError(`${where} is not a notebook: not JSON (${(err as Error).message})`);
  }
  const doc = nb as { nbformat?: unknown; cells?: unknown };
  if (typeof nb !== "object" || nb === null || Array.isArray(nb)) throw usageError(`${where} is not a notebook: not a JSON object`);
  if (doc.nbformat !== 4) throw usageError(`${where} is nbformat ${JSON.stringify(doc.nbformat ?? null)}: awrepl reads nbformat 4 notebooks (jupyter nbconvert --to notebook converts older ones)`);
  if (!Array.isArray(doc.cells)) throw usageError(`${where} is not a notebook: it has no cells list`);
  const cells: NotebookCell[] = [];
  doc.cells.forEach((cell: unknown, i: number) => {
    const c = cell as { cell_type?: unknown; source?: unknown };
    if (typeof cell !== "object" || cell === null) throw usageError(`${where}: cell ${i + 1} is not an object`);
    if (c.cell_type !== "code") return;
    const source = typeof c.source === "string" ? c.source : Array.isArray(c.source) && c.source.every((s) => typeof s === "string") ? c.source.join("") : null;
    if (source === null) throw usageError(`${where}: code cell ${i + 1}'s source is neither a string nor a list of strings`);
    cells.push({ index: i + 1, code: source });
  });
  return cells;
}

/** What `export FILE` writes, by the file's extension. */
export function exportFormat(path: string): "ipynb" | "py" {
  if (path.endsWith(".ipynb")) return "ipynb";
  if (path.endsWith(".py")) return "py";
  throw new AwreplError("usage", `export writes FILE.ipynb (a notebook) or FILE.py (a script), not ${JSON.stringify(path)}`);
}

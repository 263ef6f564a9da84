// The notebook and script formats on their own (the e2e test, tests/e2e/notebook.test.ts, checks the
// notebook with nbformat's validator and runs it with nbclient).
import { describe, expect, test } from "bun:test";
import type { ExecResult } from "../protocol/result.ts";
import type { HistoryValue } from "../protocol/supervisor.ts";
import { exportFormat, historyNotebook, historyScript, notebookCodeCells } from "./notebook.ts";

function result(over: Partial<ExecResult>): ExecResult {
  return { stdout: "", stderr: "", value: null, exception: null, traceback: "", duration_ms: 1, truncated: false, truncated_bytes: 0, status: "ok", session: "s", display: [], ...over };
}

const history = (results: ExecResult[]): HistoryValue => ({
  session: "s",
  total: results.length + 1,
  dropped: 1,
  cells: results.map((result, i) => ({ n: i + 2, code: `c${i}\nmore`, client: "mcp", started_at: "2026-01-01T00:00:00.000Z", duration_ms: 1, status: result.status, result })),
});

describe("notebook", () => {
  test("display files are embedded or said to be gone; JSON data is JSON; a value's richer forms join its execute_result", () => {
    const files: Record<string, Uint8Array> = { "/d/a.png": new Uint8Array([137, 80, 78, 71]), "/d/b.svg": new TextEncoder().encode("<svg/>") };
    const nb = historyNotebook(
      history([
        result({
          display: [
            { "image/png": "/d/a.png", metadata: { "image/png": { bytes: 4 } } },
            { "image/svg+xml": "/d/b.svg", metadata: { "image/svg+xml": { bytes: 6 } } },
            { "image/png": "/d/gone.png", metadata: { "image/png": { bytes: 9 } } },
            { "application/json": '{"a": [1]}', "text/plain": "{'a': [1]}" },
            { "text/html": "<b>v</b>", source: "value" },
          ],
          value: "V()",
        }),
      ]),
      (p) => files[p] ?? null,
    ) as { cells: { outputs: ({ output_type: string; data?: Record<string, unknown> } & Record<string, unknown>)[] }[]; metadata: Record<string, unknown> };
    const [png, svg, gone, json, value] = nb.cells[0]!.outputs;
    expect(png!.data).toEqual({ "image/png": Buffer.from([137, 80, 78, 71]).toString("base64") });
    expect(svg!.data).toEqual({ "image/svg+xml": "<svg/>" });
    expect(gone!.data).toEqual({ "text/plain": ["[image/png not kept: its file /d/gone.png is gone]"] });
    expect(json!.data).toEqual({ "application/json": { a: [1] }, "text/plain": ["{'a': [1]}"] });
    expect(value).toEqual({ output_type: "execute_result", execution_count: 2, data: { "text/html": ["<b>v</b>"], "text/plain": ["V()"] }, metadata: {} });
    expect(nb.metadata.awrepl).toMatchObject({ session: "s", cells_total: 2, cells_dropped: 1 });
  });

  test("an error output splits the exception as Jupyter does; a timeout without a traceback still says it", () => {
    const nb = historyNotebook(
      history([
        result({ status: "error", exception: "KeyError: 'k'", traceback: "Traceback (most recent call last):\nKeyError: 'k'\n" }),
        result({ status: "timeout", exception: "TimeoutError" }),
      ]),
      () => null,
    ) as { cells: { outputs: unknown[] }[] };
    expect(nb.cells[0]!.outputs).toEqual([{ output_type: "error", ename: "KeyError", evalue: "'k'", traceback: ["Traceback (most recent call last):", "KeyError: 'k'"] }]);
    expect(nb.cells[1]!.outputs).toEqual([{ output_type: "error", ename: "TimeoutError", evalue: "", traceback: ["TimeoutError"] }]);
  });

  test("a script heads each cell with its number, client and start", () => {
    const py = historyScript(history([result({}), result({ status: "error" })]), new Date("2026-01-02T00:00:00Z"));
    expect(py).toBe(
      "# awrepl session s, exported 2026-01-02T00:00:00.000Z (its 1 oldest cells were dropped by the history's bounds)\n\n" +
        "# %% [2] mcp, 2026-01-01T00:00:00.000Z\nc0\nmore\n\n# %% [3] mcp, 2026-01-01T00:00:00.000Z, error\nc1\nmore\n",
    );
  });

  test("reads the code cells of an nbformat 4 notebook; anything else is refused naming the file", () => {
    const nb = { nbformat: 4, cells: [{ cell_type: "markdown", source: "# t" }, { cell_type: "code", source: ["a = 1\n", "a"] }, { cell_type: "code", source: "!ls" }] };
    expect(notebookCodeCells(JSON.stringify(nb), "n.ipynb")).toEqual([{ index: 2, code: "a = 1\na" }, { index: 3, code: "!ls" }]);
    expect(() => notebookCodeCells("[]", "n.ipynb")).toThrow(/n\.ipynb is not a notebook/);
    expect(() => notebookCodeCells('{"nbformat": 3}', "n.ipynb")).toThrow(/nbformat 3/);
    expect(() => notebookCodeCells('{"nbformat": 4, "cells": [{"cell_type": "code", "source": 5}]}', "n.ipynb")).toThrow(/code cell 1/);
    expect(exportFormat("a.ipynb")).toBe("ipynb");
    expect(exportFormat("a.py")).toBe("py");
    expect(() => exportFormat("a.txt")).toThrow(/"a.txt"/);
  });
});

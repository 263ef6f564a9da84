// `awrepl -s NAME export FILE.ipynb|FILE.py` and `run -f FILE.ipynb` end to end: a session used
// through the CLI, MCP (the SDK's client) and the TypeScript library is exported; nbformat's own
// validator accepts the notebook and nbclient executes it (with the stock python3 ipykernel); the
// outputs are typed as Jupyter types them (stream, display_data with the image embedded,
// execute_result, error). A notebook's code cells then run in a session, stopping at the first error
// unless --keep-going.
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { attach } from "../../lib/client/attach.ts";
import { awreplBinary, pythonHas, run, testEnv, withHome } from "../harness/mod.ts";
import { exec, run as mcpRun, withMcp } from "./mcp_client.ts";

/** Debian's python3, where python3-nbformat, python3-nbclient and python3-ipykernel are installed. */
const JUPYTER_PYTHON = "/usr/bin/python3";
const HINT = "apt-get install python3-nbformat python3-nbclient python3-ipykernel";

/** A 1x1 PNG, shown through `_repr_png_`: a display entry whose payload the session writes to a file. */
const IMAGE_CELL = `import base64
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
class Dot:
    def _repr_png_(self):
        return PNG
display(Dot())`;

type Nb = { nbformat: number; nbformat_minor: number; metadata: Record<string, any>; cells: { execution_count: number; source: string[]; metadata: any; outputs: any[] }[] };

function python(script: string, args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(JUPYTER_PYTHON, ["-c", script, ...args], { encoding: "utf8", timeout: 120_000, env: { ...process.env, PYDEVD_DISABLE_FILE_VALIDATION: "1" } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("notebook export", () => {
  test("a session used through the CLI, MCP and the library exports a notebook nbformat validates and nbclient executes", () =>
    withHome(async (h) => {
      for (const m of ["nbformat", "nbclient", "ipykernel"]) if (!pythonHas(m, JUPYTER_PYTHON)) throw new Error(`${JUPYTER_PYTHON} lacks ${m}: ${HINT}`);
      expect((await run(["-s", "nb", "run", "data = [3, 1, 2]"], { home: h })).code).toBe(0);
      await withMcp(h, ["--session", "nb"], async (c) => {
        expect(exec(await mcpRun(c.client, "print('sorted', sorted(data))\nmax(data)")).value).toBe("3");
      });
      const lib = await attach("nb", { home: h, clientEnv: { ...testEnv(h), AWREPL_BIN: await awreplBinary() } });
      try {
        expect((await lib.execute(IMAGE_CELL)).display).toHaveLength(1);
      } finally {
        await lib.close();
      }
      expect((await run(["-s", "nb", "run", "import sys; print('warn', file=sys.stderr); raise ValueError('bad value')"], { home: h })).code).toBe(1);
      expect((await run(["-s", "nb", "run", "!echo from-a-shell-line"], { home: h })).stdout).toContain("from-a-shell-line");

      const path = join(h, "out.ipynb");
      const exported = await run(["-s", "nb", "export", path, "--json"], { home: h });
      expect(exported.stderr).toBe("");
      expect(JSON.parse(exported.stdout)).toEqual({ session: "nb", path, cells: 5 });
      const nb = JSON.parse(readFileSync(path, "utf8")) as Nb;
      expect([nb.nbformat, nb.nbformat_minor]).toEqual([4, 5]);
      expect(nb.metadata.kernelspec).toEqual({ name: "awrepl", display_name: "awrepl (nb)", language: "python" });
      expect(nb.metadata.language_info.name).toBe("python");
      expect(nb.cells.map((c) => [c.execution_count, c.metadata.awrepl.client])).toEqual([
        [1, "cli"],
        [2, "mcp"],
        [3, "library"],
        [4, "cli"],
        [5, "cli"],
      ]);
      const [first, second, third, fourth] = nb.cells;
      expect(first!.outputs).toEqual([]);
      expect(second!.outputs).toEqual([
        { output_type: "stream", name: "stdout", text: ["sorted [1, 2, 3]\n"] },
        { output_type: "execute_result", execution_count: 2, data: { "text/plain": ["3"] }, metadata: {} },
      ]);
      const image = third!.outputs[0];
      expect(image.output_type).toBe("display_data");
      expect(Buffer.from(image.data["image/png"], "base64").subarray(1, 4).toString()).toBe("PNG");
      expect(fourth!.outputs.map((o: { output_type: string }) => o.output_type)).toEqual(["stream", "error"]);
      expect(fourth!.outputs[1]).toMatchObject({ ename: "ValueError", evalue: "bad value" });
      expect(fourth!.outputs[1].traceback.at(-1)).toBe("ValueError: bad value");

      // nbformat's validator, then nbclient runs it from the top in a stock python3 kernel.
      const check = python(
        `import sys, nbformat, nbclient
nb = nbformat.read(sys.argv[1], as_version=4)
nbformat.validate(nb)
nbclient.NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=60).execute()
nbformat.validate(nb)
print([[o.output_type for o in c.outputs] for c in nb.cells])`,
        [path],
      );
      expect(check.stderr).not.toContain("Traceback");
      expect(check.code).toBe(0);
      expect(check.stdout.trim()).toBe("[[], ['stream', 'execute_result'], ['display_data'], ['stream', 'error'], ['stream']]");

      const script = join(h, "out.py");
      expect((await run(["-s", "nb", "export", script], { home: h })).stdout).toBe(`exported 5 cell(s) of session nb to ${script}\n`);
      const py = readFileSync(script, "utf8");
      expect(py).toMatch(/^# awrepl session nb, exported \S+Z\n/);
      expect(py).toMatch(/\n# %% \[2\] mcp, \S+Z\nprint\('sorted', sorted\(data\)\)\nmax\(data\)\n/);
      expect(py).toMatch(/\n# %% \[4\] cli, \S+Z, error\n/);
      const bad = await run(["-s", "nb", "export", join(h, "out.txt")], { home: h });
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain("out.txt");
    }), 180_000);
});

describe("run -f FILE.ipynb", () => {
  const notebook = (cells: { cell_type: string; source: string | string[] }[]) =>
    JSON.stringify({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: cells.map((c, i) => ({ id: `c${i}`, metadata: {}, ...c, ...(c.cell_type === "code" ? { outputs: [], execution_count: null } : {}) })),
    });

  test("runs the code cells in order in the session, skipping markdown, stopping at the first error unless --keep-going", () =>
    withHome(async (h) => {
      const path = join(h, "work.ipynb");
      writeFileSync(
        path,
        notebook([
          { cell_type: "markdown", source: "# a title, never run" },
          { cell_type: "code", source: ["total = 0\n", "for i in range(4):\n", "    total += i\n", "print('total', total)"] },
          { cell_type: "raw", source: "raise SystemExit('raw cells are not run')" },
          { cell_type: "code", source: "!echo shell says hi" },
          { cell_type: "code", source: "1/0" },
          { cell_type: "code", source: "after = 'ran'\nafter" },
        ]),
      );
      const stopped = await run(["-s", "nbrun", "run", "-f", path], { home: h });
      expect(stopped.code).toBe(1);
      expect(stopped.stdout).toBe("total 6\nshell says hi\n");
      expect(stopped.stderr).toContain("ZeroDivisionError: division by zero");
      expect(stopped.stderr).toContain("awrepl: stopped at cell 5 (error); 1 code cell(s) not run (--keep-going runs them)");
      expect((await run(["-s", "nbrun", "run", "after"], { home: h })).stderr).toContain("NameError");

      const going = await run(["-s", "nbrun", "run", "-f", path, "--keep-going", "--json"], { home: h });
      expect(going.code).toBe(1); // the first failing cell's status
      const report = JSON.parse(going.stdout) as { code_cells: number; cells: { cell: number; result: { status: string; value: string | null } }[] };
      expect(report.code_cells).toBe(4);
      expect(report.cells.map((c) => [c.cell, c.result.status])).toEqual([
        [2, "ok"],
        [4, "ok"],
        [5, "error"],
        [6, "ok"],
      ]);
      expect(report.cells[3]!.result.value).toBe("'ran'");
      // The cells are in the session's history, as any CLI cell.
      const hist = JSON.parse((await run(["-s", "nbrun", "history", "--json", "-n", "1"], { home: h })).stdout) as { cells: { code: string; client: string }[] };
      expect(hist.cells[0]).toMatchObject({ code: "after = 'ran'\nafter", client: "cli" });

      // Bad notebooks are named, and nothing runs.
      writeFileSync(join(h, "old.ipynb"), JSON.stringify({ nbformat: 3, worksheets: [] }));
      const old = await run(["-s", "nbrun", "run", "-f", join(h, "old.ipynb")], { home: h });
      expect(old.code).toBe(2);
      expect(old.stderr).toContain("nbformat 3");
      writeFileSync(join(h, "broken.ipynb"), "{ not json");
      const broken = await run(["-s", "nbrun", "run", "-f", join(h, "broken.ipynb")], { home: h });
      expect(broken.code).toBe(2);
      expect(broken.stderr).toContain("broken.ipynb");
      const missing = await run(["run", "-f", join(h, "missing.ipynb")], { home: h });
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain("missing.ipynb");
      const stray = await run(["run", "--keep-going", "1"], { home: h });
      expect(stray.code).toBe(2);
      expect(stray.stderr).toContain("--keep-going");
    }), 120_000);
});

// The agent's loop through the compiled binary: notebook habits in a named session, the hint a
// missing module gets, `vars` and `inspect` sized for a context window, durations to 0.1 ms, and a
// truncation marker that starts on a line boundary.
import { describe, expect, test } from "bun:test";
import { realpathSync } from "node:fs";
import type { ExecResult } from "../../lib/protocol/result.ts";
import { PYTHON, pythonHas, run, withHome } from "../harness/mod.ts";

const withPandas = pythonHas("pandas") ? test : test.skip;

async function json(args: string[], home: string): Promise<ExecResult> {
  const r = await run([...args.slice(0, -1), "--json", args.at(-1) as string], { home, timeoutMs: 60_000 });
  return JSON.parse(r.stdout) as ExecResult;
}

describe("notebook habits and a missing module, from the shell", () => {
  test("!cmd, %cd and %env in a named session; the state they change persists to the next call", () =>
    withHome(async (home) => {
      const shell = await run(["-s", "h", "run", "%env GREETING=hi there\n!echo $GREETING from sh"], { home });
      expect(shell.code).toBe(0);
      expect(shell.stdout).toBe("env: GREETING=hi there\nhi there from sh\n");
      const cd = await run(["-s", "h", "run", "%cd /tmp\nimport os\nos.getcwd()"], { home });
      expect(cd.stdout).toBe("/tmp\n'/tmp'\n");
      const bad = await run(["-s", "h", "run", "%matplotlib inline"], { home });
      expect(bad.code).not.toBe(0);
      expect(bad.stderr).toContain("UsageError: line 1: %matplotlib is not supported here; a cell understands !cmd, %pip, %cd, %env, %time");
      await run(["daemon", "stop"], { home });
    }));

  test("a missing module's hint names the session's interpreter; the short traceback keeps it", () =>
    withHome(async (home) => {
      const r = await run(["run", "import no_such_module_xyz"], { home });
      expect(r.code).not.toBe(0);
      const hint = r.stderr.split("\n").find((l) => l.startsWith("[awrepl] No module named"));
      expect(hint).toContain(realpathSync(PYTHON));
      expect(hint).toContain("`%pip install no_such_module_xyz`");
      expect(r.stderr.trimEnd().split("\n").at(-1)).toBe(hint); // after the exception line, once
      expect(r.stderr.match(/ModuleNotFoundError: No module named/g)).toHaveLength(1);
    }));
});

describe("answers sized for a context window", () => {
  test("vars: one line per variable that says what it is", () =>
    withHome(async (home) => {
      await run(["-s", "v", "run", "xs = [1, 2, 3]\nd = {'a': 1}\nn = 5\ndef f(a, b=2):\n    pass"], { home });
      const vars = await run(["-s", "v", "vars"], { home });
      expect(vars.stdout).toBe("d   dict[str, int] len 1: {'a': 1}\nf   function f(a, b=2)\nn   int: 5\nxs  list[int] len 3: [1, 2, 3]\n");
      await run(["daemon", "stop"], { home });
    }));

  withPandas("inspect of a DataFrame: shape, columns and dtypes first, one short docstring, under 1.5 KB", () =>
    withHome(async (home) => {
      await run(["-s", "p", "run", "import pandas as pd\ndf = pd.DataFrame({'a': [0.5] * 7, 'b': list('abcdefg')})"], { home, timeoutMs: 60_000 });
      const text = await run(["-s", "p", "inspect", "df"], { home });
      expect(text.stdout).toStartWith("name: df\ntype: pandas.core.frame.DataFrame\nshape: (7, 2)\n");
      const r = await run(["-s", "p", "inspect", "df", "--json"], { home });
      expect(r.code).toBe(0);
      expect(r.stdout.length).toBeLessThan(1500);
      const info = JSON.parse(r.stdout) as Record<string, unknown>;
      expect(Object.keys(info).slice(0, 5)).toEqual(["name", "type", "shape", "columns", "dtypes"]);
      expect(info.dtypes).toEqual({ a: "float64", b: "object" });
      expect(info.doc).toBeUndefined();
      const vars = await run(["-s", "p", "vars"], { home });
      expect(vars.stdout).toContain("df  DataFrame 7×2 [a: float64, b: object]\n");
      await run(["daemon", "stop"], { home });
    }), 60_000);

  test("inspect --full: the whole docstring and every attribute name, which the default counts in `more`", () =>
    withHome(async (home) => {
      await run(["-s", "i", "run", 'class Box:\n    """One line.\n\n    The second paragraph."""\n    def _hidden(self): pass\n    def shown(self): pass\nb = Box()'], { home });
      const short = JSON.parse((await run(["-s", "i", "inspect", "b", "--json"], { home })).stdout) as Record<string, unknown>;
      expect(short.docstring).toBe("One line.");
      expect(short.dir).toEqual(["shown"]);
      expect(short.more).toEqual({ docstring: expect.any(Number), dir: expect.any(Number) });
      const full = await run(["-s", "i", "inspect", "b", "--full", "--json"], { home });
      expect(full.code).toBe(0);
      const info = JSON.parse(full.stdout) as Record<string, unknown>;
      expect(info.docstring).toMatch(/^One line\.\n\n\s*The second paragraph\.$/);
      expect(info.dir).toContain("_hidden");
      expect(info.dir).toContain("__init__");
      expect(info.more).toBeUndefined();
      const text = await run(["-s", "i", "inspect", "--full", "b"], { home });
      expect(text.stdout).toMatch(/^docstring: One line\.\n\n\s*The second paragraph\.$/m);
      await run(["daemon", "stop"], { home });
    }));

  test("duration_ms is rounded to 0.1 ms", () =>
    withHome(async (home) => {
      const r = await json(["run", "sum(range(1000))"], home);
      expect(r.duration_ms).toBeGreaterThan(0);
      expect(Math.round(r.duration_ms * 10) / 10).toBe(r.duration_ms);
    }));

  test("the truncation marker starts a line and no half line is kept around it, in text and in --json", () =>
    withHome(async (home) => {
      const cell = "for i in range(2000):\n    print('row', i, 'x' * (i % 23), 'end')";
      const text = await run(["run", "--max-output", "2000", cell], { home });
      const check = (stdout: string) => {
        const m = /^([^]*)\n?\.\.\. \[(\d+) bytes truncated\] \.\.\.\n([^]*)$/.exec(stdout);
        expect(m).not.toBeNull();
        const [, head, , tail] = m as unknown as [string, string, string, string];
        expect(head.endsWith("\n")).toBe(true); // the head was cut back to a line's end, not given a line break
        for (const line of [...head.trimEnd().split("\n"), ...tail.trimEnd().split("\n")]) expect(line).toMatch(/^row \d+ x* end$/);
        expect(stdout).toContain("\n... [");
      };
      check(text.stdout);
      const r = await json(["run", "--max-output", "2000", cell], home);
      check(r.stdout);
      expect(r.truncated).toBe(true);
    }));
});

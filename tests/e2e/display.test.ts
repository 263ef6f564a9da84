// Rich output end to end, through the compiled binary: plots made from the shell land in files whose
// paths are printed (text) or listed with their MIME type and size (--json); the session's folder is
// bounded and removed by `close`; --display-dir puts the files where the caller wants them; display
// entries share the output limit. Library tests need Debian's python3-matplotlib / python3-pandas /
// python3-ipython in the interpreter under test (.ci/run installs them); without one they are skipped
// and say why.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { DisplayItem, ExecResult } from "../../lib/protocol/result.ts";
import { PYTHON, pythonHas, run, withHome } from "../harness/mod.ts";

function needs(module: string) {
  const has = pythonHas(module);
  return (name: string, fn: () => Promise<void>, timeoutMs = 60_000) => test.skipIf(!has)(has ? name : `${name} [skipped: ${PYTHON} cannot import ${module}]`, fn, timeoutMs);
}
const withMatplotlib = needs("matplotlib");
const withPandas = needs("pandas");
const withIPython = needs("IPython");

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

function pngFileSize(path: string): { width: number; height: number } {
  const png = readFileSync(path);
  expect(png.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

async function json(args: string[], home: string, extra: { cwd?: string } = {}): Promise<ExecResult> {
  const r = await run([...args.slice(0, -1), "--json", args.at(-1) as string], { home, ...extra, timeoutMs: 60_000 });
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout) as ExecResult;
}

const path = (item: DisplayItem | undefined, mime: string) => item?.[mime] as string;

describe("plots from the shell", () => {
  withMatplotlib("text mode: plt.show() prints the figure and its file's path; the file is a PNG of the rcParams size", () =>
    withHome(async (home) => {
      const r = await run(["run", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()"], { home, timeoutMs: 60_000 });
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      // The path alone: the figure's `<Figure size 640x480 with 1 Axes>` placeholder says nothing more.
      const [file, ...rest] = r.stdout.trimEnd().split("\n");
      const m = /^\[image\/png\] (.+\.png)$/.exec(file ?? "");
      expect(m).not.toBeNull();
      expect(rest).toEqual([]);
      // An ephemeral run's files outlive it, in the state directory.
      expect(m![1]!.startsWith(join(home, "display"))).toBe(true);
      expect(pngFileSize(m![1]!)).toEqual({ width: 640, height: 480 });
    }));

  withMatplotlib("--json: the entry carries the path, the MIME type and the byte size; a trailing fig is shown once", () =>
    withHome(async (home) => {
      const r = await json(["-s", "plots", "run", "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\nfig"], home);
      expect(r.value).toBeNull(); // the image is the value's answer, not its repr
      expect(r.display).toHaveLength(1);
      const [item] = r.display;
      expect(item).toEqual({ "image/png": expect.stringMatching(/\.png$/), metadata: { "image/png": { bytes: expect.any(Number) } }, source: "value" });
      expect(statSync(path(item, "image/png")).size).toBe(item!.metadata!["image/png"]!.bytes);
      // In text mode the same cell prints the path alone; so does the list of lines plt.plot() returns.
      const text = await run(["-s", "plots", "run", "fig"], { home });
      expect(text.stdout).toMatch(/^\[image\/png\] .+\.png\n$/);
      const lines = await run(["-s", "plots", "run", "plt.plot([3, 1, 2])"], { home });
      expect(lines.stdout).toMatch(/^\[image\/png\] .+\.png\n$/);
    }));

  withMatplotlib("1,000 figures in one cell: the result keeps the entry limit, counts the rest; the session's folder stays under its cap", () =>
    withHome(async (home) => {
      writeFileSync(join(home, "config.jsonc"), '{ "displayMaxEntries": 100, "displayMaxFiles": 40 }');
      const r = await json(["-s", "many", "run", "import matplotlib.pyplot as plt, warnings\nwarnings.simplefilter('ignore')\nfor i in range(1000): plt.figure(figsize=(1, 1))"], home);
      expect(r.status).toBe("ok");
      expect(r.display).toHaveLength(100);
      expect(r.display_dropped).toBe(900);
      expect(r.truncated).toBe(true);
      const folder = join(home, "display", "many");
      expect(readdirSync(folder)).toHaveLength(40);
      // The newest entries' files are the ones kept.
      expect(r.display.slice(-40).every((item) => existsSync(path(item, "image/png")))).toBe(true);
      expect(existsSync(path(r.display[0], "image/png"))).toBe(false);
    }), 150_000);

  withMatplotlib("close removes the session's display folder; other sessions keep theirs", () =>
    withHome(async (home) => {
      const cell = "import matplotlib.pyplot as plt\nplt.plot([1])";
      const a = await json(["-s", "a", "run", cell], home);
      const b = await json(["-s", "b", "run", cell], home);
      expect(existsSync(path(a.display[0], "image/png"))).toBe(true);
      expect((await run(["close", "a"], { home })).code).toBe(0);
      expect(existsSync(join(home, "display", "a"))).toBe(false);
      expect(existsSync(path(b.display[0], "image/png"))).toBe(true);
    }));

  test("a session that comes back from its snapshot keeps its files: daemon stop and close --keep leave them, close removes them", () =>
    withHome(async (home) => {
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
      const first = await json(["-s", "k", "run", `import awrepl\nawrepl.emit({'image/png': '${png}'})\nx = 1`], home);
      const file = path(first.display[0], "image/png");
      expect((await run(["daemon", "stop"], { home })).code).toBe(0);
      expect(existsSync(file)).toBe(true);
      expect((await json(["-s", "k", "run", "x"], home)).value).toBe("1"); // restored, files and all
      expect((await run(["close", "--keep", "k"], { home })).code).toBe(0);
      expect(existsSync(file)).toBe(true);
      expect((await run(["close", "k"], { home })).code).toBe(0);
      expect(existsSync(file)).toBe(false);
    }), 60_000);
});

describe("--display-dir", () => {
  withMatplotlib("named and ephemeral: files go to DIR (created, relative to the cwd, not required private); the paths say so", () =>
    withHome(async (home) => {
      const work = join(home, "work");
      mkdirSync(work, { mode: 0o755 });
      const cell = "import matplotlib.pyplot as plt\nplt.plot([1, 2])";
      const named = await json(["-s", "w", "run", "--display-dir", "out/plots", cell], home, { cwd: work });
      const file = path(named.display[0], "image/png");
      expect(file.startsWith(join(work, "out", "plots"))).toBe(true);
      expect(pngFileSize(file)).toEqual({ width: 640, height: 480 });
      expect(readdirSync(join(home, "display", "w"))).toEqual([]); // moved, not copied
      const ephemeral = await run(["run", "--display-dir", join(work, "out", "plots"), cell], { home, cwd: work, timeoutMs: 60_000 });
      const printed = /\[image\/png\] (.+)/.exec(ephemeral.stdout)?.[1] ?? "";
      expect(printed.startsWith(join(work, "out", "plots"))).toBe(true);
      expect(readdirSync(join(work, "out", "plots"))).toHaveLength(2);
      // The caller's files are the caller's: close does not touch them.
      await run(["close", "w"], { home });
      expect(existsSync(file)).toBe(true);
    }));

  test("a --display-dir that cannot be a directory is a usage error before the cell runs", () =>
    withHome(async (home) => {
      const blocker = join(home, "a-file");
      writeFileSync(blocker, "x");
      const r = await run(["run", "--display-dir", blocker, "open('ran', 'w').write('1')"], { home });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(blocker);
      expect(existsSync(join(home, "ran"))).toBe(false);
    }), 30_000);
});

describe("display data and the output limit", () => {
  test("a 20 MB image is written to its file, not inlined, and counted", () =>
    withHome(async (home) => {
      const cell = "class Big:\n    def _repr_png_(self): return b'\\x89PNG\\r\\n\\x1a\\n' + bytes(20 * 1024 * 1024 - 8)\ndisplay(Big())";
      const r = await run(["-s", "big", "run", "--json", cell], { home, timeoutMs: 60_000 });
      expect(r.stdout.length).toBeLessThan(10_000);
      const result = JSON.parse(r.stdout) as ExecResult;
      const [item] = result.display;
      expect(item!.metadata).toEqual({ "image/png": { bytes: 20 * 1024 * 1024 } });
      expect(statSync(path(item, "image/png")).size).toBe(20 * 1024 * 1024);
      expect(readFileSync(path(item, "image/png")).subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
    }), 60_000);

  test("an awrepl.emit loop of 15 MB under a 64 KB --max-output gives a small result with an exact dropped count", () =>
    withHome(async (home) => {
      const cell = "import awrepl\nfor i in range(15000): awrepl.emit({'text/plain': str(i).rjust(1000, '.')})";
      const r = await run(["run", "--json", "--max-output", "65536", cell], { home, timeoutMs: 60_000 });
      expect(r.code).toBe(0);
      expect(r.stdout.length).toBeLessThan(200_000);
      const result = JSON.parse(r.stdout) as ExecResult;
      expect(result.truncated).toBe(true);
      expect(result.display.length + (result.display_dropped ?? 0)).toBe(15000);
      expect(result.display.length).toBeLessThanOrEqual(100);
      expect(result.display[0]!["text/plain"]).toBe("0".padStart(1000, "."));
      const text = await run(["run", "--max-output", "65536", cell], { home, timeoutMs: 60_000 });
      expect(text.stdout.length).toBeLessThan(100_000);
      expect(text.stderr).toContain(`awrepl: ${result.display_dropped} display entries dropped`);
    }), 60_000);

  test("a repr method that raises: the cell succeeds, the error is in the entry (--json) and on stderr (text)", () =>
    withHome(async (home) => {
      const cell = "class B:\n    def _repr_html_(self): raise ValueError('boom')\n    def _repr_markdown_(self): return '*fine*'\ndisplay(B())\n'done'";
      const r = await json(["run", cell], home);
      expect(r.status).toBe("ok");
      expect(r.display[0]).toMatchObject({ "text/markdown": "*fine*", error: "_repr_html_() raised ValueError: boom" });
      const text = await run(["run", cell], { home });
      expect(text.code).toBe(0);
      expect(text.stdout).toBe("*fine*\n'done'\n");
      expect(text.stderr).toBe("awrepl: display: _repr_html_() raised ValueError: boom (left out of the entry)\n");
    }), 30_000);
});

describe("libraries", () => {
  withPandas("a DataFrame: the text table once in text mode; its HTML only in --json", () =>
    withHome(async (home) => {
      const cell = "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})";
      const text = await run(["run", cell], { home, timeoutMs: 60_000 });
      expect(text.stdout).toBe("   a  b\n0  1  3\n1  2  4\n");
      const r = await json(["run", cell], home);
      expect(r.value).toBe("   a  b\n0  1  3\n1  2  4");
      expect(r.display).toEqual([{ "text/html": expect.stringContaining("<table"), source: "value" }]);
    }));

  withIPython("IPython.display: markdown is printed as text; an Image's file path is printed", () =>
    withHome(async (home) => {
      const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
      const cell =
        `import base64\nopen('dot.png', 'wb').write(base64.b64decode('${png}'))\nfrom IPython.display import display, Markdown, Image\ndisplay(Markdown('# Results'))\ndisplay(Image(filename='dot.png'))`;
      const r = await run(["run", cell], { home, timeoutMs: 60_000 });
      expect(r.code).toBe(0);
      const lines = r.stdout.trimEnd().split("\n");
      expect(lines[0]).toBe("# Results");
      // The file alone: the entry's `<IPython.core.display.Image object>` placeholder is left out.
      expect(lines).toHaveLength(2);
      const file = /^\[image\/png\] (.+)$/.exec(lines[1] ?? "")?.[1] ?? "";
      expect(readFileSync(file).toString("base64")).toBe(png);
    }));

  withMatplotlib("serve prints the paths and the markdown as text", () =>
    withHome(async (home) => {
      const input = "display(type('Md', (), {'_repr_markdown_': lambda self: '**bold** move'})())\nimport matplotlib.pyplot as plt\nplt.plot([1])\nplt.show()\n";
      const r = await run(["serve"], { home, input, timeoutMs: 60_000 });
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("**bold** move\n");
      expect(r.stdout).toMatch(/\[image\/png\] \S+\.png\n/);
    }));
});

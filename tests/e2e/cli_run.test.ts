// `awrepl run` end to end: the compiled binary, a real /usr/bin/python3, no supervisor (ephemeral).
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { awreplBinary, PYTHON, run, start, testEnv, withHome } from "../harness/mod.ts";

describe("awrepl run: output", () => {
  test("prints the cell's stdout exactly", () =>
    withHome(async (home) => {
      const r = await run(["run", "print('hello')\nprint('wor' + 'ld', end='!')"], { home });
      expect(r.stdout).toBe("hello\nworld!"); // exactly: no newline is added to the cell's own output
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
    }), 30_000);

  test("prints the trailing expression's repr like a REPL", () =>
    withHome(async (home) => {
      const r = await run(["run", "x = [1, 2]\nx + [3]"], { home });
      expect(r.stdout).toBe("[1, 2, 3]\n");
      expect(r.code).toBe(0);
    }), 30_000);

  test("a cell's stderr goes to stderr, fd-level output included", () =>
    withHome(async (home) => {
      const r = await run(["run", "import os, sys\nprint('err', file=sys.stderr)\n_ = os.write(2, b'raw\\n')\n_ = os.write(1, b'out\\n')"], { home });
      expect(r.stdout).toBe("out\n");
      expect(r.stderr).toBe("err\nraw\n");
      expect(r.code).toBe(0);
    }), 30_000);

  test("a ZeroDivisionError exits 1 with the failing cell line and the error", () =>
    withHome(async (home) => {
      const r = await run(["run", "def f():\n    return 1 / 0\nf()"], { home });
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      const lines = r.stderr.trimEnd().split("\n");
      expect(lines.at(-1)).toBe("ZeroDivisionError: division by zero");
      expect(r.stderr).toContain("return 1 / 0");
      expect(r.stderr).toContain("--traceback");
      expect(r.stderr).not.toContain("Traceback (most recent call last)");
    }), 30_000);

  test("--traceback shows every frame of the cell", () =>
    withHome(async (home) => {
      const r = await run(["run", "--traceback", "def f():\n    return 1 / 0\nf()"], { home });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("Traceback (most recent call last)");
      expect(r.stderr).toContain("f()");
      expect(r.stderr).toContain("return 1 / 0");
      expect(r.stderr.trimEnd().split("\n").at(-1)).toBe("ZeroDivisionError: division by zero");
    }), 30_000);

  test("a SyntaxError exits 1 and shows the offending line", () =>
    withHome(async (home) => {
      const r = await run(["run", "x = 1\ndef broken(:\n    pass"], { home });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain("def broken(:");
      expect(r.stderr.trimEnd().split("\n").at(-1)).toStartWith("SyntaxError:");
    }), 30_000);

  test("--max-output 50 truncates to head, marker and tail with the exact count", () =>
    withHome(async (home) => {
      const text = await run(["run", "--max-output", "50", "print('a' * 500 + 'Z')"], { home });
      expect(text.code).toBe(0);
      expect(text.stdout).toStartWith("a".repeat(25));
      expect(text.stdout).toContain("[452 bytes truncated]");
      expect(text.stdout.trimEnd()).toEndWith("Z");
      const json = await run(["run", "--json", "--max-output", "50", "print('a' * 500 + 'Z')"], { home });
      const result = JSON.parse(json.stdout);
      expect(result.truncated).toBe(true);
      expect(result.truncated_bytes).toBe(502 - 50);
    }), 30_000);
});

describe("awrepl run: display data", () => {
  test("text is printed inline, binary is written to a file whose path is printed", () =>
    withHome(async (home) => {
      // A text entry prints its text; an image prints its path only (its `<Figure 1>` placeholder says
      // nothing the file does not), while --json keeps every form.
      const cell = "import awrepl, base64\nawrepl.emit({'text/plain': 'a table'})\nawrepl.emit({'text/plain': '<Figure 1>', 'image/png': base64.b64encode(b'PNGDATA').decode()})\n'after'";
      const r = await run(["run", cell], { home });
      expect(r.code).toBe(0);
      const lines = r.stdout.trimEnd().split("\n");
      expect(lines).toHaveLength(3);
      expect(lines[0]).toBe("a table");
      const m = /^\[image\/png\] (.+\.png)$/.exec(lines[1] ?? "");
      expect(m).not.toBeNull();
      expect(m?.[1]).toStartWith(home);
      expect(readFileSync(m?.[1] as string, "utf8")).toBe("PNGDATA");
      expect(lines[2]).toBe("'after'");
      const json = JSON.parse((await run(["run", "--json", cell], { home })).stdout);
      expect(json.display).toHaveLength(2);
      expect(json.display[1]["text/plain"]).toBe("<Figure 1>");
      expect(readFileSync(json.display[1]["image/png"], "utf8")).toBe("PNGDATA");
    }), 30_000);
});

describe("awrepl run: where the cell comes from", () => {
  test("- reads the cell from stdin (a heredoc)", () =>
    withHome(async (home) => {
      const r = await run(["run", "-"], { home, input: "import json\nprint(json.dumps({'a': [1, 2]}))\n" });
      expect(r.stdout).toBe('{"a": [1, 2]}\n');
      expect(r.code).toBe(0);
    }), 30_000);

  test("no CODE and a non-terminal stdin reads stdin", () =>
    withHome(async (home) => {
      const r = await run(["run"], { home, input: 'quote = "it\'s"\nprint(quote)\n' });
      expect(r.stdout).toBe("it's\n");
      expect(r.code).toBe(0);
    }), 30_000);

  test("-f FILE reads a file", () =>
    withHome(async (home) => {
      const file = join(home, "cell.py");
      writeFileSync(file, "total = sum(range(5))\ntotal\n");
      const r = await run(["run", "-f", file], { home });
      expect(r.stdout).toBe("10\n");
      expect(r.code).toBe(0);
    }), 30_000);

  test("-f FILE: __file__ is the file's absolute path and the traceback names it", () =>
    withHome(async (home) => {
      const file = join(home, "script.py");
      writeFileSync(file, "print(__file__)\ndef f():\n    raise ValueError('in the script')\nf()\n");
      for (const session of [[], ["-s", "named"]]) {
        const r = await run([...session, "run", "-f", "script.py"], { home }); // relative to the cwd (home)
        expect(r.code).toBe(1);
        expect(r.stdout).toBe(`${file}\n`);
        expect(r.stderr).toContain(`File "${file}", line 3, in f`);
        expect(r.stderr.trimEnd().split("\n").at(-1)).toBe("ValueError: in the script");
      }
      // Only for that cell: the session's next cell has no __file__.
      const after = await run(["-s", "named", "run", "'__file__' in globals()"], { home });
      expect(after.stdout).toBe("False\n");
    }), 30_000);

  test("-- lets the code start with a dash", () =>
    withHome(async (home) => {
      const r = await run(["run", "--", "-1 + 3"], { home });
      expect(r.stdout).toBe("2\n");
    }), 30_000);
});

describe("awrepl run --json", () => {
  test("prints exactly one JSON object with every ExecResult field", () =>
    withHome(async (home) => {
      const r = await run(["run", "--json", "import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7"], { home });
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      expect(r.stdout.endsWith("\n")).toBe(true);
      expect(r.stdout.trimEnd().split("\n")).toHaveLength(1);
      const result = JSON.parse(r.stdout);
      for (const field of ["stdout", "stderr", "value", "exception", "traceback", "duration_ms", "truncated", "truncated_bytes", "status", "session", "display"]) {
        expect(result).toHaveProperty(field);
      }
      expect(result).toMatchObject({ stdout: "out\n", stderr: "err\n", value: "42", exception: null, traceback: "", truncated: false, truncated_bytes: 0, status: "ok", session: null, display: [] });
      expect(typeof result.duration_ms).toBe("number");
    }), 30_000);

  test("an exception is status error, exit 1, with exception and traceback", () =>
    withHome(async (home) => {
      const r = await run(["run", "--json", "1/0"], { home });
      expect(r.code).toBe(1);
      const result = JSON.parse(r.stdout);
      expect(result.status).toBe("error");
      expect(result.exception).toBe("ZeroDivisionError: division by zero");
      expect(result.traceback).toContain("ZeroDivisionError");
      expect(result.value).toBeNull();
    }), 30_000);
});

describe("awrepl run: large output", () => {
  test("3 MB through a pipe arrives whole before awrepl exits (text and JSON)", () =>
    withHome(async (home) => {
      const cell = "import sys\n_ = sys.stdout.write('x' * 3_000_000)";
      const text = await run(["run", "--max-output", "10000000", cell], { home });
      expect(text.code).toBe(0);
      expect(text.stdout.length).toBe(3_000_000);
      const json = await run(["run", "--json", "--max-output", "10000000", cell], { home });
      expect(JSON.parse(json.stdout).stdout.length).toBe(3_000_000);
    }), 30_000);
});

describe("awrepl run: a huge value or exception is cut like output", () => {
  test("'y' * 10**8 as the last line: value within the limit, truncated, exact count (JSON and text, ephemeral and named)", () =>
    withHome(async (home) => {
      const dropped = 10 ** 8 + 2 - 1000;
      for (const session of [[], ["-s", "big"]]) {
        const json = await run([...session, "run", "--json", "--max-output", "1000", "'y' * 10**8"], { home });
        expect(json.code).toBe(0);
        const result = JSON.parse(json.stdout);
        expect(result.value).toBe(`'${"y".repeat(499)}\n... [${dropped} bytes truncated] ...\n${"y".repeat(499)}'`);
        expect(result.truncated).toBe(true);
        expect(result.truncated_bytes).toBe(dropped);
      }
      const text = await run(["run", "--max-output", "1000", "'y' * 10**8"], { home });
      expect(text.code).toBe(0);
      expect(text.stdout.length).toBeLessThan(1100);
      expect(text.stdout).toContain(`[${dropped} bytes truncated]`);
      const error = await run(["run", "--json", "--max-output", "1000", "raise ValueError('e' * 10**7)"], { home });
      expect(error.code).toBe(1);
      expect(error.stdout.length).toBeLessThan(4000);
      expect(JSON.parse(error.stdout).truncated).toBe(true);
    }), 120_000);
});

describe("awrepl run: the reader goes away", () => {
  test("a closed stdout (`| head -1`) is not a crash: no EPIPE trace, the cell's exit status", () =>
    withHome(async (home) => {
      const p = await start(["run", "--max-output", "10000000", "import time\nfor i in range(200000):\n    print(i)\n    if i == 10: time.sleep(0.2)"], { home });
      await p.waitForStdout("0\n", 15_000);
      p.child.stdout?.destroy();
      const r = await p.result;
      expect(r.code).toBe(0);
      expect(r.stderr).not.toContain("EPIPE");
    }), 30_000);
});

describe("awrepl run: stdout that cannot be written", () => {
  // /dev/full is Linux's always-full device; other systems have no such file to test with.
  test.skipIf(!existsSync("/dev/full"))("a full device is awrepl's failure (125) with one line, not a silent 0", () =>
    withHome(async (home) => {
      const bin = await awreplBinary();
      const p = Bun.spawn(["sh", "-c", `"$0" run "print(1)" > /dev/full`, bin], { env: testEnv(home), stderr: "pipe", stdout: "ignore" });
      const code = await Promise.race([p.exited, Bun.sleep(20_000).then(() => "hung")]);
      expect(code).toBe(125);
      expect(await new Response(p.stderr).text()).toBe("awrepl: cannot write to stdout: ENOSPC: no space left on device, write\n");
    }), 30_000);
});

describe("awrepl run --python", () => {
  // Another command line for the same interpreter: -S shows in sys.flags.no_site.
  const noSite = `${PYTHON} -S`;
  test("--python beats AWREPL_PYTHON, before or after the subcommand", () =>
    withHome(async (home) => {
      const before = await run(["--python", noSite, "run", "import sys; sys.flags.no_site"], { home });
      expect(before.stdout).toBe("1\n");
      const after = await run(["run", "import sys; sys.flags.no_site", "--python", noSite], { home });
      expect(after.stdout).toBe("1\n");
      const fromEnv = await run(["run", "import sys; sys.flags.no_site"], { home });
      expect(fromEnv.code).toBe(0);
      expect(fromEnv.stdout).toBe("0\n"); // AWREPL_PYTHON (the test interpreter) when no flag
    }), 30_000);

  test("a Python that does not exist: exit 125 and one line naming it", () =>
    withHome(async (home) => {
      const r = await run(["--python", "/nonexistent/python3", "run", "1"], { home });
      expect(r.code).toBe(125);
      expect(r.stdout).toBe("");
      expect(r.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(r.stderr).toContain("/nonexistent/python3");
    }), 30_000);

  test("a program that is not Python: one line naming the user's command, not the bootstrap (ephemeral and named)", () =>
    withHome(async (home) => {
      const notReady = (cmd: string, how: string) => `awrepl: Python command ${JSON.stringify(cmd)} ${how} before it was ready (is it a Python interpreter?)`;
      const bad = await run(["--python", "/bin/false", "run", "1"], { home });
      expect(bad.code).toBe(125);
      expect(bad.stderr).toBe(`${notReady("/bin/false", "exited with code 1")}\n`);
      const cat = await run(["--python", "/bin/cat", "run", "1"], { home });
      expect(cat.code).toBe(125);
      expect(cat.stderr.trimEnd().split("\n")).toHaveLength(1);
      expect(cat.stderr).toStartWith(`${notReady("/bin/cat", "exited with code 1")}: /bin/cat: `);
      const named = await run(["--python", "/bin/false", "-s", "nopy", "run", "1"], { home });
      expect(named.code).toBe(125);
      expect(named.stderr).toBe(`${notReady("/bin/false", "exited with code 1")}\n`);
    }), 60_000);

  test("a command that never gets ready fails after the start timeout with the same wording", () =>
    withHome(async (home) => {
      const r = await run(["--python", "sh -c 'exec sleep 100'", "run", "1"], { home, timeoutMs: 60_000 });
      expect(r.code).toBe(125);
      expect(r.stderr).toBe(`awrepl: Python command "sh -c 'exec sleep 100'" did not get ready within 15000 ms (is it a Python interpreter?)\n`);
    }), 90_000);

  test('--python "" is a usage error', () =>
    withHome(async (home) => {
      for (const args of [["--python", "", "run", "1"], ["run", "--python", " ", "1"]]) {
        const r = await run(args, { home });
        expect(r.code).toBe(2);
        expect(r.stderr).toContain("--python needs an interpreter command");
      }
    }), 30_000);
});

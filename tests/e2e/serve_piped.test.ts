// `awrepl serve` with stdin not a terminal: statements run as they arrive, no prompts or banner,
// the exit status reports the first failure.
import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { awreplBinary, cleanupHome, makeHome, run, testEnv } from "../harness/mod.ts";

let binary = "";
let home = "";

beforeAll(async () => {
  binary = await awreplBinary();
}, 300_000);

afterEach(async () => {
  const done = home;
  home = "";
  if (done) await cleanupHome(done);
}, 30_000); // stopping a supervisor and waiting for its workers can take a while on a busy machine

/** `globals` go before the command (-s NAME), `args` after it (serve's own options). */
function serve(input: string, args: string[] = [], globals: string[] = []) {
  home ||= makeHome();
  return run([...globals, "serve", ...args], { home, input });
}

const SCRIPT = `x = 1
def double(a):
    return a * 2
print(double(x))
double(21)
for i in range(2):
    print(i)

if x:
    y = "yes"
else:
    y = "no"
y
`;

describe("serve with piped stdin", () => {
  test("runs a script statement by statement: no blank line needed after a block, values printed", async () => {
    const r = await serve(SCRIPT);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("2\n42\n0\n1\n'yes'\n");
    expect(r.code).toBe(0);
  }, 60_000);

  test("a blank line inside a function or between a class's methods does not end it", async () => {
    const f = await serve("def f():\n    a = 1\n\n    return a + 1\nprint(f())\n");
    expect(f.stderr).toBe("");
    expect(f.stdout).toBe("2\n");
    expect(f.code).toBe(0);
    const c = await serve("class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\nprint(A().g())\n");
    expect(c.stderr).toBe("");
    expect(c.stdout).toBe("2\n");
    expect(c.code).toBe(0);
  }, 60_000);

  test("blocks read as in a file: whitespace-only and comment lines, nesting, decorators, a blank line before else", async () => {
    const script = [
      "import functools",
      "def f():",
      "    a = 1",
      "    ", // whitespace only
      "",
      "# a comment at column 0 inside the body",
      "    @functools.lru_cache",
      "    def g():",
      "        if a:",
      "",
      "            return 5",
      "",
      "        else:",
      "            return 0",
      "",
      "    return g() + a",
      "",
      "if f() == 6:",
      "    x = 'six'",
      "",
      "else:",
      "    x = 'other'",
      "x",
      "data = [",
      "    1,",
      "",
      "]",
      "data",
      "# a trailing comment",
      "",
    ].join("\n");
    const r = await serve(script);
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("'six'\n[1]\n");
    expect(r.code).toBe(0);
  }, 60_000);

  test("a block at the end of input runs, whatever blank and comment lines follow it", async () => {
    const r = await serve("def f():\n    return 'end'\n\n    \n# done\n\nprint(f())\nfor i in range(2):\n    print(i)\n\n# done\n");
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("end\n0\n1\n");
    expect(r.code).toBe(0);
  }, 60_000);

  test("a worker that died stops the script with 125: later cells would run in an empty fresh worker", async () => {
    const r = await serve("state = 'kept'\nimport os; os._exit(4)\nprint(state)\n");
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("exited with code 4");
    expect(r.stderr).not.toContain("NameError");
    expect(r.code).toBe(125);
  }, 60_000);

  test("a failing cell shows its traceback, the rest still runs, and the exit status is 1", async () => {
    const r = await serve("print('before')\n1 / 0\nprint('after')\n");
    expect(r.stdout).toBe("before\nafter\n");
    expect(r.stderr).toContain("ZeroDivisionError: division by zero");
    expect(r.code).toBe(1);
  }, 60_000);

  test("--exit-on-error stops at the first failure", async () => {
    const r = await serve("print('before')\nraise ValueError('stop here')\nprint('after')\n", ["--exit-on-error"]);
    expect(r.stdout).toBe("before\n");
    expect(r.stderr).toContain("ValueError: stop here");
    expect(r.code).toBe(1);
  }, 60_000);

  test("exit(N) ends the script quietly with status N; sys.exit('text') prints the text and exits 1", async () => {
    const r = await serve("print('one')\nexit(3)\nprint('never')\n");
    expect(r.stdout).toBe("one\n");
    expect(r.stderr).toBe("");
    expect(r.code).toBe(3);
    const m = await serve("import sys\nsys.exit('bye now')\n");
    expect(m.stderr).toBe("bye now\n");
    expect(m.code).toBe(1);
  }, 60_000);

  test("an unfinished statement at end of input is a SyntaxError, not a hang", async () => {
    const r = await serve("total = (1 +\n");
    expect(r.stderr).toMatch(/SyntaxError/);
    expect(r.code).toBe(1);
  }, 60_000);

  test("a timed-out cell exits 124", async () => {
    const r = await serve("import time\ntime.sleep(30)\n", ["--timeout", "500"]);
    expect(r.code).toBe(124);
  }, 60_000);

  test("meta commands work in a script, and a named session keeps what it ran", async () => {
    const r = await serve("kept = {'a': 1}\n:vars\n", [], ["-s", "scripted"]);
    expect(r.stdout).toMatch(/^kept\s+(dict\[str, int\] len 1: )?\{'a': 1\}$/m);
    expect(r.code).toBe(0);
    const after = await run(["-s", "scripted", "run", "kept['a'] + 1"], { home });
    expect(after.stdout).toBe("2\n");
  }, 60_000);

  test("each statement runs as soon as it has arrived, before stdin ends", async () => {
    const { child, out, closed } = spawnServe();
    const stdout = () => out.stdout;
    try {
      child.stdin.write("print('first')\n");
      await waitUntil(() => stdout().includes("first\n"), 20_000, stdout);
      // A block is held until a line at column 0 shows it has ended: a blank line does not, since more
      // of the block may follow it.
      child.stdin.write("for i in range(2):\n    print('loop', i)\n\n");
      await Bun.sleep(500);
      expect(stdout()).toBe("first\n");
      child.stdin.write("print('next')\n");
      await waitUntil(() => stdout().includes("next\n"), 20_000, stdout);
      expect(stdout()).toBe("first\nloop 0\nloop 1\nnext\n");
      child.stdin.end("'last'\n");
      expect(await closed).toBe(0);
      expect(stdout()).toBe("first\nloop 0\nloop 1\nnext\n'last'\n");
    } finally {
      child.kill("SIGKILL");
    }
  }, 60_000);

  test("Ctrl-C (SIGINT) interrupts the running cell, stops reading, and exits 130", async () => {
    const { child, out, closed } = spawnServe();
    try {
      child.stdin.write("print('spinning', flush=True)\nwhile True: pass\n\nprint('never')\n");
      await waitUntil(() => out.stdout.includes("spinning\n"), 20_000, () => out.stdout);
      await Bun.sleep(300);
      child.kill("SIGINT");
      expect(await closed).toBe(130);
      expect(out.stderr).toContain("KeyboardInterrupt");
      expect(out.stdout).not.toContain("never");
    } finally {
      child.kill("SIGKILL");
    }
  }, 60_000);

  test("a reader that goes away (`| head`) ends serve quietly with 141 and its worker with it", async () => {
    const { child, out, closed } = spawnServe();
    try {
      // Live output stops at the head the result keeps; the next write (the tail) finds the pipe closed.
      child.stdin.end("for i in range(300_000): print(i)\n\nprint('never')\n");
      await waitUntil(() => out.stdout.includes("\n"), 20_000, () => out.stdout);
      child.stdout.destroy();
      expect(await closed).toBe(141);
      expect(out.stderr).toBe("");
    } finally {
      child.kill("SIGKILL");
    }
  }, 60_000);
});

/** `serve` with stdin left open, for tests that feed it line by line. */
function spawnServe() {
  home = makeHome();
  const child = spawn(binary, ["serve"], { env: testEnv(home), cwd: home, stdio: ["pipe", "pipe", "pipe"] });
  const out = { stdout: "", stderr: "" };
  child.stdout.setEncoding("utf8").on("data", (s: string) => {
    out.stdout += s;
  });
  child.stderr.setEncoding("utf8").on("data", (s: string) => {
    out.stderr += s;
  });
  const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  return { child, out, closed };
}

async function waitUntil(ok: () => boolean, timeoutMs: number, show: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms; output so far: ${JSON.stringify(show())}`);
    await Bun.sleep(20);
  }
}

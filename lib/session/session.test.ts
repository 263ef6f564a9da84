import { execFileSync } from "node:child_process";
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { truncationMarker } from "./output.ts";
import { ReplSession } from "./session.ts";
import { alive, PYTHON, rejection, useSessions, waitFor } from "../../tests/harness/mod.ts";

const fixture = useSessions("test");
const start = fixture.start;

describe("the original awrepl's cases", () => {
  test("exact stdout", async () => {
    const s = await start();
    const r = await s.execute("print('hello')");
    expect(r.stdout).toBe("hello\n");
    expect(r.stderr).toBe("");
    expect(r.status).toBe("ok");
  });

  test("trailing expression value", async () => {
    const s = await start();
    expect((await s.execute("x = 21\nx * 2")).value).toBe("42");
    expect((await s.execute("x = 1")).value).toBeNull();
    expect((await s.execute("None")).value).toBeNull();
  });

  test("SyntaxError is reported and the session lives", async () => {
    const s = await start();
    const r = await s.execute("def f(:");
    expect(r.status).toBe("error");
    expect(r.exception).toStartWith("SyntaxError");
    expect((await s.execute("1 + 1")).value).toBe("2");
  });

  test("ZeroDivisionError is reported with a traceback and the session lives", async () => {
    const s = await start();
    await s.execute("keep = 'kept'");
    const r = await s.execute("1 / 0");
    expect(r.status).toBe("error");
    expect(r.exception).toBe("ZeroDivisionError: division by zero");
    expect(r.traceback).toContain("ZeroDivisionError");
    expect(r.value).toBeNull();
    expect((await s.execute("keep")).value).toBe("'kept'");
  });

  test("functions, imports and variables persist", async () => {
    const s = await start();
    await s.execute("import math\ndef area(r):\n    return math.pi * r * r\nitems = [1, 2, 3]");
    expect((await s.execute("round(area(1), 2)")).value).toBe("3.14");
    expect((await s.execute("print(len(items))")).stdout).toBe("3\n");
  });

  test("stderr is captured apart from stdout", async () => {
    const s = await start();
    const r = await s.execute("import sys\nprint('out')\nprint('err', file=sys.stderr)");
    expect(r.stdout).toBe("out\n");
    expect(r.stderr).toBe("err\n");
  });

  test("truncation with a 50-byte limit", async () => {
    const s = await start({ maxOutputBytes: 50 });
    const r = await s.execute("print('x' * 1000)");
    expect(r.truncated).toBe(true);
    expect(r.truncated_bytes).toBe(1001 - 50);
    expect(r.stdout).toContain(truncationMarker(951));
    expect(r.stdout.startsWith("x".repeat(25))).toBe(true);
    expect(r.stdout.endsWith(`${"x".repeat(24)}\n`)).toBe(true);
  });

  test("variables() lists bound names and excludes builtins", async () => {
    const s = await start();
    await s.execute("x = [1, 2, 3]\nname = 'Alice'");
    const vars = await s.variables();
    expect(vars.x).toContain("list");
    expect(vars.x).toContain("[1, 2, 3]");
    expect(vars.name).toContain("'Alice'");
    expect(vars.print).toBeUndefined();
    expect(vars.__builtins__).toBeUndefined();
    expect(vars.len).toBeUndefined();
  });

  test("inspect() gives type, repr and docstring; a missing name is name_not_found", async () => {
    const s = await start();
    await s.execute("def greet(who):\n    'Say hello.'\n    return who\nx = [1, 2, 3]");
    const info = await s.inspect("x");
    expect(info.type).toBe("list");
    expect(info.repr).toBe("[1, 2, 3]");
    expect(info.len).toBe(3);
    const fn = await s.inspect("greet");
    expect(fn.docstring).toContain("Say hello.");
    const err = await rejection(s.inspect("nope"));
    expect(err.code).toBe("name_not_found");
    expect(err.message).toContain('"nope"');
  });

  test("inspect() gives the docstring's first paragraph and public names; { full: true } all of both", async () => {
    const s = await start();
    const ran = await s.execute('class Box:\n    """One line.\n\n    The second paragraph."""\n    def _hidden(self): pass\n    def shown(self): pass\nb = Box()');
    expect(ran.status).toBe("ok");
    const short = await s.inspect("b");
    expect(short.docstring).toBe("One line.");
    expect(short.dir).toEqual(["shown"]);
    expect(short.more?.docstring).toBeGreaterThan(0);
    const full = await s.inspect("b", { full: true });
    expect(full.docstring).toContain("The second paragraph.");
    expect(full.dir).toContain("_hidden");
    expect(full.dir).toContain("__init__");
    expect(full.more).toBeUndefined();
  });

  test("reset() clears names and keeps builtins", async () => {
    const s = await start();
    await s.execute("x = 1");
    await s.reset();
    const r = await s.execute("x");
    expect(r.status).toBe("error");
    expect(r.exception).toStartWith("NameError");
    expect((await s.execute("len([1, 2])")).value).toBe("2");
    expect(await s.variables()).toEqual({});
  });

  test("a working directory that does not exist is named, not reported as a missing interpreter", async () => {
    const missing = join(fixture.tmp.home, "gone");
    const err = await rejection(start({ cwd: missing }));
    expect(err.code).toBe("usage");
    expect(err.message).toBe(`The working directory ${JSON.stringify(missing)} does not exist`);
    writeFileSync(missing, "");
    expect((await rejection(start({ cwd: missing }))).message).toContain("is not a directory");
  });

  test("disposal with await using ends the worker", async () => {
    let pid = 0;
    {
      await using s = await ReplSession.start("disposed", { python: PYTHON, home: fixture.tmp.home });
      pid = s.pid ?? 0;
      expect(alive(pid)).toBe(true);
    }
    await waitFor(() => !alive(pid), 5000, "the worker to exit");
  });

  test("every ExecResult field is present with its type", async () => {
    const s = await start({}, "fields");
    const r = await s.execute("print('a')\n7");
    expect(Object.keys(r).sort()).toEqual(
      ["display", "duration_ms", "exception", "session", "status", "stderr", "stdout", "traceback", "truncated", "truncated_bytes", "value"].sort(),
    );
    expect(r).toMatchObject({ stdout: "a\n", stderr: "", value: "7", exception: null, traceback: "", truncated: false, truncated_bytes: 0, status: "ok", session: "fields", display: [] });
    expect(typeof r.duration_ms).toBe("number");
    expect(r.duration_ms).toBeGreaterThan(0);
  });
});

describe("timeouts, deaths and interrupts", () => {
  test("a runaway C loop is stopped at its timeout and the session works after", async () => {
    const s = await start({ timeoutMs: 500, graceMs: 300 });
    await s.execute("before = 1");
    const pid = s.pid ?? 0;
    const r = await s.execute("sum(range(10**12))");
    expect(r.status).toBe("timeout");
    expect(r.exception).toContain("the worker was killed");
    // Said once: in the notice, not in the exception or the cell's stderr.
    expect(r.notice).toContain("state was lost");
    expect(r.exception).not.toContain("state was lost");
    expect(r.stderr).not.toContain("state was lost");
    await waitFor(() => !alive(pid), 5000, "the killed worker to be gone");
    const next = await s.execute("1 + 1");
    expect(next.status).toBe("ok");
    expect(next.value).toBe("2");
    expect(next.notice).toContain("earlier state is gone");
    expect((await s.execute("before")).status).toBe("error");
  });

  test("an interruptible cell past its deadline keeps the state", async () => {
    const s = await start({ timeoutMs: 300, graceMs: 5000 });
    await s.execute("kept = 5");
    const r = await s.execute("import time\nwhile True: time.sleep(0.01)");
    expect(r.status).toBe("timeout");
    expect(r.notice).toBeUndefined();
    expect((await s.execute("kept")).value).toBe("5");
  });

  test("a per-call timeout overrides the session's", async () => {
    const s = await start({ timeoutMs: 0 });
    const r = await s.execute("import time; time.sleep(5)", { timeoutMs: 200 });
    expect(r.status).toBe("timeout");
  });

  test("os._exit(3) is status died with the code; the next call gets a fresh worker and is told", async () => {
    const s = await start();
    await s.execute("x = 1");
    // The sleep lets the runtime ship the printed line before the process ends.
    const r = await s.execute("import os, time; print('bye', flush=True); time.sleep(0.3); os._exit(3)");
    expect(r.status).toBe("died");
    expect(r.exception).toContain("code 3");
    expect(r.stdout).toBe("bye\n");
    const next = await s.execute("x");
    expect(next.status).toBe("error");
    expect(next.notice).toContain("exited with code 3");
    expect(next.notice).toContain("earlier state is gone");
    expect((await s.execute("1")).notice).toBeUndefined();
  });

  test("a SIGKILLed worker is status died naming the signal", async () => {
    const s = await start();
    const running = s.execute("import time; time.sleep(30)");
    await waitFor(() => s.busy, 2000, "the cell to start");
    await new Promise((r) => setTimeout(r, 100));
    process.kill(s.pid ?? 0, "SIGKILL");
    const r = await running;
    expect(r.status).toBe("died");
    expect(r.exception).toContain("SIGKILL");
    expect((await s.execute("2")).value).toBe("2");
  });

  test("a worker that dies between calls is replaced and the next result says so", async () => {
    const s = await start();
    const pid = s.pid ?? 0;
    process.kill(pid, "SIGKILL");
    await waitFor(() => s.pid === null, 5000, "the session to see its worker die");
    const r = await s.execute("3");
    expect(r.value).toBe("3");
    expect(r.notice).toContain("SIGKILL");
  });

  test("interrupt() stops the running cell with status interrupted and keeps the state", async () => {
    const s = await start();
    await s.execute("kept = 'yes'");
    const running = s.execute("while True: pass");
    await new Promise((r) => setTimeout(r, 200));
    await s.interrupt();
    const r = await running;
    expect(r.status).toBe("interrupted");
    expect(r.exception).toStartWith("KeyboardInterrupt");
    expect((await s.execute("kept")).value).toBe("'yes'");
  });

  test("an abort signal interrupts the cell", async () => {
    const s = await start();
    const ac = new AbortController();
    const running = s.execute("import time\nfor _ in range(1000): time.sleep(0.01)", { signal: ac.signal });
    setTimeout(() => ac.abort(), 200);
    expect((await running).status).toBe("interrupted");
  });

  test("a KeyboardInterrupt raised by the cell itself is an error", async () => {
    const s = await start();
    expect((await s.execute("raise KeyboardInterrupt")).status).toBe("error");
  });
});

describe("output", () => {
  test("os.write and subprocess output are captured", async () => {
    const s = await start();
    const r = await s.execute("import os, subprocess, sys\nos.write(1, b'raw\\n')\nsubprocess.run(['echo', 'child'])\nos.write(2, b'rawerr\\n')");
    expect(r.stdout).toContain("raw\n");
    expect(r.stdout).toContain("child\n");
    expect(r.stderr).toContain("rawerr\n");
  });

  test("10 MB printed stays bounded and truncated_bytes is exact", async () => {
    const s = await start({ maxOutputBytes: 1000 });
    const r = await s.execute("import sys\nfor i in range(10240): sys.stdout.write('y' * 1023 + '\\n')");
    expect(r.truncated).toBe(true);
    expect(r.truncated_bytes).toBe(10 * 1024 * 1024 - 1000);
    expect(Buffer.byteLength(r.stdout)).toBeLessThan(1100);
  });

  test("a 100 MB trailing value is cut to the output limit and counted", async () => {
    const s = await start({ maxOutputBytes: 1000 });
    const r = await s.execute("'y' * 10**8");
    const marker = truncationMarker(10 ** 8 + 2 - 1000);
    expect(r.value).toBe(`'${"y".repeat(499)}\n${marker}${"y".repeat(499)}'`);
    expect(r.truncated).toBe(true);
    expect(r.truncated_bytes).toBe(10 ** 8 + 2 - 1000);
    const small = await s.execute("'y' * 10", { maxOutputBytes: 20 });
    expect(small.value).toBe(`'${"y".repeat(10)}'`);
    expect(small.truncated).toBe(false);
  }, 60_000);

  test("a huge exception message, its traceback and text display data are each cut; truncated_bytes sums them", async () => {
    const s = await start({ maxOutputBytes: 100 });
    const r = await s.execute("raise ValueError('e' * 10**6)");
    expect(r.status).toBe("error");
    expect(r.exception?.startsWith("ValueError: eee")).toBe(true);
    expect(r.exception).toContain(" bytes truncated] ...\n");
    expect(Buffer.byteLength(r.exception ?? "")).toBeLessThan(100 + 40);
    expect(Buffer.byteLength(r.traceback)).toBeLessThan(100 + 40);
    expect(r.truncated).toBe(true);
    expect(r.truncated_bytes).toBeGreaterThan(2 * (10 ** 6 - 100));
    // With room for them, the frames are kept whole: only the message is cut.
    const framed = await s.execute("def f():\n    raise ValueError('e' * 10**6)\nf()", { maxOutputBytes: 1000 });
    expect(framed.traceback).toContain('File "<cell-2>", line 2, in f\n');
    expect(framed.traceback).toContain("ValueError: eee");
    expect(framed.traceback).toContain(" bytes truncated] ...\n");
    expect(Buffer.byteLength(framed.traceback)).toBeLessThan(1000 + 40);
    const d = await s.execute("import awrepl\nawrepl.emit({'text/plain': 'z' * 10**6})");
    const text = d.display[0]?.["text/plain"] ?? "";
    expect(text).toBe(`${"z".repeat(50)}\n${truncationMarker(10 ** 6 - 100)}${"z".repeat(50)}`);
    expect(d.truncated_bytes).toBe(10 ** 6 - 100);
  }, 60_000);

  test("filename: __file__ is the file while the cell runs and the traceback names it", async () => {
    const s = await start();
    const file = join(fixture.tmp.home, "script.py");
    const code = "print(__file__)\ndef f():\n    raise ValueError('from the file')\nf()\n";
    writeFileSync(file, code);
    const r = await s.execute(code, { filename: file });
    expect(r.stdout).toBe(`${file}\n`);
    expect(r.exception).toBe("ValueError: from the file");
    expect(r.traceback).toContain(`File "${file}", line 3, in f`);
    expect(r.traceback).toContain("raise ValueError('from the file')");
  });

  test("onOutput sees live output before the result", async () => {
    const s = await start();
    const seen = { stdout: "", stderr: "" };
    const r = await s.execute("import sys\nprint('one')\nprint('two', file=sys.stderr)", {
      onOutput: (stream, text) => {
        seen[stream] += text;
      },
    });
    expect(seen).toEqual({ stdout: "one\n", stderr: "two\n" });
    expect(r.stdout).toBe("one\n");
    expect(r.stderr).toBe("two\n");
  });

  test("output a background thread writes between cells opens the next cell's output", async () => {
    const s = await start();
    await s.execute("import threading, time\nwritten = threading.Event()\nthreading.Thread(target=lambda: (time.sleep(0.2), print('late'), written.set())).start()");
    await new Promise((r) => setTimeout(r, 600));
    // The wait makes the test hold on a slow machine too (then the line arrives during this cell).
    const r = await s.execute("written.wait(5)\nprint('now')");
    expect(r.stdout).toBe("late\nnow\n");
  });

  test("live output holds every chunk once and in order, \\u-escaped ones (ESC, NUL) too", async () => {
    const s = await start();
    for (const live of ["raw", "text"] as const) {
      const seen: string[] = [];
      const options = live === "raw" ? { onRawOutput: (_s: string, raw: { text(): string }) => void seen.push(raw.text()) } : { onOutput: (_s: string, text: string) => void seen.push(text) };
      const r = await s.execute("import time\nprint('\\x1b[1mA\\x1b[0m\\x00', flush=True); time.sleep(0.05); print('B', flush=True)", options);
      expect(seen.join("")).toBe("\x1b[1mA\x1b[0m\x00\nB\n");
      expect(r.stdout).toBe(seen.join(""));
    }
  });

  test("output a background thread wrote between cells is shown live as the next cell's first output", async () => {
    const s = await start();
    const go = join(fixture.tmp.home, "go");
    const done = join(fixture.tmp.home, "done");
    await s.execute(
      `import os, threading, time\ndef later():\n    while not os.path.exists(${JSON.stringify(go)}): time.sleep(0.01)\n    print('late', flush=True)\n    open(${
        JSON.stringify(done)
      }, 'w').close()\nthreading.Thread(target=later, daemon=True).start()`,
    );
    writeFileSync(go, "");
    await waitFor(() => existsSync(done), 10_000, "the thread to print");
    const seen: string[] = [];
    const r = await s.execute("print('now')", { onRawOutput: (_s, raw) => void seen.push(raw.text()) });
    expect(r.stdout).toBe("late\nnow\n");
    expect(seen.join("")).toBe("late\nnow\n");
  });

  test("the host bridge: onHostRequest answers the cell's awrepl.host_request; without it, a clear error", async () => {
    const s = await start();
    const asked: unknown[] = [];
    const code = "import awrepl\nreply = await awrepl.host_request({'ask': 'answer'})\nreply";
    const r = await s.execute(code, {
      onHostRequest: async (data) => {
        asked.push(data);
        return { answer: 42 };
      },
    });
    expect(asked).toEqual([{ ask: "answer" }]);
    expect(r.value).toBe("{'answer': 42}");
    expect((await s.execute(code)).value).toBe("{'error': 'no host bridge in this awrepl host'}");
    const failing = await s.execute(code, {
      onHostRequest: () => {
        throw new Error("no answer here");
      },
    });
    expect(failing.value).toBe(`{'error': "the host's handler failed: no answer here"}`);
  });

  test("multi-byte output survives intact", async () => {
    const s = await start();
    expect((await s.execute("print('héllo €uro 😀')")).stdout).toBe("héllo €uro 😀\n");
  });
});

describe("order, lifecycle and the rest of the interface", () => {
  test("calls run one at a time in arrival order", async () => {
    const s = await start();
    await s.execute("log = []");
    const calls = [1, 2, 3, 4, 5].map((i) => s.execute(`import time; time.sleep(0.0${5 - i}); log.append(${i})`));
    await Promise.all(calls);
    expect((await s.execute("log")).value).toBe("[1, 2, 3, 4, 5]");
  });

  test("calls of different kinds keep their arrival order", async () => {
    const s = await start();
    const first = s.execute("import time; time.sleep(0.1); x = 1");
    const vars = s.variables();
    const second = s.execute("x + 1");
    const info = s.inspect("x");
    expect((await first).status).toBe("ok");
    expect((await vars).x).toContain("int");
    expect((await second).value).toBe("2");
    expect((await info).repr).toBe("1");
    // A failed call does not stall the queue.
    const bad = s.inspect("missing");
    const after = s.execute("3");
    expect((await rejection(bad)).code).toBe("name_not_found");
    expect((await after).value).toBe("3");
  });

  test("close() leaves no process and later calls are refused", async () => {
    const s = await start();
    const pid = s.pid ?? 0;
    await s.close();
    await waitFor(() => !alive(pid), 5000, "the worker to exit");
    expect((await rejection(s.execute("1"))).code).toBe("worker_closed");
    await s.close(); // idempotent
  });

  test("an invalid session name is a usage error", async () => {
    expect((await rejection(ReplSession.start("../evil", { python: PYTHON, home: fixture.tmp.home }))).code).toBe("usage");
  });

  test("a command that exits before its handshake is no_interpreter naming the exit", async () => {
    const err = await rejection(ReplSession.start("x", { python: "env false", home: fixture.tmp.home }));
    expect(err.code).toBe("no_interpreter");
    expect(err.message).toContain("exited with code 1");
  });

  test("bad limits are usage errors and run nothing", async () => {
    expect((await rejection(ReplSession.start("x", { python: PYTHON, home: fixture.tmp.home, timeoutMs: -1 }))).code).toBe("usage");
    const s = await start();
    expect((await rejection(s.execute("x = 1", { timeoutMs: Number.NaN }))).code).toBe("usage");
    expect((await rejection(s.execute("x = 1", { maxOutputBytes: -5 }))).code).toBe("usage");
    expect((await s.execute("'x' in globals()")).value).toBe("False");
  });

  test("a missing interpreter is no_interpreter", async () => {
    expect((await rejection(ReplSession.start("x", { python: "/nonexistent/python3", home: fixture.tmp.home }))).code).toBe("no_interpreter");
  });

  test("snapshot and restore round-trip through the default path", async () => {
    const s = await start({}, "snap");
    await s.execute("data = {'a': [1, 2]}\ndef f(): return 1");
    const report = await s.snapshot();
    expect(report.path).toBe(join(fixture.tmp.home, "snapshots", "snap", "snapshot.pkl"));
    expect(report.saved).toContain("data");
    expect(existsSync(report.path)).toBe(true);
    expect(existsSync(join(fixture.tmp.home, "snapshots", "snap", "snapshot.json"))).toBe(true);
    await s.reset();
    const restored = await s.restore();
    expect(restored.restored).toContain("data");
    expect((await s.execute("data['a']")).value).toBe("[1, 2]");
  });

  test("restore of a missing snapshot is restore_failed", async () => {
    const s = await start();
    expect((await rejection(s.restore(join(fixture.tmp.home, "none.pkl")))).code).toBe("restore_failed");
  });

  test("restore refuses a FIFO, a device and a file over the snapshot cap before the worker sees them (issue 15 item 11)", async () => {
    const s = await start({ snapshotMaxBytes: 1000 });
    await s.execute("x = 1");
    const fifo = join(fixture.tmp.home, "pipe.pkl");
    execFileSync("mkfifo", [fifo]);
    const big = join(fixture.tmp.home, "big.pkl");
    writeFileSync(big, Buffer.alloc(1024 * 1024 + 1001));
    for (
      const [path, says] of [
        [fifo, "it is a FIFO, not a snapshot file"],
        ["/dev/zero", "it is a character device, not a snapshot file"],
        [big, `it is ${1024 * 1024 + 1001} bytes, over the snapshot cap of ${1000 + 1024 * 1024} bytes`],
      ] as const
    ) {
      const err = await rejection(s.restore(path));
      expect(err.code).toBe("usage");
      expect(err.message).toContain(says);
    }
    // Nothing reached the worker: the session and its state are as they were, at once.
    expect((await s.execute("x")).value).toBe("1");
  });

  test("a restore honours its own timeout: a payload that hangs its worker is cut off at that deadline", async () => {
    const s = await start({ timeoutMs: 60_000, graceMs: 200 });
    await s.execute("import time\nclass Hang:\n    def __reduce__(self):\n        return (time.sleep, (30,))\nh = Hang()\nx = 5");
    const path = join(fixture.tmp.home, "hang.pkl");
    await s.snapshot(path);
    const started = Date.now();
    const err = await rejection(s.restore(path, { timeoutMs: 500 }));
    expect(err.code).toBe("timeout");
    expect(err.message).toContain("exceeded the 500 ms timeout");
    expect(Date.now() - started).toBeLessThan(20_000);
    expect((await s.execute("x")).value).toBe("5");
  });

  test("complete() and isComplete()", async () => {
    const s = await start();
    await s.execute("import os\nmy_variable = 1");
    expect(await s.complete("my_va")).toContain("my_variable");
    expect((await s.isComplete("for i in range(3):")).status).toBe("incomplete");
    expect((await s.isComplete("x = 1")).status).toBe("complete");
  });

  test("binary display data goes to a file, text stays inline", async () => {
    const s = await start();
    const r = await s.execute(
      "import awrepl, base64\nawrepl.emit({'text/plain': 'hi', 'image/png': base64.b64encode(b'\\x89PNG fake').decode()})",
    );
    expect(r.status).toBe("ok");
    expect(r.display.length).toBe(1);
    const item = r.display[0] ?? {};
    expect(item["text/plain"]).toBe("hi");
    expect(item["image/png"]).toStartWith(join(fixture.tmp.home, "display"));
    expect(existsSync(item["image/png"] as string)).toBe(true);
  });
});

describe("deadlines and closing while busy", () => {
  test("close() during a running cell ends it promptly and leaves no process", async () => {
    const s = await start({ timeoutMs: 0 });
    const pid = s.pid ?? 0;
    const running = s.execute("import time\nwhile True: time.sleep(0.01)");
    await new Promise((r) => setTimeout(r, 150));
    const t0 = Date.now();
    await s.close();
    expect((await rejection(running)).code).toBe("worker_closed");
    await waitFor(() => !alive(pid), 5000, "the worker to exit");
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  test("a wedged worker cannot hang variables(): timeout, then a fresh worker", async () => {
    const s = await start({ timeoutMs: 300, graceMs: 200 });
    // A stopped process answers nothing, like a worker wedged in a C call that holds the GIL.
    process.kill(s.pid ?? 0, "SIGSTOP");
    const err = await rejection(s.variables());
    expect(err.code).toBe("timeout");
    const r = await s.execute("1 + 1");
    expect(r.value).toBe("2");
    expect(r.notice).toContain("earlier state is gone");
  });

  test("a call waiting behind a busy one: its timeout covers the wait, and one that runs out never runs", async () => {
    const s = await start();
    const release = join(fixture.tmp.home, "release");
    let holding = false;
    const holder = s.execute(`import os, time\nprint('holding', flush=True)\nwhile not os.path.exists(${JSON.stringify(release)}): time.sleep(0.02)`, {
      timeoutMs: 0,
      onOutput: () => void (holding = true),
    });
    await waitFor(() => holding, 10_000, "the first cell to run");
    const queued = await s.execute("ran = True", { timeoutMs: 300 });
    expect(queued.status).toBe("timeout");
    expect(queued.exception).toContain("never ran");
    expect(queued.exception).toContain("300 ms timeout");
    // Withdrawn while it waits: interrupted, and it never runs either.
    const abort = new AbortController();
    const withdrawn = s.execute("ran = True", { timeoutMs: 0, signal: abort.signal });
    abort.abort();
    expect((await withdrawn).status).toBe("interrupted");
    writeFileSync(release, "");
    expect((await holder).status).toBe("ok");
    expect((await s.execute("'ran' in globals()")).value).toBe("False");
  });
});

/**
 * SIGKILLs the worker `pid` (and its process group: the runtime's stdin watchdog holds its stdin too)
 * and waits, without giving the event loop a turn, until nothing of the group runs: the session has
 * not seen the exit when its next call comes, as a supervisor under load may not. Linux only (/proc).
 */
function killUnseen(pid: number): void {
  process.kill(-pid, "SIGKILL");
  const deadline = performance.now() + 5000;
  while (groupRuns(pid)) if (performance.now() > deadline) throw new Error(`process group ${pid} did not die within 5 s`);
}

/** True while a process of group `pgid` runs: not a zombie, or a zombie leader whose other threads still exit (its files still open). */
function groupRuns(pgid: number): boolean {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "latin1");
    } catch {
      continue; // gone meanwhile
    }
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(pgrp) !== pgid) continue;
    if (state !== "Z") return true;
    try {
      if (readdirSync(`/proc/${entry}/task`).length > 1) return true;
    } catch {
      // reaped meanwhile
    }
  }
  return false;
}

// Linux only: the tests wait for the killed worker through /proc (gone, not just signalled) before the
// session can have seen its exit; other systems have no /proc to tell.
describe.skipIf(process.platform !== "linux")("a worker gone before the session saw its exit", () => {
  test("the next cell runs in a fresh worker restored from the autosave, not reported as died", async () => {
    const s = await start({ autosave: true });
    await s.execute("kept = [1, 2, 3]");
    await s.variables(); // queued behind the autosave: the snapshot is on disk now
    killUnseen(s.pid ?? 0);
    const r = await s.execute("kept");
    expect(r.status).toBe("ok");
    expect(r.value).toBe("[1, 2, 3]");
    expect(r.notice).toContain("was killed by signal SIGKILL; this call ran in a fresh worker restored from its snapshot of");
    expect(r.restored?.restored).toEqual(["kept"]);
    expect((await s.execute("kept")).notice).toBeUndefined();
  });

  test("without a snapshot the cell runs in a fresh worker and the result says the state is gone", async () => {
    const s = await start();
    await s.execute("x = 1");
    killUnseen(s.pid ?? 0);
    const r = await s.execute("'x' in globals()");
    expect(r.status).toBe("ok");
    expect(r.value).toBe("False");
    expect(r.notice).toContain("earlier state is gone");
  });

  test("variables() goes to the fresh worker too; the next cell is told", async () => {
    const s = await start();
    await s.execute("x = 1");
    killUnseen(s.pid ?? 0);
    expect(await s.variables()).toEqual({});
    expect((await s.execute("1")).notice).toContain("earlier state is gone");
  });

  test("a cell whose own worker dies is still died, and runs once", async () => {
    const s = await start();
    const marker = join(fixture.tmp.home, "ran");
    const r = await s.execute(`open(${JSON.stringify(marker)}, "a").write("x")\nimport os; os.kill(os.getpid(), 9)`);
    expect(r.status).toBe("died");
    expect(readFileSync(marker, "utf8")).toBe("x");
  });
});

describe("the loss of state is always said", () => {
  test("a tiny output limit cannot cut the timeout's message off: it is in the notice", async () => {
    const s = await start({ timeoutMs: 300, graceMs: 200, maxOutputBytes: 50 });
    // The sleep lets the printed text ship before the C loop holds the GIL.
    const r = await s.execute("import time\nprint('z' * 500, flush=True)\ntime.sleep(0.2)\nsum(range(10**12))", { timeoutMs: 600 });
    expect(r.status).toBe("timeout");
    expect(r.truncated).toBe(true);
    expect(r.notice).toEndWith("The session's state was lost. The next call starts a fresh worker.");
  });
});

describe("the runtime cache", () => {
  test("a damaged bytecode cache is dropped and the source runs instead", async () => {
    const first = await start({}, "first");
    await first.close();
    const dir = join(fixture.tmp.home, "runtime");
    const pyc = readdirSync(dir).find((f) => f.endsWith(".pyc"));
    expect(pyc).toBeDefined();
    writeFileSync(join(dir, pyc as string), "garbage");
    const s = await start({}, "second");
    expect((await s.execute("6 * 7")).value).toBe("42");
  });
});

describe("callbacks that throw", () => {
  test("an onOutput that throws does not break the cell or the session", async () => {
    const s = await start();
    const r = await s.execute("print('a')", {
      onOutput: () => {
        throw new Error("boom");
      },
    });
    expect(r.status).toBe("ok");
    expect(r.stdout).toBe("a\n");
    expect((await s.execute("1")).value).toBe("1");
  });
});

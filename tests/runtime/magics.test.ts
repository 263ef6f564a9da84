// Notebook habits in cells (!cmd, %pip, %cd, %env, %time), the plain Python they must never
// reinterpret, and the hint a missing module gets; against the real runtime.py. %pip installs a
// wheel this test builds into a virtual environment it creates, offline (--no-index --find-links).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { alive, closeAll, type ExecOutcome, PYTHON, Runtime, tempHome, waitFor } from "../harness/mod.ts";

afterEach(closeAll);

const tmp = tempHome("awrepl-magics-");
afterAll(() => tmp.remove());

/** The traceback of a failed cell, joined. */
function tracebackOf(out: ExecOutcome): string {
  return ((out.error?.traceback as string[] | undefined) ?? []).join("");
}

describe("shell commands: !cmd", () => {
  test("its output is captured at fd level; a non-zero status is said and kept in _exit_code", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const ok = await rt.exec("!echo hello from the shell");
    expect(ok.done.status).toBe("ok");
    expect(ok.rawStdout).toBe("hello from the shell\n");
    const bad = await rt.exec("x = 1\n!echo oops >&2; exit 3\ny = x + 1\ny");
    expect(bad.done.status).toBe("ok"); // as in IPython, a failing command does not fail the cell
    expect(bad.rawStderr).toBe("oops\n");
    expect(bad.stderr).toContain("[awrepl] !echo oops >&2; exit 3 exited with status 3");
    expect(bad.result).toBe("2");
    expect((await rt.exec("_exit_code")).result).toBe("3");
  });

  test("inside a block, indented, as IPython allows; its continuation lines keep the cell's line numbers", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const out = await rt.exec("for i in range(2):\n    !echo round \\\n      $HOME\nz = 1\n1/0");
    expect(out.rawStdout).toBe(`round ${process.env.HOME}\n`.repeat(2));
    expect(out.error?.ename).toBe("ZeroDivisionError");
    expect(tracebackOf(out)).toContain("line 5, in <module>\n    1/0");
  });

  test("a habit line a block needed indented: the IndentationError shows the line as typed", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const out = await rt.exec("if True:\n!ls");
    expect(out.error?.ename).toBe("IndentationError");
    expect(tracebackOf(out)).toContain("line 2\n    !ls\n");
    expect(tracebackOf(out)).not.toContain("__awrepl_habit__");
  });

  test("an interrupt stops the command and what it started, and ends the cell", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const pidFile = join(tmp.home, "sleep.pid");
    const id = rt.newId("shell");
    const start = rt.events.length;
    rt.send({ type: "execute", id, code: `!sleep 60 & echo $! > ${pidFile}; wait` });
    await waitFor(
      () => {
        try {
          return readFileSync(pidFile, "utf8").trim() !== "";
        } catch {
          return false;
        }
      },
      10_000,
      "the command's pid file",
    );
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(alive(pid)).toBe(true);
    rt.send({ type: "interrupt", id });
    await rt.waitFor((e) => e.event === "done" && e.id === id, 10_000, start);
    const error = rt.events.slice(start).find((e) => e.event === "error" && e.id === id);
    expect(error?.ename).toBe("KeyboardInterrupt");
    await waitFor(() => !alive(pid) || readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") === true, 5_000, "the sleep to end");
    expect((await rt.exec("'next'")).result).toBe("'next'");
  });
});

describe("%cd, %env, %time", () => {
  test("%cd DIR changes the worker's directory and prints it; %cd - goes back", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const sub = join(tmp.home, "sub dir");
    mkdirSync(sub, { recursive: true });
    const out = await rt.exec(`%cd ${sub}\nimport os\nos.getcwd()`);
    expect(out.stdout).toBe(`${realpathSync(sub)}\n`);
    expect(out.result).toBe(JSON.stringify(realpathSync(sub)).replace(/"/g, "'"));
    expect((await rt.exec("%cd -\nos.getcwd()")).result).toBe(`'${realpathSync(tmp.home)}'`);
    const missing = await rt.exec("x = 1\n%cd /no/such/dir");
    expect(missing.error?.ename).toBe("FileNotFoundError");
    expect(tracebackOf(missing)).toContain("line 2, in <module>\n    %cd /no/such/dir\n"); // the traceback names the line
  });

  test("%env NAME=VALUE sets a variable commands see; %env NAME gives it; %env lists them", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const set = await rt.exec("%env GREETING=hello world\n!echo $GREETING");
    expect(set.stdout).toBe("env: GREETING=hello world\n");
    expect(set.rawStdout).toBe("hello world\n");
    expect((await rt.exec("%env GREETING")).result).toBe("'hello world'");
    expect((await rt.exec("%env")).stdout).toContain("\nGREETING=hello world\n");
    const missing = await rt.exec("%env NO_SUCH_VARIABLE_X");
    expect(missing.error?.ename).toBe("UsageError");
    expect(missing.error?.evalue).toContain("NO_SUCH_VARIABLE_X");
  });

  test("%time runs its statement in the namespace, prints CPU and wall time, gives an expression's value", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const out = await rt.exec("%time total = sum(range(1000))\n%time total * 2");
    expect(out.stdout).toMatch(/^CPU times: user .+, sys: .+, total: .+\nWall time: .+\nCPU times: .+\nWall time: .+\n$/);
    expect(out.result).toBe("999000");
    expect((await rt.exec("total")).result).toBe("499500");
    const failing = await rt.exec("%time 1/0");
    expect(failing.error?.ename).toBe("ZeroDivisionError");
    expect(tracebackOf(failing)).toContain("line 1, in <module>\n    %time 1/0\n");
  });

  test("any other % line (or !!, %%) is a clear error listing what is supported, and nothing of the cell runs", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    for (const line of ["%matplotlib inline", "%%time", "!!ls", "    %load_ext autoreload"]) {
      const out = await rt.exec(`ran = 1\n${line.startsWith(" ") ? "if True:\n" : ""}${line}`);
      expect(out.error?.ename).toBe("UsageError");
      expect(out.error?.evalue).toContain("!cmd, %pip, %cd, %env, %time");
      expect(out.error?.evalue).toContain(line.trim().split(" ")[0] as string);
      expect((await rt.exec("'ran' in globals()")).result).toBe("False");
    }
  });
});

describe("plain Python is never reinterpreted", () => {
  const cases: [string, string, string][] = [
    ["a comparison", "a, b = 1, 2\na != b", "True"],
    ["the modulo operator", "x, y = 7, 3\nx % y", "1"],
    ["%-formatting", '"%d items" % 3', "'3 items'"],
    ["! and % lines inside a string", 's = """\n!not a command\n%not a magic\n"""\ns.splitlines()', "['', '!not a command', '%not a magic']"],
    ["% starting a bracketed continuation line", "v = (10\n% 4)\nv", "2"],
    ["% after a backslash continuation", "w = 10 \\\n% 3\nw", "1"],
    ["a comment mentioning !ls", "# !ls and %pip are habits\n5", "5"],
    ["% after a backslash-newline inside a string", "t = 'a\\\n%b'\nt", "'a%b'"],
  ];
  for (const [what, code, value] of cases) {
    test(what, async () => {
      const rt = await Runtime.start({ cwd: tmp.home });
      const out = await rt.exec(code);
      expect(out.error).toBeNull();
      expect(out.result).toBe(value);
    });
  }

  test("is_complete reads habit lines as IPython does", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const complete = await rt.request({ type: "is_complete", code: "!ls -l" });
    expect(complete.done.status).toBe("complete");
    const open = await rt.request({ type: "is_complete", code: "if True:\n    %cd /tmp" });
    expect(open.done.status).toBe("incomplete");
  });
});

describe("a missing module", () => {
  const real = realpathSync(PYTHON);
  test("a top-level module the cell imports gets one line naming the interpreter and how to install into it", async () => {
    const rt = await Runtime.start({ cwd: tmp.home });
    const out = await rt.exec("import json\nimport no_such_module_abc");
    expect(out.error?.ename).toBe("ModuleNotFoundError");
    const hints = tracebackOf(out).split("\n").filter((l) => l.startsWith("[awrepl]"));
    expect(hints.length).toBe(1);
    expect(hints[0]).toContain(real);
    expect(hints[0]).toMatch(/Python 3\.\d+\.\d+/);
    expect(hints[0]).toContain("`%pip install no_such_module_abc`");
    const renamed = await rt.exec("from sklearn_is_not_here import x");
    expect(tracebackOf(renamed)).toContain("%pip install sklearn_is_not_here");
  });

  test("not for a submodule, a name missing from a module, or a module a library imports", async () => {
    const dir = join(tmp.home, "lib_dir");
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "uses_missing.py"), "import missing_dependency_xyz\n");
    const rt = await Runtime.start({ cwd: dir });
    for (const code of ["import json.no_such_part", "from json import no_such_name", "import uses_missing"]) {
      const out = await rt.exec(code);
      expect(out.error).not.toBeNull();
      expect(tracebackOf(out)).not.toContain("[awrepl]");
    }
  });
});

describe("%pip", () => {
  const venv = join(tmp.home, "venv");
  const wheels = join(tmp.home, "wheels");
  beforeAll(() => {
    execFileSync(PYTHON, ["-m", "venv", venv], { timeout: 120_000 });
    mkdirSync(wheels, { recursive: true });
    // A wheel is a zip: the package, its METADATA, WHEEL and RECORD (what pip reads offline).
    const build = [
      "import sys, zipfile",
      "files = {'tinypkg_awrepl/__init__.py': 'ANSWER = 42\\n',",
      "  'tinypkg_awrepl-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: tinypkg-awrepl\\nVersion: 1.0\\n',",
      "  'tinypkg_awrepl-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n'}",
      "rec = 'tinypkg_awrepl-1.0.dist-info/RECORD'",
      "with zipfile.ZipFile(sys.argv[1] + '/tinypkg_awrepl-1.0-py3-none-any.whl', 'w') as z:",
      "    for k, v in files.items(): z.writestr(k, v)",
      "    z.writestr(rec, ''.join(k + ',,\\n' for k in files) + rec + ',,\\n')",
    ].join("\n");
    execFileSync(PYTHON, ["-c", build, wheels]);
  }, 180_000);

  test("installs with the session's own interpreter (sys.executable -m pip); the next cell imports it", async () => {
    const python = join(venv, "bin", "python");
    const rt = await Runtime.start({ python, cwd: tmp.home, env: { PIP_DISABLE_PIP_VERSION_CHECK: "1" } });
    const install = await rt.exec(`%pip install --no-index --find-links ${wheels} tinypkg-awrepl`, 120_000);
    expect(install.done.status).toBe("ok");
    expect(install.rawStdout).toContain("Successfully installed tinypkg-awrepl-1.0");
    const used = await rt.exec("import tinypkg_awrepl, sys\n(tinypkg_awrepl.ANSWER, tinypkg_awrepl.__file__.startswith(sys.prefix), sys.prefix)");
    expect(used.result).toBe(`(42, True, '${venv}')`);
    const version = await rt.exec("%pip --version", 60_000);
    expect(version.rawStdout).toContain(join(venv, "lib")); // that venv's pip, not another on PATH
  }, 180_000);

  const managed = execFileSync(PYTHON, ["-c", "import sysconfig, os; p = os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED'); print(p if os.path.isfile(p) else '')"], {
    encoding: "utf8",
  }).trim();
  test.skipIf(!managed)(`an externally managed interpreter (PEP 668) refusing the install gets the hint to use --venv${managed ? "" : ` [skipped: ${PYTHON} is not externally managed]`}`, async () => {
    const rt = await Runtime.start({ cwd: tmp.home, env: { PIP_DISABLE_PIP_VERSION_CHECK: "1" } });
    const out = await rt.exec(`%pip install --no-index --find-links ${wheels} tinypkg-awrepl`, 120_000);
    expect(out.done.status).toBe("ok");
    expect(out.rawStderr).toContain("externally-managed-environment");
    expect(out.stderr).toContain("externally managed (PEP 668");
    expect(out.stderr).toContain("--venv DIR");
    expect(out.stderr).toContain(realpathSync(PYTHON));
    const missing = await rt.exec("import tinypkg_awrepl");
    expect(tracebackOf(missing)).toContain("--venv DIR");
  }, 180_000);
});

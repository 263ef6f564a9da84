// How a supervisor-held session is made, end to end through the binary: with the environment of the
// call that creates it (not of whoever started the supervisor), and, once stopped and restored from
// its snapshot, with the interpreter, directory and environment it was created with.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { run, withHome } from "../harness/mod.ts";

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "awrepl-spec-"));
  dirs.push(d);
  return d;
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("a new session's environment is its creator's", () => {
  test("two callers with different FOO create two sessions; each sees its own; PYTHONPATH works for imports", () =>
    withHome(async (h) => {
      const mod = tempDir();
      writeFileSync(join(mod, "awrepl_spec_mod.py"), "V = 17\n");
      // This call starts the supervisor, with FOO=first and a variable nobody else has.
      const a = await run(["-s", "a", "run", "import os; os.environ.get('FOO'), os.environ.get('ONLY_STARTER')"], {
        home: h,
        env: { FOO: "first", ONLY_STARTER: "yes" },
      });
      expect(a.stdout).toBe("('first', 'yes')\n");
      const b = await run(["-s", "b", "run", "import os; os.environ.get('FOO'), os.environ.get('ONLY_STARTER')"], {
        home: h,
        env: { FOO: "second", ONLY_STARTER: undefined },
      });
      expect(b.stderr).toBe("");
      expect(b.stdout).toBe("('second', None)\n");
      // An existing session keeps the environment it was created with.
      const again = await run(["-s", "a", "run", "os.environ.get('FOO')"], { home: h, env: { FOO: "third" } });
      expect(again.stdout).toBe("'first'\n");
      const imp = await run(["-s", "c", "run", "import awrepl_spec_mod; awrepl_spec_mod.V"], { home: h, env: { PYTHONPATH: mod } });
      expect(imp.stderr).toBe("");
      expect(imp.stdout).toBe("17\n");
      // awrepl's own settings are not passed on as the session's environment; its home is.
      const own = await run(["-s", "d", "run", "import os; [k for k in os.environ if k.startswith('AWREPL_')]"], { home: h });
      expect(own.stdout).toBe("['AWREPL_HOME']\n");
    }));
});

describe("a session restored from its snapshot is made as it was created", () => {
  test("interpreter, directory and environment come back after daemon stop; an explicit --python still wins", () =>
    withHome(async (h) => {
      const where = tempDir();
      const other = "/root/.pyenv/versions/3.12.1/bin/python3";
      const created = await run(
        ["-s", "p", "run", "import os, sys\nx = 5\ndef f(a):\n    return a * x\nsys.executable"],
        { home: h, cwd: where, env: { AWREPL_PYTHON: "/usr/bin/python3", FOO: "made" } },
      );
      expect(created.stderr).toBe("");
      expect(created.stdout).toBe("'/usr/bin/python3'\n");
      expect((await run(["daemon", "stop"], { home: h })).code).toBe(0);
      // Saved beside the snapshot, private: the environment may hold secrets.
      expect(statSync(join(h, "snapshots", "p", "spec.json")).mode & 0o777).toBe(0o600);
      // The next caller has another default interpreter, directory and environment.
      const back = await run(["-s", "p", "run", "sys.executable, f(2), os.getcwd(), os.environ.get('FOO')"], {
        home: h,
        cwd: "/",
        env: { AWREPL_PYTHON: existsSync(other) ? other : "/usr/bin/python3.11", FOO: "caller" },
      });
      expect(back.stderr).toContain("restored 4 name(s)");
      expect(back.stdout).toBe(`('/usr/bin/python3', 10, ${JSON.stringify(realpathSync(where)).replace(/"/g, "'")}, 'made')\n`);
      if (!existsSync(other)) return;
      expect((await run(["daemon", "stop"], { home: h })).code).toBe(0);
      const explicit = await run(["-s", "p", "--python", other, "run", "import sys; sys.executable"], { home: h });
      expect(explicit.stdout).toBe(`'${other}'\n`);
    }));
});

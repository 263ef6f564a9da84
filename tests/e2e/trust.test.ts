// A checkout you did not write cannot make `awrepl run` execute a command of its choosing: a project
// awrepl.jsonc that sets the interpreter is used only after `awrepl trust` (README, "Security").
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PYTHON, run, withHome } from "../harness/mod.ts";

describe("awrepl trust", () => {
  test("a planted interpreter is ignored with a notice; after `awrepl trust` it is used; an edit revokes it", () =>
    withHome(async (home) => {
      const project = join(home, "checkout");
      mkdirSync(project);
      const planted = join(project, "planted.sh");
      // The "interpreter" leaves a mark, then runs Python, so a trusted run still works.
      writeFileSync(planted, `#!/bin/sh\ntouch "${join(project, "PWNED")}"\nexec ${PYTHON} "$@"\n`);
      chmodSync(planted, 0o755);
      writeFileSync(join(project, "awrepl.jsonc"), `{ "python": "${planted}", "timeoutMs": 20000 }`);
      const env = { AWREPL_PYTHON: undefined };

      for (const args of [["run", "1 + 1"], ["-s", "p", "run", "1 + 1"]]) {
        const r = await run(args, { home, cwd: project, env });
        expect(r.code).toBe(0);
        expect(r.stdout).toBe("2\n");
        expect(r.stderr).toContain(`awrepl: ignoring "python" in ${join(project, "awrepl.jsonc")}: it is not trusted`);
        expect(existsSync(join(project, "PWNED"))).toBe(false);
      }

      const t = await run(["trust"], { home, cwd: project, env });
      expect(t.code).toBe(0);
      expect(t.stdout).toContain(`Trusted ${join(project, "awrepl.jsonc")}`);
      const trusted = await run(["run", "1 + 1"], { home, cwd: project, env });
      expect(trusted.stdout).toBe("2\n");
      expect(trusted.stderr).toBe("");
      expect(existsSync(join(project, "PWNED"))).toBe(true);

      writeFileSync(join(project, "awrepl.jsonc"), `{ "python": "${planted}" }`);
      const edited = await run(["run", "1"], { home, cwd: project, env });
      expect(edited.stderr).toContain("it changed since you trusted it");
    }), 60_000);

  test("trust names a missing file plainly", () =>
    withHome(async (home) => {
      const r = await run(["trust", join(home, "nowhere")], { home });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("No such file or directory");
    }), 30_000);
});

// %pip in a sandbox without a network says why it failed (issue 28's follow-up): the sandbox launch
// tells the worker what network it has (AWREPL_SANDBOX_NETWORK), and the runtime's %pip, when pip
// fails there, adds the flags that would give it one. Real bubblewrap, the compiled binary, and pip
// kept short (--retries 0 --timeout 2); nothing leaves the machine (the sandbox has no network).
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { realpathSync } from "node:fs";
import { cleanupHome, requireBwrap, run, tempHome } from "../harness/mod.ts";

const SANDBOX = ["--sandbox", "--env", "AWREPL_E2E_HOME"];
const NOTE = "this session's sandbox has no network; start it with --sandbox-net or --sandbox-allow pypi.org --sandbox-allow files.pythonhosted.org";

let home: string;
let project: { home: string; remove(): void };
let dir: string;
beforeEach(() => {
  requireBwrap();
  home = tempHome("awrepl-e2e-").home;
  project = tempHome("awrepl-project-");
  dir = realpathSync(project.home);
});
afterEach(async () => {
  await cleanupHome(home);
  project.remove();
});

describe("%pip in a sandbox without a network", () => {
  test("a failing download says the sandbox has no network and how to give it one", async () => {
    const r = await run([...SANDBOX, "run", "%pip download --retries 0 --timeout 2 --no-deps --disable-pip-version-check -d /tmp/dl six"], { home, cwd: dir, timeoutMs: 60_000 });
    expect(r.stderr).toContain(NOTE);
    expect(r.stderr).toContain("--no-index --find-links DIR");
  });

  test("the variable is the runtime's alone: neither a cell nor a !cmd child sees it", async () => {
    const r = await run([...SANDBOX, "run", "import os\nprint(repr(os.environ.get('AWREPL_SANDBOX_NETWORK')))\n!env | grep -c AWREPL_SANDBOX_NETWORK || true"], { home, cwd: dir });
    expect(r.stdout).toContain("None");
    expect(r.stdout).not.toContain("AWREPL_SANDBOX_NETWORK=");
    expect(r.stdout.trim().split("\n").at(-1)).toBe("0");
  });

  test("outside a sandbox a failing pip gets no such line", async () => {
    const r = await run(["run", "%pip download --retries 0 --timeout 2 --no-deps --no-index --disable-pip-version-check -d dl no-such-package-awrepl"], { home, cwd: dir, timeoutMs: 60_000 });
    expect(r.stderr).toContain("[awrepl] pip");
    expect(r.stderr).not.toContain("sandbox has no network");
  });
});

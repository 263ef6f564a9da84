// `--venv DIR`, offline: the session runs that virtual environment's python, made on first use with
// the interpreter it would otherwise run (here the test's), saved in the session's spec so that a
// re-created session runs it again with what was installed into it; under --sandbox the directory is
// writable, so an install from a cell persists. The package is a wheel this test writes itself and
// installs with `pip --no-index`: no network, no index.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExitCode } from "../../lib/core/errors.ts";
import { PYTHON, requireBwrap, run, withHome } from "../harness/mod.ts";

const cwd = tmpdir();

/** A pure-Python wheel of `awrepl_probe` 1.0 (one module, `VALUE = 42`), written with zipfile. */
function buildWheel(dir: string): string {
  const wheel = join(dir, "awrepl_probe-1.0-py3-none-any.whl");
  const script = join(dir, "build_wheel.py");
  writeFileSync(
    script,
    `import base64, hashlib, sys, zipfile
files = {
  "awrepl_probe.py": "VALUE = 42\\n",
  "awrepl_probe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\\nName: awrepl_probe\\nVersion: 1.0\\n",
  "awrepl_probe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = []
with zipfile.ZipFile(sys.argv[1], "w") as z:
  for name, text in files.items():
    data = text.encode()
    z.writestr(name, data)
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(data)}")
  record.append("awrepl_probe-1.0.dist-info/RECORD,,")
  z.writestr("awrepl_probe-1.0.dist-info/RECORD", "\\n".join(record) + "\\n")
`,
  );
  const done = Bun.spawnSync([PYTHON, script, wheel]);
  if (done.exitCode !== 0) throw new Error(`building the test wheel failed: ${done.stderr.toString()}`);
  return wheel;
}

const install = (wheel: string) =>
  `import subprocess, sys\nr = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--disable-pip-version-check", "-q", ${
    JSON.stringify(wheel)
  }], capture_output=True, text=True)\nr.returncode, r.stderr[-300:]`;

describe("--venv", () => {
  test("made on first use with the session's interpreter; an install stays; a re-created session runs it again", async () => {
    await withHome(async (home) => {
      const dir = mkdtempSync(join(tmpdir(), "awrepl-venv-"));
      const venv = join(dir, "env");
      const wheel = buildWheel(dir);
      const first = await run(["-s", "v", "--venv", venv, "run", "import sys; sys.prefix, sys.base_prefix == sys.prefix"], { home, cwd });
      expect(first).toMatchObject({ code: 0, stdout: `(${JSON.stringify(venv).replace(/"/g, "'")}, False)\n` });
      expect((await run(["-s", "v", "run", install(wheel)], { home, cwd })).stdout).toBe("(0, '')\n");
      const [row] = JSON.parse((await run(["sessions", "--json"], { home, cwd })).stdout) as { python: string }[];
      expect(row?.python).toContain(`venv ${venv}`);
      expect(row?.python.startsWith(realpathSync(PYTHON))).toBe(true);
      // Re-created from its saved spec (no --venv on this call): the same venv, with the package.
      expect((await run(["daemon", "stop"], { home, cwd })).code).toBe(0);
      expect((await run(["-s", "v", "run", "import awrepl_probe, sys; awrepl_probe.VALUE, sys.prefix"], { home, cwd })).stdout).toBe(`(42, '${venv}')\n`);
      // A directory that is something else is never taken for a venv.
      writeFileSync(join(dir, "not-a-venv"), "");
      const bad = await run(["--venv", dir, "run", "1"], { home, cwd });
      expect(bad.code).toBe(ExitCode.usage);
      expect(bad.stderr).toContain(dir);
    });
  });

  test("under --sandbox the venv is writable: a cell's install persists", async () => {
    requireBwrap();
    await withHome(async (home) => {
      const dir = mkdtempSync(join(tmpdir(), "awrepl-venv-sb-"));
      const venv = join(dir, "env");
      const wheel = buildWheel(dir);
      // The wheel is read from its directory: bound read-only, as every path outside the writable ones.
      const installed = await run(["--sandbox", "--venv", venv, "run", install(wheel)], { home, cwd: dir });
      expect(installed).toMatchObject({ code: 0, stdout: "(0, '')\n" });
      expect((await run(["--sandbox", "--venv", venv, "run", "import awrepl_probe; awrepl_probe.VALUE"], { home, cwd: dir })).stdout).toBe("42\n");
    });
  });

  test("a venv a sandbox could write is refused outside a sandbox: a python planted in it never runs", async () => {
    requireBwrap();
    await withHome(async (home) => {
      const dir = mkdtempSync(join(tmpdir(), "awrepl-venv-plant-"));
      const venv = join(dir, "env");
      const marker = join(tmpdir(), `awrepl-venv-planted-${process.pid}`);
      // From inside the sandbox: bin/python replaced (rename over the symlink) by a script that would
      // leave a marker, then run the real interpreter.
      const plant = `import os, sys\np = os.path.join(sys.prefix, "bin", "python")\nopen(p + ".new", "w").write("#!/bin/sh\\ntouch ${marker}\\nexec ${
        realpathSync(PYTHON)
      } \\"$@\\"\\n")\nos.chmod(p + ".new", 0o755)\nos.replace(p + ".new", p)\n'planted'`;
      expect((await run(["--sandbox", "--venv", venv, "run", plant], { home, cwd: dir })).stdout).toBe("'planted'\n");
      for (const args of [["--venv", venv, "run", "1"], ["-s", "outside", "--venv", venv, "run", "1"]]) {
        const refused = await run(args, { home, cwd });
        expect(refused.code).toBe(ExitCode.usage);
        expect(refused.stderr).toContain("a sandboxed session could write");
        expect(refused.stderr).toContain(venv);
      }
      expect(existsSync(marker)).toBe(false);
    });
  });
});

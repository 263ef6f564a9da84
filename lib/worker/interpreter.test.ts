import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, symlinkSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AwreplError } from "../core/errors.ts";
import { chooseCommand, commandArgv, forgetResolvedInterpreters, looksLikePython, resolveInterpreter, shellQuote, splitCommandLine, versionSelectors } from "./interpreter.ts";
import { PYTHON, tempHome } from "../../tests/harness/mod.ts";
import { markSandboxWritten } from "../settings/sandbox_written.ts";

let tmp: ReturnType<typeof tempHome>;
beforeEach(() => {
  tmp = tempHome();
});
afterEach(() => tmp.remove());

/** An executable file at `path` (its content does not matter for chooseCommand). */
function fakeExecutable(path: string, content = "#!/bin/sh\nexit 0\n"): string {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, content);
  chmodSync(path, 0o755);
  return path;
}

describe("splitCommandLine", () => {
  test("splits words and honours simple quoting", () => {
    expect(splitCommandLine("python3")).toEqual(["python3"]);
    expect(splitCommandLine("  docker exec -i box  python3 ")).toEqual(["docker", "exec", "-i", "box", "python3"]);
    expect(splitCommandLine(`ssh 'my host' "py thon" a\\ b`)).toEqual(["ssh", "my host", "py thon", "a b"]);
    expect(splitCommandLine(`"a \\"q\\" \\\\ $x"`)).toEqual([`a "q" \\ $x`]);
    expect(splitCommandLine(`'it'"'"'s'`)).toEqual(["it's"]);
    expect(splitCommandLine(`x ''`)).toEqual(["x", ""]);
  });

  test("rejects empty commands and unterminated quotes", () => {
    for (const bad of ["", "   ", "'open", '"open']) {
      expect(() => splitCommandLine(bad)).toThrow(AwreplError);
    }
  });

  test("shellQuote round-trips through splitCommandLine", () => {
    for (const word of ["plain", "with space", "it's", `q"uote`, "$HOME", "import os;exec(1)"]) {
      expect(splitCommandLine(shellQuote(word))).toEqual([word]);
    }
  });
});

describe("chooseCommand", () => {
  const noPath = { PATH: "" };

  test("follows the documented order (README, Environment and configuration)", () => {
    const venv = join(tmp.home, "venv");
    fakeExecutable(join(venv, "bin", "python"));
    const project = join(tmp.home, "project");
    fakeExecutable(join(project, ".venv", "bin", "python"));
    const bin = join(tmp.home, "bin");
    fakeExecutable(join(bin, "python3"));
    fakeExecutable(join(bin, "python"));
    const env = { PATH: bin, VIRTUAL_ENV: venv, AWREPL_PYTHON: "envpy" };
    expect(chooseCommand({ python: "flagpy", configPython: "cfgpy", env, cwd: project })).toEqual({ command: "flagpy", source: "option" });
    expect(chooseCommand({ configPython: "cfgpy", env, cwd: project }).source).toBe("AWREPL_PYTHON");
    const noEnvVar = { PATH: bin, VIRTUAL_ENV: venv };
    expect(chooseCommand({ configPython: "cfgpy", env: noEnvVar, cwd: project }).command).toBe("cfgpy");
    expect(chooseCommand({ env: noEnvVar, cwd: project }).command).toBe(join(venv, "bin", "python"));
    expect(chooseCommand({ env: { PATH: bin }, cwd: project }).command).toBe(join(project, ".venv", "bin", "python"));
    expect(chooseCommand({ env: { PATH: bin }, cwd: tmp.home }).command).toBe(join(bin, "python3"));
  });

  test("where a sandbox could write, $VIRTUAL_ENV, ./.venv, a PATH entry and a shim's version file are passed over, each said", async () => {
    const state = join(tmp.home, "state");
    const project = join(tmp.home, "project");
    fakeExecutable(join(project, ".venv", "bin", "python"));
    fakeExecutable(join(project, "venv", "bin", "python"));
    fakeExecutable(join(project, "bin", "python3"));
    const real = fakeExecutable(join(tmp.home, "bin", "python3"), "\x7fELF"); // not a script: no shim
    await markSandboxWritten(state, [project]);
    const env = { PATH: `${join(project, "bin")}:${join(tmp.home, "bin")}`, VIRTUAL_ENV: join(project, "venv") };
    const chosen = chooseCommand({ env, cwd: project, home: state });
    expect(chosen.command).toBe(real);
    expect(chosen.notices).toEqual([
      expect.stringContaining(`passed over $VIRTUAL_ENV's ${join(project, "venv", "bin", "python")}: it lies in ${project}`),
      expect.stringContaining(`passed over ${join(project, ".venv", "bin", "python")}`),
      expect.stringContaining(`passed over ${join(project, "bin", "python3")}`),
    ]);
    // Without the state directory's record (another AWREPL_HOME, or none) nothing is passed over.
    expect(chooseCommand({ env, cwd: project }).source).toBe("VIRTUAL_ENV");
    // A shim on PATH (a script) follows the nearest .python-version: one in a written tree is not followed.
    const shims = join(tmp.home, "shims");
    fakeExecutable(join(shims, "python3"), '#!/bin/sh\nexec pyenv exec python3 "$@"\n');
    writeFileSync(join(project, ".python-version"), "3.9\n");
    const viaShim = chooseCommand({ env: { PATH: `${shims}:${join(tmp.home, "bin")}` }, cwd: join(project, "bin"), home: state });
    expect(viaShim.command).toBe(real);
    expect(viaShim.notices?.[0]).toContain(`(it would follow ${join(project, ".python-version")})`);
    // Explicit choices are the user's word.
    expect(chooseCommand({ python: join(project, ".venv", "bin", "python"), env, cwd: project, home: state })).toEqual({ command: join(project, ".venv", "bin", "python"), source: "option" });
  });

  test("nothing found is no_interpreter", () => {
    try {
      chooseCommand({ env: noPath, cwd: tmp.home });
      throw new Error("expected a throw");
    } catch (err) {
      expect((err as AwreplError).code).toBe("no_interpreter");
    }
  });
});

describe("resolveInterpreter", () => {
  test("a local interpreter is resolved to its real executable and version", async () => {
    const i = await resolveInterpreter({ python: PYTHON, home: tmp.home });
    expect(i.local).toBe(true);
    expect(i.executable).toBeTruthy();
    expect(i.version).toMatch(/^3\.\d+\.\d+$/);
    expect(i.cacheTag).toMatch(/^cpython-3\d+$/);
    expect(i.argv[0]).toBe(i.executable as string);
  });

  test("a shim script is resolved once and cached in the state directory", async () => {
    const shim = fakeExecutable(join(tmp.home, "shims", "python3"), `#!/bin/sh\nexec ${PYTHON} "$@"\n`);
    const first = await resolveInterpreter({ python: shim, home: tmp.home });
    expect(first.executable).not.toBe(shim);
    expect(existsSync(first.executable as string)).toBe(true);
    const cache = JSON.parse(readFileSync(join(tmp.home, "runtime", "interpreters.json"), "utf8"));
    expect(Object.keys(cache).some((k) => k.startsWith(shim))).toBe(true);
    // Make the shim fail without changing its size or mtime: the cached answer must not run it again,
    // neither from this process's memory nor from the file.
    const { mtime } = statSync(shim);
    const original = readFileSync(shim, "utf8");
    writeFileSync(shim, `#!/bin/sh\nexit 9\n#`.padEnd(original.length, "#"));
    utimesSync(shim, mtime, mtime);
    forgetResolvedInterpreters();
    const again = await resolveInterpreter({ python: shim, home: tmp.home });
    expect(again.executable).toBe(first.executable as string);
  });

  test("a shim is asked again when a .python-version it reads changes (pyenv local)", async () => {
    // A fake pyenv: the shim picks its interpreter from the nearest .python-version.
    // Version b: a symlink, whose own path is what Python reports as sys.executable.
    const real = join(tmp.home, "versions", "b", "python3");
    mkdirSync(join(real, ".."), { recursive: true });
    symlinkSync(PYTHON, real);
    const shim = fakeExecutable(
      join(tmp.home, "shims", "python3"),
      `#!/bin/sh\nv=$(cat .python-version 2>/dev/null)\n[ "$v" = b ] && exec ${real} "$@"\nexec ${PYTHON} "$@"\n`,
    );
    const project = join(tmp.home, "project");
    mkdirSync(join(project, "sub"), { recursive: true });
    const before = await resolveInterpreter({ python: shim, home: tmp.home, cwd: project });
    writeFileSync(join(project, ".python-version"), "b\n");
    forgetResolvedInterpreters();
    const after = await resolveInterpreter({ python: shim, home: tmp.home, cwd: project });
    expect(before.executable).not.toBe(real);
    expect(after.executable).toBe(real);
    expect(versionSelectors(shim, join(project, "sub"), {})).toContain("b\n");
  });

  test("a path with spaces is one path: a found ./.venv, $VIRTUAL_ENV, or --python naming a file", async () => {
    const project = join(tmp.home, "My Project");
    const venvPython = join(project, ".venv", "bin", "python");
    mkdirSync(join(venvPython, ".."), { recursive: true });
    symlinkSync(PYTHON, venvPython);
    const env = { PATH: "/nonexistent" };
    const found = await resolveInterpreter({ cwd: project, env, home: tmp.home });
    expect(found.source).toBe(".venv");
    expect(found.argv).toEqual([venvPython]);
    const activated = await resolveInterpreter({ cwd: tmp.home, env: { ...env, VIRTUAL_ENV: join(project, ".venv") }, home: tmp.home });
    expect(activated.argv).toEqual([venvPython]);
    const given = await resolveInterpreter({ python: venvPython, cwd: tmp.home, env, home: tmp.home });
    expect(given.argv).toEqual([venvPython]);
    expect(commandArgv(`${venvPython} -X dev`, tmp.home)).toEqual([join(tmp.home, "My"), "Project/.venv/bin/python", "-X", "dev"]);
  });

  test("a changed shim is asked again (the key includes mtime and size)", async () => {
    const shim = fakeExecutable(join(tmp.home, "shims", "python3"), `#!/bin/sh\nexec ${PYTHON} "$@"\n`);
    await resolveInterpreter({ python: shim, home: tmp.home });
    writeFileSync(shim, "#!/bin/sh\necho broken >&2\nexit 9\n");
    await expect(resolveInterpreter({ python: shim, home: tmp.home })).rejects.toMatchObject({ code: "no_interpreter" });
  });

  test("wrappers like ssh or docker are remote; extra words are kept", async () => {
    for (const cmd of ["ssh host python3", "docker exec -i box python3", "kubectl exec -i pod -- python3"]) {
      const i = await resolveInterpreter({ python: cmd, home: tmp.home });
      expect(i.local).toBe(false);
      expect(i.argv).toEqual(splitCommandLine(cmd));
    }
    const flagged = await resolveInterpreter({ python: `${PYTHON} -X dev`, home: tmp.home });
    expect(flagged.local).toBe(true);
    expect(flagged.argv.slice(1)).toEqual(["-X", "dev"]);
  });

  test("a missing local interpreter is no_interpreter naming it", async () => {
    await expect(resolveInterpreter({ python: "/nonexistent/python3.99", home: tmp.home })).rejects.toMatchObject({ code: "no_interpreter" });
  });

  test("looksLikePython", () => {
    for (const yes of ["python", "python3", "python3.12", "/usr/bin/python3", "pypy3", "python.exe"]) expect(looksLikePython(yes)).toBe(true);
    for (const no of ["ssh", "docker", "env", "pythonista", "bash"]) expect(looksLikePython(no)).toBe(false);
  });
});

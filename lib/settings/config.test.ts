import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { builtinConfig, loadConfig } from "./config.ts";
import { markSandboxWritten } from "./sandbox_written.ts";
import { revoke, trust } from "./trust.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A state dir (user config) and a project dir, both private to the test. */
function setup(user?: string, project?: string) {
  const root = mkdtempSync(join(tmpdir(), "awrepl-config-"));
  dirs.push(root);
  const home = join(root, "home");
  const cwd = join(root, "project");
  mkdirSync(home);
  mkdirSync(cwd);
  if (user !== undefined) writeFileSync(join(home, "config.jsonc"), user);
  if (project !== undefined) writeFileSync(join(cwd, "awrepl.jsonc"), project);
  return { cwd, env: { AWREPL_HOME: home } as NodeJS.ProcessEnv };
}

describe("loadConfig", () => {
  test("built-ins apply when there are no files and no environment", async () => {
    expect(await loadConfig(setup())).toEqual(builtinConfig);
  });

  test("comments and trailing commas are accepted; project beats user beats built-ins", async () => {
    const { cwd, env } = setup(
      `{
        // the user's defaults
        "timeoutMs": 1000, "maxOutputBytes": 10, /* block */ "python": "/usr/bin/python3",
      }`,
      `{ "timeoutMs": 2000, }`,
    );
    const config = await loadConfig({ cwd, env });
    expect(config.timeoutMs).toBe(2000);
    expect(config.maxOutputBytes).toBe(10);
    expect(config.python).toBe("/usr/bin/python3");
    expect(config.graceMs).toBe(builtinConfig.graceMs);
  });

  test("the environment beats both files", async () => {
    const { cwd, env } = setup(`{"timeoutMs": 1000}`, `{"timeoutMs": 2000, "autosave": false}`);
    const config = await loadConfig({ cwd, env: { ...env, AWREPL_TIMEOUT_MS: "3000", AWREPL_AUTOSAVE: "1" } });
    expect(config.timeoutMs).toBe(3000);
    expect(config.autosave).toBe(true);
  });

  test("a malformed file is a usage error naming the file and the place", async () => {
    const { cwd, env } = setup(undefined, `{\n  "timeoutMs": 10\n  "graceMs": 5\n}`);
    await expect(loadConfig({ cwd, env })).rejects.toThrow(/awrepl\.jsonc is not valid JSONC: unexpected .* at line 3, column 3/);
    const err: unknown = await loadConfig({ cwd, env }).catch((e: unknown) => e);
    expect((err as { exitCode: number }).exitCode).toBe(2);
  });

  test("a __proto__ key (which the parser would swallow) is reported as unknown, at any depth", async () => {
    for (const text of [`{"__proto__": {"timeoutMs": 1}}`, `{"__proto__": 5}`, `{"sandbox": {"__proto__": {"network": true}}}`]) {
      const { cwd, env } = setup(text);
      await expect(loadConfig({ cwd, env })).rejects.toThrow(/Unknown config key "(sandbox\.)?__proto__" in .*config\.jsonc/);
    }
  });

  test("unknown keys and wrong types are named", async () => {
    await expect(loadConfig(setup(`{"timeout": 5}`))).rejects.toThrow(/Unknown config key "timeout"/);
    await expect(loadConfig(setup(`{"timeoutMs": "5 parsecs"}`))).rejects.toThrow(/"timeoutMs" .* must be a duration such as 500ms, 30s, 2m or 1h .*, not "5 parsecs"/);
    await expect(loadConfig(setup(`{"maxOutputBytes": "64Q"}`))).rejects.toThrow(/"maxOutputBytes" .* must be a size such as 65536, 64K, 1M or 2G .*, not "64Q"/);
    await expect(loadConfig(setup(`{"maxOutputBytes": true}`))).rejects.toThrow(/"maxOutputBytes" .* must be a non-negative number, not true/);
    await expect(loadConfig(setup(`[1]`))).rejects.toThrow(/must be a JSON object/);
  });

  test("a duration a timer cannot hold is refused, not left to fire at once", async () => {
    await expect(loadConfig(setup(`{"idleExitMs": 3000000000}`))).rejects.toThrow(/"idleExitMs" .* must be at most 2147483647 ms/);
    const { cwd, env } = setup();
    await expect(loadConfig({ cwd, env: { ...env, AWREPL_TIMEOUT_MS: "3000000000" } })).rejects.toThrow(/at most 2147483647 ms/);
  });

  test("a bad number in the environment names the variable and the value", async () => {
    const { cwd, env } = setup();
    await expect(loadConfig({ cwd, env: { ...env, AWREPL_TIMEOUT_MS: "abc" } })).rejects.toThrow(
      'AWREPL_TIMEOUT_MS must be a duration such as 500ms, 30s, 2m or 1h (a bare number is milliseconds), not "abc"',
    );
  });

  test("durations and sizes take units in files and the environment alike (units.ts)", async () => {
    const { cwd, env } = setup(`{"timeoutMs": "2m", "maxOutputBytes": "1M", "graceMs": "1.5s"}`);
    const config = await loadConfig({ cwd, env: { ...env, AWREPL_IDLE_EXIT_MS: "1h" } });
    expect(config).toMatchObject({ timeoutMs: 120_000, maxOutputBytes: 1_048_576, idleExitMs: 3_600_000, graceMs: 1500 });
    await expect(loadConfig({ cwd, env: { ...env, AWREPL_MAX_OUTPUT: "10 lines" } })).rejects.toThrow(
      'AWREPL_MAX_OUTPUT must be a size such as 65536, 64K, 1M or 2G (a bare number is bytes), not "10 lines"',
    );
  });
});

describe("a project file's interpreter needs trust", () => {
  test("ignored with a notice until `awrepl trust`; an edit needs trusting again; limits need no trust", async () => {
    const { cwd, env } = setup(`{"python": "/usr/bin/python3"}`, `{"python": "./planted.sh", "timeoutMs": 1234}`);
    const home = env.AWREPL_HOME as string;
    const untrusted = await loadConfig({ cwd, env });
    expect(untrusted.python).toBe("/usr/bin/python3"); // the user's own file still counts
    expect(untrusted.timeoutMs).toBe(1234);
    expect(untrusted.notices?.[0]).toContain(`ignoring "python" in ${join(cwd, "awrepl.jsonc")}: it is not trusted`);
    trust(home, join(cwd, "awrepl.jsonc"));
    const trusted = await loadConfig({ cwd, env });
    expect(trusted.python).toBe("./planted.sh");
    expect(trusted.notices).toBeUndefined();
    writeFileSync(join(cwd, "awrepl.jsonc"), `{"python": "./other.sh"}`);
    const changed = await loadConfig({ cwd, env });
    expect(changed.python).toBe("/usr/bin/python3");
    expect(changed.notices?.[0]).toContain("it changed since you trusted it");
    expect(revoke(home, join(cwd, "awrepl.jsonc"))).toBe(true);
    expect(revoke(home, join(cwd, "awrepl.jsonc"))).toBe(false);
  });
});

describe("a project file where a sandbox could write", () => {
  test("is passed over whole (limits too; malformed or a directory alike) until trusted by content", async () => {
    const { cwd, env } = setup(undefined, `{"timeoutMs": 1, "maxOutputBytes": 0}`);
    const home = env.AWREPL_HOME as string;
    chmodSync(home, 0o700); // the record lives in a private state directory, as awrepl makes it
    await markSandboxWritten(home, [cwd]);
    const planted = await loadConfig({ cwd, env });
    expect(planted.timeoutMs).toBe(builtinConfig.timeoutMs);
    expect(planted.maxOutputBytes).toBe(builtinConfig.maxOutputBytes);
    expect(planted.notices?.[0]).toContain(`passed over ${join(cwd, "awrepl.jsonc")}: it lies in ${cwd}, which a sandboxed session could write`);
    trust(home, join(cwd, "awrepl.jsonc"));
    expect((await loadConfig({ cwd, env })).timeoutMs).toBe(1);
    for (const text of ["", "{ not json"]) {
      writeFileSync(join(cwd, "awrepl.jsonc"), text);
      const r = await loadConfig({ cwd, env });
      expect(r.timeoutMs).toBe(builtinConfig.timeoutMs);
      expect(r.notices?.[0]).toContain("passed over");
    }
    rmSync(join(cwd, "awrepl.jsonc"));
    mkdirSync(join(cwd, "awrepl.jsonc"));
    expect((await loadConfig({ cwd, env })).notices?.[0]).toContain("passed over");
  });
});

describe("the sandbox key", () => {
  test("true is the default profile, an object is checked field by field, relative paths are the file's directory's", async () => {
    expect((await loadConfig(setup(`{"sandbox": true}`))).sandbox).toEqual({});
    expect((await loadConfig(setup(`{"sandbox": false}`))).sandbox).toBe(false);
    const { cwd, env } = setup(undefined, `{"sandbox": {"network": true, "env": ["HF_TOKEN"], "writable": ["out", "/abs"]}}`);
    trust(env.AWREPL_HOME as string, join(cwd, "awrepl.jsonc"));
    expect((await loadConfig({ cwd, env })).sandbox).toEqual({ network: true, env: ["HF_TOKEN"], writable: [join(cwd, "out"), "/abs"] });
    await expect(loadConfig(setup(`{"sandbox": "yes"}`))).rejects.toThrow(/"sandbox" .* must be true, false or an object/);
    await expect(loadConfig(setup(`{"sandbox": {"env": ["A B"]}}`))).rejects.toThrow(/has "env" \["A B"\]: it must be a list of environment variable names/);
    await expect(loadConfig(setup(`{"sandbox": {"network": 1}}`))).rejects.toThrow(/has "network" 1/);
    await expect(loadConfig(setup(`{"sandbox": {"seccomp": true}}`))).rejects.toThrow(/unknown field "seccomp"/);
    await expect(loadConfig(setup(`{"sandbox": {"writable": ["/"]}}`))).rejects.toThrow(/whole filesystem writable/);
    const e = setup();
    expect((await loadConfig({ cwd: e.cwd, env: { ...e.env, AWREPL_SANDBOX: "1" } })).sandbox).toEqual({});
    expect((await loadConfig({ cwd: e.cwd, env: { ...e.env, AWREPL_SANDBOX: "0" } })).sandbox).toBe(false);
  });

  test("a project file may switch the default sandbox on freely, but loosening it (off, network, env, paths) needs trust", async () => {
    const user = `{"sandbox": true}`;
    expect((await loadConfig(setup(user, `{"sandbox": {}}`))).notices).toBeUndefined();
    for (const loose of [`false`, `{"network": true}`, `{"env": ["AWS_SECRET_ACCESS_KEY"]}`, `{"writable": ["/data"]}`, `{"allow": ["169.254.169.254"]}`]) {
      const { cwd, env } = setup(user, `{"sandbox": ${loose}, "python": "./planted.sh"}`);
      const untrusted = await loadConfig({ cwd, env });
      expect(untrusted.sandbox).toEqual({}); // the user's own setting stands
      expect(untrusted.python).toBeUndefined();
      expect(untrusted.notices?.[0]).toContain(`ignoring "python" and "sandbox" in ${join(cwd, "awrepl.jsonc")}: it is not trusted`);
      trust(env.AWREPL_HOME as string, join(cwd, "awrepl.jsonc"));
      expect((await loadConfig({ cwd, env })).sandbox).not.toEqual({});
    }
  });
});

describe("the limits key and the sandbox's allow list", () => {
  test("limits take sizes with units, as the flags do; a mistake names the field and the value", async () => {
    const config = await loadConfig(setup(`{"limits": {"memory": "512M", "maxProcs": 64, "cpu": 50, "maxFileSize": 1048576, "bestEffort": true}}`));
    expect(config.limits).toEqual({ memory_bytes: 512 * 2 ** 20, max_procs: 64, cpu_percent: 50, max_file_bytes: 2 ** 20, best_effort: true });
    await expect(loadConfig(setup(`{"limits": {"memory": "lots"}}`))).rejects.toThrow(/"limits" .* has "memory" "lots": it must be a size above 0/);
    await expect(loadConfig(setup(`{"limits": {"maxProcs": 0}}`))).rejects.toThrow(/has "maxProcs" 0: it must be a whole number, 1 or more/);
    await expect(loadConfig(setup(`{"limits": {"cpu": "half"}}`))).rejects.toThrow(/has "cpu" "half"/);
    await expect(loadConfig(setup(`{"limits": {"swap": "1G"}}`))).rejects.toThrow(/unknown field "swap" \(known: memory, maxProcs, cpu, maxFileSize, bestEffort\)/);
    await expect(loadConfig(setup(`{"limits": 5}`))).rejects.toThrow(/"limits" .* must be an object/);
  });

  test("a project file's limits need no trust (they only tighten)", async () => {
    const config = await loadConfig(setup(undefined, `{"limits": {"memory": "256M"}}`));
    expect(config.limits).toEqual({ memory_bytes: 256 * 2 ** 20 });
    expect(config.notices).toBeUndefined();
  });

  test("sandbox.allow is a list of strings, and cannot go with network", async () => {
    expect((await loadConfig(setup(`{"sandbox": {"allow": ["pypi.org", "127.0.0.1:8080"]}}`))).sandbox).toEqual({ allow: ["pypi.org", "127.0.0.1:8080"] });
    await expect(loadConfig(setup(`{"sandbox": {"allow": "pypi.org"}}`))).rejects.toThrow(/has "allow" "pypi.org": it must be a list of host\[:port\] strings/);
    await expect(loadConfig(setup(`{"sandbox": {"allow": ["pypi.org"], "network": true}}`))).rejects.toThrow(/both "network" and "allow"/);
  });
});

import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveSettings } from "./context.ts";
import { limitsSpec } from "./limits_flags.ts";
import { sandboxSpec } from "./sandbox_flags.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Settings for a caller in a project directory, with `userConfig` as the user's config file. */
async function settings(userConfig?: string) {
  const root = mkdtempSync(join(tmpdir(), "awrepl-sbflags-"));
  dirs.push(root);
  const home = join(root, "home");
  const cwd = join(root, "project");
  mkdirSync(home);
  mkdirSync(join(cwd, "out"), { recursive: true });
  if (userConfig !== undefined) writeFileSync(join(home, "config.jsonc"), userConfig);
  return { s: await resolveSettings({ AWREPL_HOME: home }, cwd), cwd };
}

describe("sandboxSpec: flags over the config", () => {
  test("no flags, no config: no sandbox and no preference; --sandbox: the default profile; --no-sandbox: explicitly none", async () => {
    const { s } = await settings();
    expect(sandboxSpec(s)).toBeUndefined();
    expect(sandboxSpec(s, { sandbox: true })).toEqual({});
    expect(sandboxSpec(s, { sandbox: false })).toBe(false);
  });

  test("the flags add to the config's profile; paths are the caller's, absolute", async () => {
    const { s, cwd } = await settings(`{"sandbox": {"env": ["A"], "writable": ["/tmp"]}}`);
    expect(sandboxSpec(s)).toEqual({ env: ["A"], writable: ["/tmp"] });
    expect(sandboxSpec(s, { net: true, env: ["B", "A"], write: ["out"] })).toEqual({ network: true, env: ["A", "B"], writable: ["/tmp", join(cwd, "out")] });
    // A config of false is no preference: a live sandboxed session is not told anything.
    expect(sandboxSpec((await settings(`{"sandbox": false}`)).s)).toBeUndefined();
  });

  test("mistakes name the flag and the value", async () => {
    const { s } = await settings();
    expect(() => sandboxSpec(s, { net: true })).toThrow("--sandbox-net shapes a sandbox: add --sandbox");
    expect(() => sandboxSpec(s, { env: ["X"], write: ["out"] })).toThrow("--env, --sandbox-write shape a sandbox");
    expect(() => sandboxSpec(s, { sandbox: false, env: ["X"] })).toThrow("--env cannot go with --no-sandbox");
    expect(() => sandboxSpec(s, { sandbox: true, env: ["1X"] })).toThrow('--env needs an environment variable name, not "1X"');
    expect(() => sandboxSpec(s, { sandbox: true, write: ["missing"] })).toThrow("--sandbox-write missing: no such file or directory");
    expect(() => sandboxSpec(s, { sandbox: true, write: ["/"] })).toThrow("whole filesystem writable");
  });
});

describe("--sandbox-allow", () => {
  test("adds to the config's list, needs --sandbox, and cannot go with the network", async () => {
    const { s } = await settings(`{"sandbox": {"allow": ["pypi.org"]}}`);
    expect(sandboxSpec(s, { allow: ["127.0.0.1:8080", "pypi.org"] })).toEqual({ allow: ["pypi.org", "127.0.0.1:8080"] });
    const bare = (await settings()).s;
    expect(() => sandboxSpec(bare, { allow: ["pypi.org"] })).toThrow("--sandbox-allow shapes a sandbox: add --sandbox");
    expect(() => sandboxSpec(bare, { sandbox: true, net: true, allow: ["pypi.org"] })).toThrow("--sandbox-allow pypi.org cannot go with --sandbox-net");
    expect(() => sandboxSpec(bare, { sandbox: false, allow: ["pypi.org"] })).toThrow("--sandbox-allow cannot go with --no-sandbox");
    const networked = (await settings(`{"sandbox": {"network": true}}`)).s;
    expect(() => sandboxSpec(networked, { allow: ["pypi.org"] })).toThrow(`cannot go with the config's sandbox "network"`);
  });
});

describe("limitsSpec: the limit flags over the config", () => {
  test("no flags and no config: no limits; each flag replaces its own key of the config's", async () => {
    expect(limitsSpec((await settings()).s)).toBeUndefined();
    const { s } = await settings(`{"limits": {"memory": "1G", "maxProcs": 64}}`);
    expect(limitsSpec(s)).toEqual({ memory_bytes: 2 ** 30, max_procs: 64 });
    expect(limitsSpec(s, { memory: "256M", cpu: "50%", maxFileSize: "1M", limitsBestEffort: true })).toEqual({
      memory_bytes: 256 * 2 ** 20,
      max_procs: 64,
      cpu_percent: 50,
      max_file_bytes: 2 ** 20,
      best_effort: true,
    });
  });

  test("mistakes name the flag and the value", async () => {
    const { s } = await settings();
    expect(() => limitsSpec(s, { memory: "lots" })).toThrow('--memory must be a size such as 65536, 64K, 1M or 2G (a bare number is bytes), not "lots"');
    expect(() => limitsSpec(s, { memory: "0" })).toThrow('--memory must be more than 0 bytes, not "0"');
    expect(() => limitsSpec(s, { maxProcs: "0" })).toThrow('--max-procs must be a whole number of processes and threads, 1 or more, not "0"');
    expect(() => limitsSpec(s, { maxProcs: "2.5" })).toThrow('not "2.5"');
    expect(() => limitsSpec(s, { cpu: "fast" })).toThrow('--cpu must be a percentage of one CPU above 0 (50, 50%, 200 for two CPUs), not "fast"');
    expect(() => limitsSpec(s, { maxFileSize: "1T" })).toThrow("--max-file-size must be a size");
    expect(() => limitsSpec(s, { limitsBestEffort: true })).toThrow("--limits-best-effort goes with a limit");
  });
});

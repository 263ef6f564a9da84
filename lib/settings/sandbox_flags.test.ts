import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { resolveSettings } from "./context.ts";
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

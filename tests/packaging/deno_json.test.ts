// deno.json earns its place: the library's JSR metadata and tasks that mirror package.json's (the
// build's source of truth), checked here so it cannot rot: the same name parts, version, license and
// entry, the same tasks, `deno check` of the library with it, and `deno publish --dry-run` (it runs
// offline: it checks the package without reaching the registry).
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../harness/mod.ts";

const DENO = join(ROOT, "node_modules", ".bin", "deno");
const deno = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8"));
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));

function runDeno(args: string[]): { code: number | null; output: string } {
  const r = Bun.spawnSync([DENO, ...args], { cwd: ROOT, env: { ...process.env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" }, timeout: 120_000 });
  return { code: r.exitCode, output: r.stdout.toString() + r.stderr.toString() };
}

describe("deno.json", () => {
  test("agrees with package.json: version, license, entry, and every task", () => {
    expect(deno.name).toBe(`@awrepl/${pkg.name}`);
    expect(deno.version).toBe(pkg.version);
    expect(deno.license).toBe(pkg.license);
    expect(deno.exports).toBe(pkg.exports["."]);
    expect(deno.tasks).toEqual(pkg.scripts);
  });

  test("the library type-checks under Deno with it", () => {
    const r = runDeno(["check", "lib/mod.ts"]);
    expect({ code: r.code, output: r.code === 0 ? "" : r.output }).toEqual({ code: 0, output: "" });
  }, 120_000);

  // --allow-slow-types: JSR's fast check builds the public types without @types/node, and this
  // library's options name `NodeJS.ProcessEnv` and `AbortSignal` (it serves Node, Bun and Deno); the
  // slow types it did report (untyped public fields) are fixed, and `deno check` above checks them all.
  test("`deno publish --dry-run` passes (offline): the package's files and types", () => {
    const r = runDeno(["publish", "--dry-run", "--allow-dirty", "--allow-slow-types"]);
    expect({ code: r.code, output: r.code === 0 ? "" : r.output }).toEqual({ code: 0, output: "" });
    expect(r.output).toContain("lib/mod.ts");
    expect(r.output).toContain("runtime.py");
    expect(r.output).not.toContain(".test.ts");
  }, 180_000);
});

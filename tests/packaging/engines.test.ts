// What the README, package.json's `engines` and the dependencies say about Node agree (issue 21:
// commander 15 wanted Node >= 22.12 while the README said Node 20+, and `npm ci` warned EBADENGINE),
// and the Node these tests run the library on is the lowest one supported.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../harness/mod.ts";

type Pkg = { engines?: { node?: string }; dependencies?: Record<string, string>; devDependencies?: Record<string, string> };
const readPkg = (dir: string): Pkg => JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));

/** The lowest [major, minor, patch] a simple range (">=20", ">=22.12.0", "^18.17 || >=20") allows. */
function lowest(range: string): number[] {
  const mins = range.split("||").map((part) => {
    const m = /(?:>=|\^|~)?\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(part.trim());
    if (!m) throw new Error(`cannot read the engines range ${JSON.stringify(range)}`);
    return [Number(m[1]), Number(m[2] ?? 0), Number(m[3] ?? 0)];
  });
  return mins.sort(compare)[0] as number[];
}

function compare(a: number[], b: number[]): number {
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
}

describe("the supported Node", () => {
  const root = readPkg(ROOT);
  const ours = lowest(root.engines?.node ?? "");

  test("package.json says >= 20, and the README says the same", () => {
    expect(root.engines?.node).toBe(">=20");
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const stated = [...readme.matchAll(/Node(?:\.js)? (\d+)(\+| or later)/g)].map((m) => Number(m[1]));
    expect(stated.length).toBeGreaterThan(0);
    expect(new Set(stated)).toEqual(new Set([ours[0] as number]));
  });

  test("no dependency (nor a devDependency the tests run on Node) asks for a newer Node", () => {
    const names = [...Object.keys(root.dependencies ?? {}), ...Object.keys(root.devDependencies ?? {})];
    const newer = names.flatMap((name) => {
      const range = readPkg(join(ROOT, "node_modules", name)).engines?.node;
      return range && compare(lowest(range), ours) > 0 ? [`${name} wants node ${range}`] : [];
    });
    expect(newer).toEqual([]);
  });

  test("the node on PATH (the library's Node tests run on it) is supported, and in CI it is the lowest major", () => {
    const r = Bun.spawnSync(["node", "--version"], { timeout: 10_000 });
    const version = r.stdout.toString().trim().replace(/^v/, "").split(".").map(Number);
    expect(compare(version, ours)).toBeGreaterThanOrEqual(0);
    if (process.env.CI) expect(version[0]).toBe(ours[0]);
    console.log(`node ${version.join(".")} (supported: >= ${ours.join(".")})`);
  });
});

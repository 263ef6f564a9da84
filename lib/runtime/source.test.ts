import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { resolveInterpreter } from "../worker/interpreter.ts";
import { bootstrapLine, runtimeBytecode, runtimeFile, runtimeSource } from "./source.ts";
import { runtimeLaunch } from "../worker/launch.ts";
import { PYTHON, tempHome } from "../../tests/harness/mod.ts";
import { Worker } from "../worker/worker.ts";

let tmp: ReturnType<typeof tempHome>;
beforeEach(() => {
  tmp = tempHome();
});
afterEach(() => tmp.remove());

async function roundTrip(argv: string[], stdinPreamble?: Buffer): Promise<string> {
  const w = await Worker.start({ argv, stdinPreamble });
  try {
    let value = "";
    await w.request({ type: "execute", code: "6 * 7" }, { result: (t) => (value = t) });
    return value;
  } finally {
    await w.close();
  }
}

describe("runtime cache", () => {
  test("the source is written once under its content hash, atomically", async () => {
    const src = await runtimeSource();
    expect(src.text).toBe(readFileSync(new URL("../../runtime.py", import.meta.url), "utf8"));
    const path = await runtimeFile(tmp.home);
    expect(path).toBe(join(tmp.home, "runtime", `runtime-${src.hash}.py`));
    expect(readFileSync(path, "utf8")).toBe(src.text);
    const before = statSync(path).mtimeMs;
    await Bun.sleep(20);
    expect(await runtimeFile(tmp.home)).toBe(path);
    expect(statSync(path).mtimeMs).toBe(before);
    expect(readdirSync(join(tmp.home, "runtime")).filter((f) => f.endsWith(".tmp"))).toEqual([]);
    expect(statSync(join(tmp.home, "runtime")).mode & 0o777).toBe(0o700);
  });

  test("the bytecode is compiled once per interpreter and a worker runs from it", async () => {
    const interpreter = await resolveInterpreter({ python: PYTHON, home: tmp.home });
    const pyc = await runtimeBytecode(tmp.home, interpreter);
    expect(pyc).toMatch(new RegExp(`-${interpreter.cacheTag}\\.pyc$`));
    const mtime = statSync(pyc as string).mtimeMs;
    expect(await runtimeBytecode(tmp.home, interpreter)).toBe(pyc);
    expect(statSync(pyc as string).mtimeMs).toBe(mtime);
    const launch = await runtimeLaunch(tmp.home, interpreter);
    expect(launch.argv.at(-1)).toBe(pyc as string);
    expect(await roundTrip(launch.argv)).toBe("42");
  });

  test("a remote command gets the source over stdin through the bootstrap", async () => {
    // `env PYTHON` is not an interpreter name, so it is treated like `ssh host python3`.
    const interpreter = await resolveInterpreter({ python: `env ${PYTHON}`, home: tmp.home });
    expect(interpreter.local).toBe(false);
    const launch = await runtimeLaunch(tmp.home, interpreter);
    expect(launch.argv).toContain(bootstrapLine((await runtimeSource()).text));
    expect(launch.stdinPreamble).toBeDefined();
    expect(await roundTrip(launch.argv, launch.stdinPreamble)).toBe("42");
  });

  test("ssh's joined command line gets a quoted bootstrap", async () => {
    // A stand-in for ssh: drop the host and run the rest as one shell command line, as ssh does.
    const fakeSsh = join(tmp.home, "bin", "ssh");
    mkdirSync(join(tmp.home, "bin"));
    writeFileSync(fakeSsh, '#!/bin/sh\nshift\nexec sh -c "$*"\n', { mode: 0o755 });
    const interpreter = await resolveInterpreter({ python: `${fakeSsh} somehost ${PYTHON}`, home: tmp.home });
    expect(interpreter.local).toBe(false);
    const launch = await runtimeLaunch(tmp.home, interpreter);
    expect(await roundTrip(launch.argv, launch.stdinPreamble)).toBe("42");
  });
});

describe("runtime.py's layout", () => {
  test("its docstring's contents name its sections, in file order, as their banners do", () => {
    const source = readFileSync(new URL("../../runtime.py", import.meta.url), "utf8");
    const doc = source.split('"""')[1] ?? "";
    const contents = /^Contents\b[^]*?\n\n((?: {4}.*\n)+)/m.exec(doc)?.[1] ?? "";
    const listed = [...contents.matchAll(/^ {4}(\S.*?) {2,}/gm)].map((m) => m[1]);
    const banners = [...source.matchAll(/^# -{20,}\n# ([^:\n]+):.*\n(?:# (?!-).*\n)*# -{20,}$/gm)].map((m) => m[1]);
    expect(listed.length).toBeGreaterThan(10);
    expect(banners).toEqual(listed);
  });

  test("it stays within its size budget, and its module state in a few objects (docs/architecture.md, Size budgets)", () => {
    const source = readFileSync(new URL("../../runtime.py", import.meta.url), "utf8");
    expect(source.split("\n").length).toBeLessThanOrEqual(6000);
    // Each `global` statement needs a reason beside it: a few, not one per piece of state.
    expect([...source.matchAll(/^\s+global \w/gm)].length).toBeLessThanOrEqual(8);
  });
});

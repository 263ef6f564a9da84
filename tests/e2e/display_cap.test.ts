// One display payload is bounded before it reaches the supervisor: a cell whose _repr_png_ returns
// 100 MB gets an entry saying the PNG was left out (its MIME type, its size, the cap), no file is
// written, and the shared supervisor's peak RSS (VmHWM from /proc, reset through clear_refs) grows by
// far less than the payload. MIME keys from user code come back cut to 100 characters.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExecResult } from "../../lib/protocol/result.ts";
import { cleanupHome, makeHome, run } from "../harness/mod.ts";

const homes: string[] = [];
afterEach(async () => {
  for (const h of homes.splice(0)) await cleanupHome(h);
});

const MIB = 1024 * 1024;

function statusKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

async function json(home: string, code: string): Promise<ExecResult> {
  const r = await run(["-s", "cap", "run", "--json", code], { home, timeoutMs: 120_000 });
  expect(r.stderr).toBe("");
  return JSON.parse(r.stdout) as ExecResult;
}

describe("a display payload over the cap", () => {
  test("a 100 MB _repr_png_ through a named session: the result says it was dropped, nothing is written, the supervisor stays small", async () => {
    const home = makeHome();
    homes.push(home);
    expect((await json(home, "1")).status).toBe("ok");
    const status = await run(["daemon", "status", "--json"], { home });
    const supervisor = (JSON.parse(status.stdout) as { pid: number }).pid;
    const before = statusKb(supervisor, "VmRSS");
    writeFileSync(`/proc/${supervisor}/clear_refs`, "5"); // the peak starts again from here
    const size = 100_000_000;
    const r = await json(
      home,
      `class Big:\n    def _repr_png_(self):\n        return b'\\x89PNG' + bytes(${size - 4})\n    def __repr__(self):\n        return 'Big()'\ndisplay(Big())`,
    );
    const growth = statusKb(supervisor, "VmHWM") - before;
    console.log(`supervisor RSS ${(before / MIB).toFixed(0)} MiB; peak growth over a cell with a ${size / 1e6} MB _repr_png_: ${(growth / MIB).toFixed(1)} MiB`);
    expect(r.status).toBe("ok");
    expect(r.display).toEqual([
      {
        "text/plain": "Big()",
        error: `_repr_png_() for image/png returned ${size} bytes (95.4 MiB), over the cap of ${32 * MIB} bytes (32.0 MiB) on one display payload: left out`,
      },
    ]);
    const folder = join(home, "display", "cap");
    expect(existsSync(folder) ? readdirSync(folder) : []).toEqual([]);
    expect(growth).toBeLessThan(size * 0.25);
  }, 180_000);

  test("a 5,000-character MIME key comes back cut to 100 characters, and the entry says so", async () => {
    const home = makeHome();
    homes.push(home);
    const long = `text/${"k".repeat(4995)}`;
    const r = await json(home, `import awrepl\nawrepl.emit({${JSON.stringify(long)}: 'v', 'text/plain': 'p'})`);
    expect(r.display).toEqual([{ [`${long.slice(0, 100)}...`]: "v", "text/plain": "p", error: "a MIME type of 5000 characters was cut to its first 100" }]);
  }, 60_000);
});

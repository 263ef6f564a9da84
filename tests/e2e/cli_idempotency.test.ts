// Calls safe to retry, end to end: `awrepl -s NAME run --id KEY` runs a cell once however often it is
// sent. A repeat prints the first call's result (marked `replayed` in --json) or waits for it while
// it still runs; the same key with other code is a usage error; the keys survive a supervisor restart
// with the session's snapshot; an ephemeral run refuses --id.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ExitCode } from "../../lib/core/errors.ts";
import { run, start, withHome } from "../harness/mod.ts";

const cwd = tmpdir();
const COUNT = "n = globals().get('n', 0) + 1\nn";

describe("run --id", () => {
  test("a repeat runs nothing and gets the first result; other code under the key is refused; an ephemeral run refuses --id", async () => {
    await withHome(async (home) => {
      const first = await run(["-s", "k", "run", "--id", "add-1", COUNT], { home, cwd });
      expect(first).toMatchObject({ code: 0, stdout: "1\n" });
      const again = await run(["-s", "k", "run", "--id", "add-1", "--json", COUNT], { home, cwd });
      expect(again.code).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ value: "1", replayed: true, session: "k" });
      const text = await run(["-s", "k", "run", "--id", "add-1", COUNT], { home, cwd });
      expect(text).toMatchObject({ code: 0, stdout: "1\n" });
      expect(text.stderr).toContain("nothing ran");
      expect((await run(["-s", "k", "run", "n"], { home, cwd })).stdout).toBe("1\n");
      const other = await run(["-s", "k", "run", "--id", "add-1", "n = 100"], { home, cwd });
      expect(other.code).toBe(ExitCode.usage);
      expect(other.stderr).toContain('"add-1"');
      expect((await run(["-s", "k", "run", "n"], { home, cwd })).stdout).toBe("1\n");
      const ephemeral = await run(["run", "--id", "x", "1"], { home, cwd });
      expect(ephemeral.code).toBe(ExitCode.usage);
      expect(ephemeral.stderr).toContain("--id");
      const long = await run(["-s", "k", "run", "--id", "k".repeat(129), "1"], { home, cwd });
      expect(long.code).toBe(ExitCode.usage);
    });
  });

  test("a repeat while the first still runs waits for it, and the cell runs once", async () => {
    await withHome(async (home) => {
      expect((await run(["-s", "w", "run", "n = 0"], { home, cwd })).code).toBe(0);
      const slow = "import time\ntime.sleep(1.5)\nn += 1\nn";
      const a = await start(["-s", "w", "run", "--id", "slow", slow], { home, cwd });
      // The second is sent while the first sleeps (its worker took the first cell already).
      await Bun.sleep(500);
      const b = await run(["-s", "w", "run", "--id", "slow", "--json", slow], { home, cwd });
      const ra = await a.result;
      expect(ra).toMatchObject({ code: 0, stdout: "1\n" });
      expect(JSON.parse(b.stdout)).toMatchObject({ value: "1", replayed: true });
      expect((await run(["-s", "w", "run", "n"], { home, cwd })).stdout).toBe("1\n");
    });
  });

  test("the keys survive a supervisor restart with the session's snapshot", async () => {
    await withHome(async (home) => {
      expect((await run(["-s", "p", "run", "--id", "once", COUNT], { home, cwd })).stdout).toBe("1\n");
      expect((await run(["daemon", "stop"], { home, cwd })).code).toBe(0);
      expect(existsSync(join(home, "snapshots", "p", "keys.json"))).toBe(true);
      const again = await run(["-s", "p", "run", "--id", "once", "--json", COUNT], { home, cwd });
      expect(JSON.parse(again.stdout)).toMatchObject({ value: "1", replayed: true });
      expect((await run(["-s", "p", "run", "n"], { home, cwd })).stdout).toBe("1\n");
      // close forgets them with the session.
      expect((await run(["close", "p"], { home, cwd })).code).toBe(0);
      expect(existsSync(join(home, "snapshots", "p", "keys.json"))).toBe(false);
      expect((await run(["-s", "p", "run", "--id", "once", COUNT], { home, cwd })).stdout).toBe("1\n");
    });
  });
});

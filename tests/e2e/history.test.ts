// A session's history end to end (docs/history.md): every cell that runs through the supervisor is
// recorded with who ran it (the CLI, the TypeScript library, a raw client saying it is the Python
// client), `awrepl history` prints it, it survives a supervisor's stop beside the snapshot, `close`
// removes it, its bounds come from the config, and an owned session's stays in memory only.
import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { attach } from "../../lib/client/attach.ts";
import { AWREPL_VERSION, SUPERVISOR_PROTOCOL } from "../../lib/core/version.ts";
import type { HistoryValue } from "../../lib/protocol/supervisor.ts";
import { socketPath } from "../../lib/settings/home.ts";
import { awreplBinary, run, testEnv, withHome } from "../harness/mod.ts";
import { converse } from "./supervisor_socket.ts";

async function history(h: string, name: string, ...args: string[]): Promise<HistoryValue> {
  const r = await run(["-s", name, "history", "--json", ...args], { home: h });
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  return JSON.parse(r.stdout) as HistoryValue;
}

async function hello(h: string, client?: string) {
  const c = await converse(socketPath(h));
  c.send({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION, ...(client ? { client } : {}) });
  expect(await c.next()).toMatchObject({ event: "hello", ok: true });
  return c;
}

describe("history", () => {
  test("records each cell with its client, code, start, status and result as the caller got it; -n and the text form", () =>
    withHome(async (h) => {
      expect((await run(["-s", "h", "run", "x = 41"], { home: h })).code).toBe(0);
      expect((await run(["-s", "h", "run", "print('out'); x + 1"], { home: h })).stdout).toBe("out\n42\n");
      expect((await run(["-s", "h", "run", "1/0"], { home: h })).code).toBe(1);
      const lib = await attach("h", { home: h, clientEnv: { ...testEnv(h), AWREPL_BIN: await awreplBinary() } });
      try {
        expect((await lib.execute("x * 2")).value).toBe("82");
        const mine = await lib.history({ last: 1 });
        expect(mine.cells.map((c) => [c.n, c.client, c.code])).toEqual([[4, "library", "x * 2"]]);
        expect(() => lib.history({ last: -1 })).toThrow(/last/);
      } finally {
        await lib.close();
      }
      // A client that says it is the Python client (its hello's `client`).
      const py = await hello(h, "python");
      py.send({ type: "execute", id: 1, session: "h", code: "'from python'" });
      expect(await py.final(1)).toMatchObject({ event: "result", result: { value: "'from python'" } });
      py.close();

      const all = await history(h, "h");
      expect(all.total).toBe(5);
      expect(all.dropped).toBe(0);
      expect(all.cells.map((c) => [c.n, c.client, c.status])).toEqual([
        [1, "cli", "ok"],
        [2, "cli", "ok"],
        [3, "cli", "error"],
        [4, "library", "ok"],
        [5, "python", "ok"],
      ]);
      const second = all.cells[1]!;
      expect(second.code).toBe("print('out'); x + 1");
      expect(second.result).toMatchObject({ stdout: "out\n", value: "42", status: "ok", session: "h" });
      expect(Date.parse(second.started_at)).toBeGreaterThan(Date.now() - 120_000);
      expect(second.duration_ms).toBe(second.result.duration_ms);
      expect(all.cells[2]!.result.exception).toBe("ZeroDivisionError: division by zero");

      expect((await history(h, "h", "-n", "2")).cells.map((c) => c.n)).toEqual([4, 5]);
      const text = await run(["-s", "h", "history", "-n", "3"], { home: h });
      expect(text.code).toBe(0);
      expect(text.stdout).toContain("(2 older cell(s) not shown)");
      expect(text.stdout).toMatch(/\[3\] cli {2}\S+Z {2}error/);
      expect(text.stdout).toContain(">>> 1/0\nZeroDivisionError: division by zero");
      expect(text.stdout).toContain("[5] python");
      const bad = await run(["-s", "h", "history", "-n", "x"], { home: h });
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain("x");
      const typo = await run(["-s", "nosuch", "history"], { home: h });
      expect(typo.code).not.toBe(0);
      expect(typo.stderr).toContain('No session named "nosuch"');
      // A hello naming no known client is refused, naming the value.
      const odd = await converse(socketPath(h));
      odd.send({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION, client: "browser" });
      expect(await odd.next()).toMatchObject({ event: "error", code: "usage", message: expect.stringContaining('"browser"') });
      odd.close();
    }), 120_000);

  test("is written beside the snapshot at a stop, read back when the session comes back, removed by close", () =>
    withHome(async (h) => {
      for (const code of ["a = 1", "b = 2", "a + b"]) expect((await run(["-s", "p", "run", code], { home: h })).code).toBe(0);
      const file = join(h, "snapshots", "p", "history.json");
      expect(existsSync(file)).toBe(false); // no autosave: written with the snapshot, at the stop
      expect((await run(["daemon", "stop"], { home: h })).code).toBe(0);
      expect(existsSync(file)).toBe(true);
      // A new supervisor: the session comes back from its snapshot, with its history, numbering on.
      expect((await run(["-s", "p", "run", "a + b + 1"], { home: h })).stdout).toBe("4\n");
      const back = await history(h, "p");
      expect(back.cells.map((c) => [c.n, c.code])).toEqual([
        [1, "a = 1"],
        [2, "b = 2"],
        [3, "a + b"],
        [4, "a + b + 1"],
      ]);
      // Readable while the session is not running (from the file).
      expect((await run(["close", "p", "--keep"], { home: h })).code).toBe(0);
      expect((await history(h, "p")).cells).toHaveLength(4);
      expect((await run(["close", "p"], { home: h })).code).toBe(0);
      expect(existsSync(file)).toBe(false);
      expect((await run(["-s", "p", "history"], { home: h })).stderr).toContain('No session named "p"');
      // Created again: a new history.
      expect((await run(["-s", "p", "run", "'again'"], { home: h })).code).toBe(0);
      expect((await history(h, "p")).cells.map((c) => [c.n, c.code])).toEqual([[1, "'again'"]]);
    }), 120_000);

  test("with autosave, written soon after each cell; bounded by historyMaxCells from the config", () =>
    withHome(async (h) => {
      writeFileSync(join(h, "config.jsonc"), '{ "historyMaxCells": 3, "autosave": true }\n');
      for (let i = 1; i <= 5; i++) expect((await run(["-s", "b", "run", `v${i} = ${i}`], { home: h })).code).toBe(0);
      const bounded = await history(h, "b");
      expect(bounded.cells.map((c) => c.n)).toEqual([3, 4, 5]);
      expect(bounded).toMatchObject({ total: 5, dropped: 2 });
      const file = join(h, "snapshots", "b", "history.json");
      const deadline = Date.now() + 10_000;
      while (!existsSync(file) && Date.now() < deadline) await Bun.sleep(50);
      expect(existsSync(file)).toBe(true);
      expect((await run(["-s", "b", "history"], { home: h })).stdout).toContain("(2 oldest cell(s) dropped by the history's bounds)");
      writeFileSync(join(h, "config.jsonc"), '{ "historyMaxCells": -3 }\n');
      const bad = await run(["-s", "b", "history"], { home: h });
      expect(bad.stderr).toContain("historyMaxCells");
    }), 120_000);

  test("an owned session's history is its connection's, in memory only, and goes with it", () =>
    withHome(async (h) => {
      expect((await run(["-s", "shared", "run", "1"], { home: h })).code).toBe(0);
      const a = await hello(h, "kernel");
      a.send({ type: "execute", id: 1, session: "mine", code: "z = 5", owned: true, spec: { cwd: "/tmp" } });
      expect(await a.final(1)).toMatchObject({ event: "result", result: { status: "ok" } });
      a.send({ type: "history", id: 2, session: "mine" });
      const own = await a.final(2);
      expect(own).toMatchObject({ event: "ok", value: { cells: [{ n: 1, client: "kernel", code: "z = 5" }] } });
      const b = await hello(h);
      b.send({ type: "history", id: 1, session: "mine" });
      expect(await b.final(1)).toMatchObject({ event: "error", code: "session_not_found" });
      b.send({ type: "watch", id: 2, session: "mine" });
      expect(await b.final(2)).toMatchObject({ event: "error", code: "session_not_found" });
      a.close();
      // Its session ends with its connection.
      for (let listed = true, i = 0; listed; i++) {
        if (i > 200) throw new Error("the owned session outlived its connection");
        b.send({ type: "list", id: 10 + i });
        listed = ((await b.final(10 + i)).value as { name: string }[]).some((s) => s.name === "mine");
        if (listed) await Bun.sleep(50);
      }
      expect(existsSync(join(h, "snapshots", "mine"))).toBe(false);
      // The name again, owned by another connection: nothing of the first one's history.
      const c = await hello(h);
      c.send({ type: "execute", id: 1, session: "mine", code: "'second'", owned: true, spec: { cwd: "/tmp" } });
      expect(await c.final(1)).toMatchObject({ event: "result" });
      c.send({ type: "history", id: 2, session: "mine" });
      expect(await c.final(2)).toMatchObject({ event: "ok", value: { cells: [{ n: 1, client: "library", code: "'second'" }], total: 1 } });
      c.close();
      b.close();
    }), 120_000);
});

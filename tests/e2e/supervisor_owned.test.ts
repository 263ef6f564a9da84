// Owned sessions over a raw socket: a session created with `owned: true` belongs to its connection.
// It is closed when that connection closes, nothing of it is written under <state>/snapshots/ (not by
// a stop either), other connections cannot reach it, and it cannot take a name that exists.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { processAlive } from "../../lib/core/process.ts";
import { AWREPL_VERSION, SUPERVISOR_PROTOCOL } from "../../lib/core/version.ts";
import { socketPath } from "../../lib/settings/home.ts";
import { cleanupHome, makeHome, run } from "../harness/mod.ts";
import { type Conversation, converse, waitUntil } from "./supervisor_socket.ts";

const homes: string[] = [];
afterEach(async () => {
  for (const h of homes.splice(0)) await cleanupHome(h);
});

async function started(): Promise<string> {
  const h = makeHome();
  homes.push(h);
  // A shared session starts the supervisor (and gives the name "shared" for the clash below).
  expect((await run(["-s", "shared", "run", "1"], { home: h })).code).toBe(0);
  return h;
}

async function client(h: string): Promise<Conversation> {
  const c = await converse(socketPath(h));
  c.send({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION });
  expect(await c.next()).toMatchObject({ event: "hello", ok: true });
  return c;
}

const spec = { cwd: "/tmp" };

function snapshotDirs(h: string): string[] {
  const dir = join(h, "snapshots");
  return existsSync(dir) ? readdirSync(dir) : [];
}

describe("owned sessions", () => {
  test("only its connection reaches it; it is listed as owned; it ends with its connection, leaving nothing under snapshots/", async () => {
    const h = await started();
    const a = await client(h);
    const b = await client(h);
    try {
      a.send({ type: "open", id: 1, session: "mine", spec, owned: true });
      expect(await a.final(1)).toMatchObject({ event: "ok", value: { created: true } });
      // `owned` again from its own connection is the same session, not a clash.
      a.send({ type: "execute", id: 2, session: "mine", code: "import os; x = 41; os.getpid()", spec, owned: true });
      const first = await a.final(2);
      expect(first).toMatchObject({ event: "result", result: { status: "ok" } });
      const pid = Number((first.result as { value: string }).value);
      a.send({ type: "execute", id: 3, session: "mine", code: "x + 1", spec: { ...spec, autosave: true } });
      expect(await a.final(3)).toMatchObject({ result: { value: "42" } });
      b.send({ type: "list", id: 1 });
      const list = (await b.final(1)).value as { name: string; owned: boolean }[];
      expect(list.find((s) => s.name === "mine")?.owned).toBe(true);
      expect(list.find((s) => s.name === "shared")?.owned).toBe(false);
      // Another connection: not there for it, whatever it asks.
      b.send({ type: "execute", id: 2, session: "mine", code: "x", spec });
      expect(await b.final(2)).toMatchObject({ event: "error", code: "session_not_found" });
      b.send({ type: "variables", id: 3, session: "mine" });
      expect(await b.final(3)).toMatchObject({ event: "error", code: "session_not_found" });
      b.send({ type: "close", id: 4, session: "mine" });
      expect(await b.final(4)).toMatchObject({ event: "error", code: "session_not_found" });
      b.send({ type: "interrupt", id: 5, session: "mine" });
      expect(await b.final(5)).toMatchObject({ event: "ok", value: { interrupted: false } });
      b.send({ type: "close_all", id: 6 });
      expect(await b.final(6)).toMatchObject({ event: "ok", value: { closed: ["shared"] } });
      b.send({ type: "open", id: 7, session: "mine", spec, owned: true });
      expect(await b.final(7)).toMatchObject({ event: "error", code: "usage" });
      // A snapshot to the default place would write under snapshots/: refused.
      a.send({ type: "snapshot", id: 4, session: "mine" });
      expect(await a.final(4)).toMatchObject({ event: "error", code: "usage" });
      a.send({ type: "execute", id: 5, session: "mine", code: "x", spec });
      expect(await a.final(5)).toMatchObject({ result: { value: "41" } });
      a.close();
      await waitUntil("the owned session's worker is gone", () => !processAlive(pid), 15_000);
      b.send({ type: "list", id: 8 });
      expect(((await b.final(8)).value as { name: string }[]).map((s) => s.name)).not.toContain("mine");
      expect(snapshotDirs(h)).not.toContain("mine");
      // The name is free again, for anyone.
      b.send({ type: "execute", id: 9, session: "mine", code: "'x' in dir()", spec, owned: true });
      expect(await b.final(9)).toMatchObject({ result: { value: "False" } });
    } finally {
      a.close();
      b.close();
    }
  });

  test("a name that runs or is saved cannot be owned; a stop saves nothing of an owned session", async () => {
    const h = await started();
    const a = await client(h);
    try {
      a.send({ type: "execute", id: 1, session: "shared", code: "1", spec, owned: true });
      expect(await a.final(1)).toMatchObject({ event: "error", code: "usage" });
      a.send({ type: "close", id: 2, session: "shared", keep: true });
      expect(await a.final(2)).toMatchObject({ event: "ok", value: { closed: true } });
      // Saved (snapshot and spec on disk), not running: still taken.
      a.send({ type: "open", id: 3, session: "shared", spec, owned: true });
      const refused = await a.final(3);
      expect(refused).toMatchObject({ event: "error", code: "usage" });
      expect(refused.message).toContain("shared");
      a.send({ type: "execute", id: 4, session: "solo", code: "y = 1", spec, owned: true });
      expect(await a.final(4)).toMatchObject({ result: { status: "ok" } });
      a.send({ type: "stop", op: "stop", id: 5 });
      const stopped = await a.final(5);
      expect((stopped.value as { snapshots: { session: string }[] }).snapshots.map((s) => s.session)).not.toContain("solo");
    } finally {
      a.close();
    }
    expect(snapshotDirs(h)).not.toContain("solo");
    expect(snapshotDirs(h)).toContain("shared");
  });
});

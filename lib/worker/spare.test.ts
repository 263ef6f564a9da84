import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { ReplSession } from "../session/session.ts";
import { SpareWorkers } from "./spare.ts";
import { alive, PYTHON, tempHome, waitFor } from "../../tests/harness/mod.ts";

let tmp: ReturnType<typeof tempHome>;
let spares: SpareWorkers;
const sessions: ReplSession[] = [];

beforeEach(() => {
  tmp = tempHome();
  spares = new SpareWorkers();
});
afterEach(async () => {
  await Promise.all(sessions.splice(0).map((s) => s.close()));
  await spares.closeAll();
  tmp.remove();
});

async function start(id: string): Promise<ReplSession> {
  const s = await ReplSession.start(id, { python: PYTHON, home: tmp.home, spares });
  sessions.push(s);
  return s;
}

async function readySparePids(): Promise<number[]> {
  let pids: number[] = [];
  const end = Date.now() + 10_000;
  while (pids.length === 0 && Date.now() < end) {
    pids = await spares.pids();
    if (pids.length === 0) await Bun.sleep(20);
  }
  return pids;
}

describe("SpareWorkers", () => {
  test("a new session adopts the warm spare, which holds no state of another session", async () => {
    const a = await start("a");
    await a.execute("secret = 1");
    const [sparePid] = await readySparePids();
    expect(sparePid).toBeGreaterThan(0);
    const b = await start("b");
    expect(b.pid).toBe(sparePid as number);
    const r = await b.execute("secret");
    expect(r.status).toBe("error");
    expect(r.exception).toStartWith("NameError");
    // The first cell of an adopted worker is still the session's first cell.
    expect((await b.execute("1 / 0")).traceback).toContain("<cell-");
  });

  test("a spare that died is not adopted", async () => {
    await start("a");
    const [sparePid] = await readySparePids();
    process.kill(sparePid as number, "SIGKILL");
    await waitFor(() => !alive(sparePid as number), 5000, "the spare to die");
    // Until the host has seen the exit, the spare still looks ready.
    for (let i = 0; i < 500 && (await spares.pids()).includes(sparePid as number); i++) await Bun.sleep(10);
    const b = await start("b");
    expect(b.pid).not.toBe(sparePid as number);
    expect((await b.execute("2 + 2")).value).toBe("4");
  });

  test("a spare is only taken by a matching directory", async () => {
    await start("a");
    await readySparePids();
    const other = await ReplSession.start("elsewhere", { python: PYTHON, home: tmp.home, spares, cwd: tmp.home });
    sessions.push(other);
    expect((await other.execute("import os; os.getcwd()")).value).toBe(JSON.stringify(tmp.home).replace(/"/g, "'"));
  });

  test("closeAll() ends the spares and stops making new ones", async () => {
    await start("a");
    const pids = await readySparePids();
    await spares.closeAll();
    for (const pid of pids) await waitFor(() => !alive(pid), 5000, "the spare to exit");
    await start("b");
    await Bun.sleep(300);
    expect(await spares.pids()).toEqual([]);
  });
});

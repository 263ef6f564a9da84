// Workers behind a real transport (a test sshd on 127.0.0.1, tests/harness/sshd.ts): failures named
// after what failed, a spare checked alive through its connection before it is handed out, and the
// far side ended in band. The binary's end-to-end view of the same: tests/e2e/remote_workers.test.ts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { PYTHON, rejection, requireSshd, startSshd, tempHome, type TestSshd } from "../../tests/harness/mod.ts";
import { resolveInterpreter } from "./interpreter.ts";
import { runtimeLaunch } from "./launch.ts";
import { spareKey, SpareWorkers } from "./spare.ts";
import { Worker } from "./worker.ts";

let sshd: TestSshd;
let tmp: ReturnType<typeof tempHome>;

beforeAll(async () => {
  requireSshd();
  sshd = await startSshd();
  tmp = tempHome();
});
afterAll(async () => {
  await sshd?.stop();
  tmp?.remove();
});

async function start(python: string, extra: { startTimeoutMs?: number } = {}): Promise<Worker> {
  const interpreter = await resolveInterpreter({ python, home: tmp.home });
  const launch = await runtimeLaunch(tmp.home, interpreter);
  return Worker.start({ argv: launch.argv, stdinPreamble: launch.stdinPreamble, kind: launch.kind, label: interpreter.command, ...extra });
}

describe("a worker over ssh", () => {
  test("runs, reports the far side's facts, and close() leaves nothing on the far side", async () => {
    const w = await start(sshd.python(PYTHON));
    try {
      expect(w.kind).toBe("transport");
      let out = "";
      await w.request({ type: "execute", code: "import subprocess\np = subprocess.Popen(['sleep', '600'])\nprint('up')" }, { output: (_s, t) => (out += t) });
      expect(out).toBe("up\n");
      const facts = await w.info();
      expect(facts?.pid).toBe(w.ready?.pid as number);
      expect(facts?.pid).not.toBe(w.pid); // the far python, not the local ssh
      expect(facts?.watchdog).toBe(true); // started by the heartbeat
      expect(sshd.farProcesses().some((p) => p.comm === "sleep")).toBe(true);
    } finally {
      await w.close();
    }
    expect(await sshd.waitForNoFarProcesses(5_000)).toEqual([]);
  });

  test("failures are named: unreachable host, interpreter missing over there, not Python", async () => {
    const refused = await rejection(start(`ssh -F ${sshd.sshConfig} -o Port=1 ${"awrepl-test"} python3`));
    expect(refused.code).toBe("no_interpreter");
    expect(refused.message).toMatch(/^ssh exited 255: could not reach or log in to the remote host: .*Connection refused/);
    const missing = await rejection(start(sshd.python("python3.99")));
    expect(missing.message).toMatch(/^The interpreter of ".*python3\.99" was not found on the remote host: .*python3\.99/);
    const notPython = await rejection(start(sshd.python("true")));
    expect(notPython.message).toContain("(is it a Python interpreter?)");
    expect(await sshd.waitForNoFarProcesses(5_000)).toEqual([]);
  });

  test("a C loop longer than the heartbeat's timeout is not mistaken for a silent host", async () => {
    const interpreter = await resolveInterpreter({ python: sshd.python(PYTHON), home: tmp.home });
    const launch = await runtimeLaunch(tmp.home, interpreter);
    const w = await Worker.start({ argv: launch.argv, stdinPreamble: launch.stdinPreamble, kind: launch.kind, heartbeat: { intervalMs: 300, timeoutMs: 1_500 } });
    try {
      const far = w.ready?.pid as number;
      const spin = w.request({ type: "execute", code: "sum(range(10**12))" }).catch((err: Error) => err);
      await Bun.sleep(4_000); // over two timeouts: the pings pile up unread over there, which counts
      expect(w.state).toBe("ready");
      expect(sshd.farProcesses().some((p) => p.pid === far)).toBe(true);
      w.kill();
      expect(String(await spin)).toContain("killed by awrepl");
    } finally {
      w.kill();
      await w.exited;
    }
    expect(await sshd.waitForNoFarProcesses(5_000)).toEqual([]);
  });

  test("a spare whose connection went silent is not handed out: its ping fails, it is ended", async () => {
    const spares = new SpareWorkers();
    try {
      const interpreter = await resolveInterpreter({ python: sshd.python(PYTHON), home: tmp.home });
      const launch = await runtimeLaunch(tmp.home, interpreter);
      const key = spareKey(launch.argv, process.cwd(), process.env);
      spares.fill(key, () => Worker.start({ argv: launch.argv, stdinPreamble: launch.stdinPreamble, kind: launch.kind, heartbeat: false }));
      const [pid] = await waitForSpare(spares);
      process.kill(pid as number, "SIGSTOP"); // the local ssh stops: a partition as the host sees it
      const t0 = performance.now();
      expect(await spares.take(key)).toBeNull();
      expect(performance.now() - t0).toBeLessThan(10_000);
    } finally {
      await spares.closeAll();
    }
    expect(await sshd.waitForNoFarProcesses(5_000)).toEqual([]);
  });
});

async function waitForSpare(spares: SpareWorkers): Promise<number[]> {
  for (let i = 0; i < 300; i++) {
    const pids = await spares.pids();
    if (pids.length) return pids;
    await Bun.sleep(50);
  }
  throw new Error("no spare got ready within 15 s");
}

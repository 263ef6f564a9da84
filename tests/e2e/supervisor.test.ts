// The supervisor end to end, through the compiled binary: named sessions across processes, ordering,
// start-up races, crashes, hostile input on the socket, permissions, and that nothing is left behind.
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { join } from "node:path";
import { processAlive } from "../../lib/core/process.ts";
import { AWREPL_VERSION, SUPERVISOR_PROTOCOL } from "../../lib/core/version.ts";
import { socketPath } from "../../lib/settings/home.ts";
import { cleanupHome, makeHome, processesOf, run, start, waitForNoProcesses } from "../harness/mod.ts";
import { converse, waitUntil } from "./supervisor_socket.ts";

const homes: string[] = [];
function home(): string {
  const h = makeHome();
  homes.push(h);
  return h;
}

afterEach(async () => {
  const errors: string[] = [];
  for (const h of homes.splice(0)) {
    try {
      await cleanupHome(h);
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  if (errors.length) throw new Error(errors.join("\n"));
});

/** The supervisor's pid, from `daemon status --json` (null when none runs). */
async function supervisorPid(h: string): Promise<number | null> {
  const r = await run(["daemon", "status", "--json"], { home: h });
  expect(r.code).toBe(0);
  return (JSON.parse(r.stdout) as { pid: number } | null)?.pid ?? null;
}

function supervisorsOf(h: string): number[] {
  return processesOf(h).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("__supervisor");
    } catch {
      return false;
    }
  });
}

/** The worker processes (sessions' and spares') a supervisor started: its Python children. */
function workersOf(h: string, supervisor: number): number[] {
  return processesOf(h).filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      return ppid === supervisor && /python[\d.]*$/.test(readlinkSync(`/proc/${pid}/exe`));
    } catch {
      return false;
    }
  });
}

/** Alive and not a zombie (a detached supervisor is reaped by init, maybe late). */
const alive = processAlive;

async function workerPid(h: string, session: string): Promise<number> {
  const r = await run(["-s", session, "run", "import os; os.getpid()"], { home: h });
  expect(r.code).toBe(0);
  return Number(r.stdout.trim());
}

describe("named sessions across processes", () => {
  test("state set by one call is there in the next", async () => {
    const h = home();
    const first = await run(["--session", "a", "run", "x = 42"], { home: h });
    expect(first.code).toBe(0);
    const second = await run(["run", "print(x)", "-s", "a"], { home: h });
    expect(second.stderr).toBe("");
    expect(second.stdout).toBe("42\n");
    expect(second.code).toBe(0);
    // Another session does not see it.
    const other = await run(["-s", "b", "run", "x"], { home: h });
    expect(other.code).toBe(1);
    expect(other.stderr).toContain("NameError");
  });

  test("8 concurrent runs on one session each increment the counter once", async () => {
    const h = home();
    expect((await run(["-s", "c", "run", "n = 0"], { home: h })).code).toBe(0);
    const runs = await Promise.all(Array.from({ length: 8 }, () => run(["-s", "c", "run", "n += 1"], { home: h })));
    for (const r of runs) expect(r.code).toBe(0);
    const r = await run(["-s", "c", "run", "n"], { home: h });
    expect(r.stdout.trim()).toBe("8");
  });

  test("16 simultaneous first calls start exactly one supervisor, and all succeed", async () => {
    const h = home();
    const runs = await Promise.all(Array.from({ length: 16 }, (_, i) => run(["-s", `s${i % 4}`, "run", `${i} * 2`], { home: h })));
    runs.forEach((r, i) => {
      expect(r.stderr).toBe("");
      expect(r.stdout.trim()).toBe(String(i * 2));
    });
    expect(supervisorsOf(h)).toHaveLength(1);
    const listed = JSON.parse((await run(["sessions", "--json"], { home: h })).stdout) as { name: string }[];
    expect(listed.map((s) => s.name).sort()).toEqual(["s0", "s1", "s2", "s3"]);
  });

  test("sessions --json reports each session's worker, interpreter, directory and counts", async () => {
    const h = home();
    await run(["-s", "a", "run", "1"], { home: h });
    await run(["-s", "a", "run", "2"], { home: h });
    const pid = await workerPid(h, "a");
    const rows = JSON.parse((await run(["sessions", "--json"], { home: h })).stdout);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ name: "a", pid, state: "idle", cells_run: 3, cwd: h });
    expect(rows[0].rss_bytes).toBeGreaterThan(1024 * 1024);
    expect(rows[0].age_ms).toBeGreaterThanOrEqual(rows[0].idle_ms);
    const text = await run(["sessions"], { home: h });
    expect(text.stdout).toContain("NAME");
    expect(text.stdout).toContain(String(pid));
  });
});

describe("spare workers", () => {
  test("a new session takes the warm spare the supervisor keeps, and stop ends the spare too", async () => {
    const h = home();
    const first = await workerPid(h, "a");
    const sup = (await supervisorPid(h)) as number;
    let spares: number[] = [];
    await waitUntil("a spare worker is started", () => {
      spares = workersOf(h, sup).filter((pid) => pid !== first);
      return spares.length > 0;
    });
    const second = await workerPid(h, "b");
    expect(spares).toContain(second);
    // The spare was a fresh namespace: nothing of a's leaks into b.
    await run(["-s", "a", "run", "only_in_a = 1"], { home: h });
    expect((await run(["-s", "b", "run", "'only_in_a' in globals()"], { home: h })).stdout).toBe("False\n");
    expect((await run(["daemon", "stop"], { home: h })).code).toBe(0);
    expect(await waitForNoProcesses(h)).toEqual([]);
  });
});

describe("lifecycle", () => {
  test("kill -9 of the supervisor: its workers exit, and the next call starts a new one", async () => {
    const h = home();
    const worker = await workerPid(h, "a");
    // A busy worker must notice too, not only an idle one.
    const busy = await start(["-s", "b", "run", "import time; print('sleeping', flush=True); time.sleep(300)"], { home: h });
    await busy.waitForStdout("sleeping");
    const busyWorker = await workerPid(h, "c");
    const sup = await supervisorPid(h);
    expect(sup).not.toBeNull();
    process.kill(sup as number, "SIGKILL");
    await waitUntil("the idle worker exits", () => !alive(worker));
    await waitUntil("the other worker exits", () => !alive(busyWorker));
    const lost = await busy.result;
    expect(lost.code).toBe(125);
    expect(lost.stderr).toContain("supervisor");
    const again = await run(["-s", "a", "run", "1 + 1"], { home: h });
    // Re-created as it was made (its saved spec); a killed supervisor saved nothing, and that is said.
    expect(again.stderr).toBe("awrepl: Session a was re-created as it was made, but it had no snapshot: its earlier state is gone.\n");
    expect(again.stdout).toBe("2\n");
    expect(await supervisorPid(h)).not.toBe(sup);
  });

  test("a deleted socket: the orphaned supervisor exits without touching the new one's socket or newer state", async () => {
    const h = home();
    expect((await run(["-s", "k", "run", "x = 2"], { home: h })).code).toBe(0);
    const orphan = (await supervisorPid(h)) as number;
    rmSync(socketPath(h));
    const second = await run(["-s", "k", "run", "x = 3"], { home: h });
    expect(second.code).toBe(0);
    const current = (await supervisorPid(h)) as number;
    expect(current).not.toBe(orphan);
    // The orphan checks its socket every 10 s.
    await waitUntil("the orphaned supervisor exits", () => !alive(orphan), 30_000);
    expect(alive(current)).toBe(true);
    expect(existsSync(socketPath(h))).toBe(true);
    const after = await run(["-s", "k", "run", "x"], { home: h });
    expect(after.stdout).toBe("3\n");
    expect(await supervisorPid(h)).toBe(current);
    // The state that survives a stop is the live supervisor's.
    expect((await run(["daemon", "stop"], { home: h })).code).toBe(0);
    const restored = await run(["-s", "k", "run", "x"], { home: h });
    expect(restored.stdout).toBe("3\n");
  }, 60_000);

  test("a supervisor that accepts but never answers gives a clear error, not a hang", async () => {
    const h = home();
    await run(["-s", "a", "run", "1"], { home: h });
    const sup = (await supervisorPid(h)) as number;
    process.kill(sup, "SIGSTOP");
    try {
      const r = await run(["-s", "a", "run", "2"], { home: h, timeoutMs: 40_000 });
      expect(r.code).toBe(125);
      expect(r.stderr).toContain("did not answer");
      expect(r.stderr).toContain(join(h, "supervisor.log"));
    } finally {
      process.kill(sup, "SIGCONT");
    }
    expect((await run(["-s", "a", "run", "3"], { home: h })).stdout).toBe("3\n");
  }, 60_000);

  test("close ends the session's worker and forgets the session", async () => {
    const h = home();
    const worker = await workerPid(h, "a");
    await workerPid(h, "b");
    const r = await run(["close", "a"], { home: h });
    expect(r.code).toBe(0);
    await waitUntil("the worker exits", () => !alive(worker));
    const rows = JSON.parse((await run(["sessions", "--json"], { home: h })).stdout) as { name: string }[];
    expect(rows.map((s) => s.name)).toEqual(["b"]);
    const missing = await run(["close", "a"], { home: h });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("a");
  });

  test("close --all ends every worker", async () => {
    const h = home();
    const workers = [await workerPid(h, "a"), await workerPid(h, "b")];
    const r = await run(["close", "--all"], { home: h });
    expect(r.code).toBe(0);
    for (const w of workers) await waitUntil(`worker ${w} exits`, () => !alive(w));
    expect(JSON.parse((await run(["sessions", "--json"], { home: h })).stdout)).toEqual([]);
  });

  test("daemon stop leaves no process behind, busy sessions included", async () => {
    const h = home();
    await workerPid(h, "a");
    const busy = await start(["-s", "b", "run", "import time; print('go', flush=True); time.sleep(300)"], { home: h });
    await busy.waitForStdout("go");
    const r = await run(["daemon", "stop"], { home: h });
    expect(r.code).toBe(0);
    expect(await waitForNoProcesses(h, 10_000)).toEqual([]);
    expect((await busy.result).code).not.toBe(0);
    expect(await supervisorPid(h)).toBeNull();
  });

  test("idle exit: with no sessions left the supervisor goes away by itself", async () => {
    const h = home();
    const env = { AWREPL_IDLE_EXIT_MS: "300" };
    expect((await run(["-s", "a", "run", "1"], { home: h, env })).code).toBe(0);
    const sup = await supervisorPid(h);
    expect(sup).not.toBeNull();
    await Bun.sleep(600);
    expect(alive(sup as number)).toBe(true); // a session keeps it alive
    await run(["close", "a"], { home: h, env });
    await waitUntil("the supervisor exits", () => !alive(sup as number));
    expect(await waitForNoProcesses(h)).toEqual([]);
  });
});

describe("interrupts", () => {
  test("interrupt from another process stops the running cell and keeps the session", async () => {
    const h = home();
    await run(["-s", "a", "run", "kept = 'yes'"], { home: h });
    const cell = await start(["-s", "a", "run", "import time\nprint('started', flush=True)\ntime.sleep(300)"], { home: h });
    await cell.waitForStdout("started");
    const r = await run(["-s", "a", "interrupt"], { home: h });
    expect(r.code).toBe(0);
    const interrupted = await cell.result;
    expect(interrupted.code).toBe(130);
    expect((await run(["-s", "a", "run", "kept"], { home: h })).stdout).toBe("'yes'\n");
  });

  test("a client killed mid-cell gets its cell interrupted, so the next call does not wait for it", async () => {
    const h = home();
    const before = await workerPid(h, "a");
    const cell = await start(["-s", "a", "run", "import time\nprint('started', flush=True)\ntime.sleep(300)\ndone = True"], { home: h });
    await cell.waitForStdout("started");
    cell.child.kill("SIGKILL");
    await cell.result;
    // Within the command timeout (30 s), far below the cell's 300 s.
    const next = await run(["-s", "a", "run", "'done' in globals()"], { home: h });
    expect(next.stdout).toBe("False\n");
    expect(await workerPid(h, "a")).toBe(before);
  });

  test("a client killed during vars or inspect gets that request interrupted, so the next call does not wait for it", async () => {
    const h = home();
    // A long session timeout: without the interrupt the next call would wait far beyond the command timeout.
    const made = await run(["-s", "r", "run", "class Slow:\n    def __repr__(self):\n        while True: pass\ns = Slow()"], {
      home: h,
      env: { AWREPL_TIMEOUT_MS: "300000" },
    });
    expect(made.code).toBe(0);
    for (const args of [["vars"], ["inspect", "s"]]) {
      const stuck = await start(["-s", "r", ...args], { home: h });
      await Bun.sleep(1000); // an agent's tool timeout
      stuck.child.kill("SIGKILL");
      await stuck.result;
      const next = await run(["-s", "r", "run", "'next'"], { home: h });
      expect(next.stdout).toBe("'next'\n");
      expect(next.timedOut).toBe(false);
    }
  }, 90_000);

  test("interrupt without a session is a one-line usage error", async () => {
    const h = home();
    const r = await run(["interrupt"], { home: h });
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });
});

describe("the socket", () => {
  test("state directory 0700, socket 0600", async () => {
    const h = home();
    await run(["-s", "a", "run", "1"], { home: h });
    expect(statSync(h).mode & 0o777).toBe(0o700);
    const sock = statSync(socketPath(h));
    expect(sock.isSocket()).toBe(true);
    expect(sock.mode & 0o777).toBe(0o600);
  });

  test("a state directory too long for a socket path falls back to a short one", async () => {
    const h = join(home(), "d".repeat(60), "e".repeat(60));
    mkdirSync(h, { recursive: true, mode: 0o700 }); // the commands run in it
    const r1 = await run(["-s", "a", "run", "y = 7"], { home: h });
    expect(r1.stderr).toBe("");
    expect((await run(["-s", "a", "run", "y"], { home: h })).stdout).toBe("7\n");
    const path = socketPath(h);
    expect(path.startsWith(h)).toBe(false);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect((await run(["daemon", "stop"], { home: h })).code).toBe(0);
    expect(await waitForNoProcesses(h)).toEqual([]);
  });

  test("garbage on the socket gets errors or a closed connection and hurts no session", async () => {
    const h = home();
    await run(["-s", "a", "run", "x = 1"], { home: h });
    const path = socketPath(h);

    // Each probe on its own connection: what comes back before the supervisor closes it or answers.
    const probe = (payload: Buffer | string, wantLines: number) =>
      new Promise<string[]>((resolve, reject) => {
        const socket = connect(path);
        let text = "";
        const timer = setTimeout(() => {
          socket.destroy();
          reject(new Error(`No answer to ${String(payload).slice(0, 40)}: ${text}`));
        }, 10_000);
        const finish = () => {
          clearTimeout(timer);
          socket.destroy();
          resolve(text.split("\n").filter(Boolean));
        };
        socket.on("data", (d) => {
          text += d.toString();
          if (text.split("\n").filter(Boolean).length >= wantLines) finish();
        });
        socket.on("close", finish);
        socket.on("error", () => {});
        socket.write(payload);
      });
    const hello = JSON.stringify({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL, version: "0.0.0-test" });

    const notJson = await probe("this is not json\n", 1);
    expect(JSON.parse(notJson[0] as string)).toMatchObject({ event: "error", id: null, code: "protocol" });
    const binary = await probe(Buffer.from([0, 255, 254, 1, 2, 10]), 1);
    expect(JSON.parse(binary[0] as string)).toMatchObject({ event: "error", code: "protocol" });
    const invalidUtf8 = await probe(Buffer.concat([Buffer.from('{"type":"list","id":9,"x":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}\n')]), 1);
    expect(JSON.parse(invalidUtf8[0] as string)).toMatchObject({ event: "error", code: "protocol", message: "Request is not valid UTF-8" });
    const big = await probe(`${"z".repeat(100 * 1024)}\n`, 1);
    expect(JSON.parse(big[0] as string)).toMatchObject({ event: "error", code: "protocol" });
    const noHello = await probe(`${JSON.stringify({ type: "list", id: 1 })}\n`, 1);
    expect(JSON.parse(noHello[0] as string)).toMatchObject({ event: "error", id: 1 });
    // Another version may not use the sessions (it may only ask the supervisor to stop).
    const otherVersion = await probe(`${hello}\n${JSON.stringify({ type: "execute", id: 2, session: "a", code: "x = 666" })}\n`, 2);
    expect(JSON.parse(otherVersion[0] as string)).toMatchObject({ event: "hello", ok: false });
    expect(JSON.parse(otherVersion[1] as string)).toMatchObject({ event: "error", id: 2, code: "version_mismatch" });
    const ours = JSON.stringify({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION });
    const unknown = await probe(`${ours}\n${JSON.stringify({ type: "format_disk", id: 3 })}\n`, 2);
    expect(JSON.parse(unknown[0] as string)).toMatchObject({ event: "hello", ok: true });
    expect(JSON.parse(unknown[1] as string)).toMatchObject({ event: "error", id: 3, code: "protocol" });
    const badSession = await probe(`${ours}\n${JSON.stringify({ type: "execute", id: 4, session: "../../x", code: "1" })}\n`, 2);
    expect(JSON.parse(badSession[1] as string)).toMatchObject({ event: "error", id: 4, code: "usage" });
    // A line past the cap: a usage error naming the cap (the caller's cell was too big), then the connection is closed.
    const huge = await probe(Buffer.alloc(65 * 1024 * 1024, 0x61), 1);
    expect(JSON.parse(huge[0] as string)).toMatchObject({ event: "error", code: "usage", message: expect.stringContaining("longer than 67108864 bytes") });
    // A client vanishing in the middle of a line.
    await new Promise<void>((resolve) => {
      const socket = connect(path, () => {
        socket.write('{"type":"hello","op":"hello","protocol":2,"vers');
        socket.destroy();
        resolve();
      });
      socket.on("error", () => resolve());
    });

    const after = await run(["-s", "a", "run", "x"], { home: h });
    expect(after.stdout).toBe("1\n");
    const log = readFileSync(join(h, "supervisor.log"), "utf8");
    expect(log).not.toContain("uncaught");
  });
});

/**
 * A supervisor of protocol 1 as far as another version meets it: it reads requests by `op`, answers
 * hello by `type` with ok false, refuses the rest (a request without `op` is "unknown" to it), and
 * stops on `{"op":"stop"}`. It logs every line it receives.
 */
const PROTOCOL_1_SUPERVISOR = `
import { createServer } from "node:net";
import { appendFileSync, unlinkSync } from "node:fs";
const { OLD_SOCKET: path, OLD_LOG: log } = process.env;
const reply = (socket, message) => socket.write(JSON.stringify(message) + "\\n");
const server = createServer((socket) => {
  let buffered = "";
  socket.on("error", () => {});
  socket.on("data", (d) => {
    buffered += d;
    for (let nl = buffered.indexOf("\\n"); nl >= 0; nl = buffered.indexOf("\\n")) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      appendFileSync(log, line + "\\n");
      const request = JSON.parse(line);
      if (request.op === "hello") reply(socket, { type: "hello", ok: false, protocol: 1, version: "0.0.1", build: "old", pid: process.pid });
      else if (request.op === "stop") {
        reply(socket, { type: "ok", id: request.id ?? null, value: null });
        server.close();
        try { unlinkSync(path); } catch {}
        setTimeout(() => process.exit(0), 50);
      } else reply(socket, { type: "error", id: request.id ?? null, code: "protocol", message: "Unknown op " + JSON.stringify(request.op ?? null) });
    }
  });
});
server.listen(path, () => appendFileSync(log, "listening\\n"));
setTimeout(() => process.exit(3), 60_000); // never outlives its test
`;

describe("versions", () => {
  test("a client of protocol 1 is told the versions differ, refused in its own spelling, and stops the supervisor (which snapshots first)", async () => {
    const h = home();
    await run(["-s", "a", "run", "x = 1"], { home: h });
    const pid = (await supervisorPid(h)) as number;
    const old = await converse(socketPath(h));
    try {
      old.send({ op: "hello", protocol: 1, version: "0.0.1" });
      old.send({ op: "execute", id: 2, session: "a", code: "x = 666" });
      expect(await old.next()).toMatchObject({ type: "hello", event: "hello", ok: false, protocol: SUPERVISOR_PROTOCOL, pid });
      expect(await old.next()).toMatchObject({ type: "error", event: "error", id: 2, code: "version_mismatch" });
      old.send({ op: "stop", id: 3 });
      expect(await old.next()).toMatchObject({ type: "ok", id: 3 });
    } finally {
      old.close();
    }
    await waitUntil("the supervisor is gone", () => !alive(pid), 20_000);
    // Its cell never ran; the state came back from the snapshot the stop wrote.
    expect((await run(["-s", "a", "run", "x"], { home: h })).stdout).toBe("1\n");
  });

  test("a client of this protocol: the hello reply carries both spellings, later replies only `event`", async () => {
    const h = home();
    await run(["-s", "a", "run", "1"], { home: h });
    const pid = (await supervisorPid(h)) as number;
    const c = await converse(socketPath(h));
    try {
      c.send({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION });
      c.send({ type: "list", id: 1 });
      expect(await c.next()).toMatchObject({ event: "hello", type: "hello", ok: true, protocol: SUPERVISOR_PROTOCOL });
      const list = await c.next();
      expect(list).toMatchObject({ event: "ok", id: 1, value: [{ name: "a" }] });
      expect(list.type).toBeUndefined();
      c.send({ type: "stop", id: 2 });
      // Answered once every session's snapshot was tried, with what became of each.
      expect(await c.next()).toMatchObject({ event: "ok", id: 2, value: { snapshots: [{ session: "a", status: "saved" }] } });
    } finally {
      c.close();
    }
    await waitUntil("the supervisor is gone", () => !alive(pid), 20_000);
  });

  test("a protocol 1 supervisor on the socket: the client stops it (its stop spelled the old way too) and starts its own", async () => {
    const h = home();
    const log = join(h, "old-supervisor.log");
    const script = join(h, "old-supervisor.mjs");
    writeFileSync(script, PROTOCOL_1_SUPERVISOR);
    const old = spawn(process.execPath, [script], { env: { ...process.env, OLD_SOCKET: socketPath(h), OLD_LOG: log, AWREPL_E2E_HOME: h }, stdio: "ignore" });
    try {
      await waitUntil("the old supervisor listens", () => existsSync(log) && readFileSync(log, "utf8").includes("listening"));
      const r = await run(["-s", "a", "run", "6 * 7"], { home: h });
      expect(r.stderr).toBe("");
      expect(r.stdout).toBe("42\n");
      await waitUntil("the old supervisor has exited", () => old.exitCode !== null);
      expect(old.exitCode).toBe(0);
      const received = readFileSync(log, "utf8").split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
      expect(received[0]).toMatchObject({ type: "hello", op: "hello", protocol: SUPERVISOR_PROTOCOL });
      expect(received.filter((m) => m.op === "stop")).toEqual([expect.objectContaining({ type: "stop", op: "stop" })]);
      expect(await supervisorPid(h)).not.toBe(old.pid);
    } finally {
      old.kill("SIGKILL");
    }
  });
});

describe("session commands", () => {
  test("vars, inspect and reset act on the session; without a session they are usage errors", async () => {
    const h = home();
    await run(["-s", "a", "run", "alpha = [1, 2, 3]\nbeta = 'b'"], { home: h });
    const vars = await run(["-s", "a", "vars", "--json"], { home: h });
    expect(vars.code).toBe(0);
    expect(Object.keys(JSON.parse(vars.stdout)).sort()).toEqual(["alpha", "beta"]);
    const text = await run(["vars", "-s", "a"], { home: h });
    expect(text.stdout).toContain("alpha");
    const info = await run(["-s", "a", "inspect", "alpha", "--json"], { home: h });
    expect(JSON.parse(info.stdout)).toMatchObject({ type: "list", len: 3 });
    const missing = await run(["-s", "a", "inspect", "gamma"], { home: h });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("gamma");
    expect((await run(["-s", "a", "reset"], { home: h })).code).toBe(0);
    expect(JSON.parse((await run(["-s", "a", "vars", "--json"], { home: h })).stdout)).toEqual({});
    for (const cmd of [["vars"], ["inspect", "x"], ["reset"]]) {
      const r = await run(cmd, { home: h });
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split("\n")).toHaveLength(1);
    }
  });

  test("vars, inspect, reset, interrupt and snapshot on a name with no session and no snapshot fail and create nothing", async () => {
    const h = home();
    expect((await run(["-s", "real", "run", "x = 1"], { home: h })).code).toBe(0);
    for (const args of [["vars"], ["inspect", "x"], ["reset"], ["interrupt"], ["snapshot"], ["restore"], ["vars", "--json"]]) {
      const r = await run(["-s", "typo", ...args], { home: h });
      expect(r.code).toBe(2);
      expect(r.stderr).toBe('awrepl: No session named "typo"\n');
    }
    const sessions = await run(["sessions", "--json"], { home: h });
    expect((JSON.parse(sessions.stdout) as { name: string }[]).map((s) => s.name)).toEqual(["real"]);
    // A name that exists only as a snapshot is restored as before; run still creates on first use.
    expect((await run(["close", "--keep", "real"], { home: h })).code).toBe(0);
    const vars = await run(["-s", "real", "vars"], { home: h });
    expect(vars.code).toBe(0);
    expect(vars.stdout).toContain("x");
    expect((await run(["-s", "fresh", "run", "1"], { home: h })).stdout).toBe("1\n");
  });

  test("restore from a missing file and snapshot into a missing directory are usage errors naming the path; --json prints one error object", async () => {
    const h = home();
    expect((await run(["-s", "sn", "run", "x = 1"], { home: h })).code).toBe(0);
    const missing = join(h, "nope.pkl");
    const restore = await run(["-s", "sn", "restore", missing], { home: h });
    expect(restore.code).toBe(2);
    expect(restore.stderr).toBe(`awrepl: No snapshot at ${missing}\n`);
    const intoNowhere = join(h, "no-such-dir", "x.pkl");
    const snap = await run(["-s", "sn", "snapshot", intoNowhere], { home: h });
    expect(snap.code).toBe(2);
    expect(snap.stderr).toContain(intoNowhere);
    for (const args of [["restore", missing, "--json"], ["snapshot", intoNowhere, "--json"]]) {
      const r = await run(["-s", "sn", ...args], { home: h });
      expect(r.code).toBe(2);
      const parsed = JSON.parse(r.stdout) as { error: { code: string; message: string } };
      expect(parsed.error.code).toBe("usage");
      expect(parsed.error.message).toContain(args[1] as string);
    }
    // The session is untouched.
    expect((await run(["-s", "sn", "run", "x"], { home: h })).stdout).toBe("1\n");
  });

  test("run -f in a named session: __file__ is the file and its traceback names it", async () => {
    const h = home();
    const script = join(h, "script.py");
    writeFileSync(script, "print(__file__)\n\nraise ValueError('from the file')\n");
    const r = await run(["-s", "f", "run", "-f", script], { home: h });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe(`${script}\n`);
    expect(r.stderr).toContain(`File "${script}", line 3`);
  });

  test("Ctrl-C on run interrupts the cell, exits 130 and keeps the session", async () => {
    const h = home();
    await run(["-s", "a", "run", "kept = 1"], { home: h });
    const cell = await start(["-s", "a", "run", "import time\nprint('started', flush=True)\ntime.sleep(300)"], { home: h });
    await cell.waitForStdout("started");
    cell.child.kill("SIGINT");
    const r = await cell.result;
    expect(r.code).toBe(130);
    expect((await run(["-s", "a", "run", "kept"], { home: h })).stdout).toBe("1\n");
  });

  test("daemon status, logs and stop in text", async () => {
    const h = home();
    expect((await run(["daemon", "status"], { home: h })).stdout).toContain("not running");
    await run(["-s", "a", "run", "1"], { home: h });
    const status = await run(["daemon", "status"], { home: h });
    expect(status.stdout).toContain("Supervisor running");
    expect(status.stdout).toContain(socketPath(h));
    const logs = await run(["daemon", "logs"], { home: h });
    expect(logs.stdout).toContain("listening on");
    expect(logs.stdout).toContain("session a: worker pid");
    const stop = await run(["daemon", "stop"], { home: h });
    expect(stop.code).toBe(0);
    expect(await waitForNoProcesses(h)).toEqual([]);
  });
});

describe("big and broken cells", () => {
  test("a 5 MB cell travels through the socket intact", async () => {
    const h = home();
    const cell = `y = '${"a".repeat(5_000_000)}'\nlen(y)`;
    const r = await run(["-s", "a", "run", "-"], { home: h, input: cell });
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe("5000000\n");
  });

  test("a worker that dies is reported, and the next call gets a fresh one in the same session", async () => {
    const h = home();
    const before = await workerPid(h, "a");
    const died = await run(["-s", "a", "run", "--json", "import os; os._exit(3)"], { home: h });
    expect(died.code).toBe(125);
    expect(JSON.parse(died.stdout)).toMatchObject({ status: "died", session: "a" });
    const after = await workerPid(h, "a");
    expect(after).not.toBe(before);
    // Another session was not touched.
    expect((await run(["-s", "b", "run", "1"], { home: h })).code).toBe(0);
  });
});

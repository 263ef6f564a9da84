// Limits per worker against the real mechanisms (issue 24, docs/limits.md): rlimits, and the cgroups
// this machine lets its root make (cgroup v1 here; v2 where a machine has its controllers). Each test
// drives lib/worker as a session does (runtimeLaunch, then Worker.start) with small bounds (256 MiB,
// 64 processes), and ends every worker it started; each group is gone after its worker.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmdirSync } from "node:fs";
import { join } from "node:path";
import { AwreplError } from "../../lib/core/errors.ts";
import { resolveInterpreter } from "../../lib/worker/interpreter.ts";
import { runtimeLaunch } from "../../lib/worker/launch.ts";
import { sweepStaleGroups } from "../../lib/worker/limits/cgroup.ts";
import { type LimitsHost, limitsHost } from "../../lib/worker/limits/plan.ts";
import { Worker } from "../../lib/worker/worker.ts";
import { forkCell } from "./limits_cells.ts";
import { cell, launchedWorkers, PYTHON, rejection, requireBwrap, tempHome, waitFor } from "../harness/mod.ts";

const MiB = 1024 * 1024;
/** This machine without cgroups: the rlimits alone. */
const RLIMITS_ONLY: LimitsHost = { platform: "linux", uid: 0, cgroups: null };

/** The parent of this machine's worker groups for `controller`, or a failure that says what is missing. */
function cgroupParent(controller: "memory" | "pids" | "cpu"): string {
  const parent = limitsHost().cgroups?.parents[controller];
  if (!parent) throw new Error(`this test needs a ${controller} cgroup awrepl can make (root with cgroup v1, or cgroup v2 with the controller): ${limitsHost().cgroups?.missing}`);
  return parent.dir;
}

/** This process's groups left under `parent` (after a worker's end there are none). */
function ourGroups(parent: string): string[] {
  return existsSync(parent) ? readdirSync(parent).filter((n) => new RegExp(`^w-\\d+-${process.pid}-\\d+$`).test(n)) : [];
}

let tmp: ReturnType<typeof tempHome>;
let project: ReturnType<typeof tempHome>;
let workers: ReturnType<typeof launchedWorkers>;
beforeEach(() => {
  tmp = tempHome();
  project = tempHome("awrepl-project-");
  workers = launchedWorkers(tmp.home);
});
afterEach(async () => {
  await workers.stop();
  tmp.remove();
  project.remove();
});

describe("memory", () => {
  test("with an rlimit, an allocation over the limit is MemoryError in the cell, and the worker lives on", async () => {
    const w = await workers.start({ limits: { memory_bytes: 256 * MiB }, limitsHost: RLIMITS_ONLY, cwd: project.home });
    expect(w.limitsUsage()?.mechanisms).toEqual({ memory: "rlimit" });
    const over = await cell(w, "x = bytearray(b'x') * (400 << 20)");
    expect(over.ename).toBe("MemoryError");
    const after = await cell(w, "y = bytearray(64 << 20)\nprint(len(y) >> 20, 21 * 2)");
    expect(after.out.trim()).toBe("64 42");
  });

  test("in a cgroup, the kernel ends the worker and its death says which limit was reached", async () => {
    const parent = cgroupParent("memory");
    const w = await workers.start({ limits: { memory_bytes: 256 * MiB }, cwd: project.home });
    const mechanism = w.limitsUsage()?.mechanisms.memory;
    expect(mechanism).toMatch(/^cgroup v[12]$/);
    expect(ourGroups(parent).length).toBe(1);
    // Usage while alive: the group's charge and peak, CPU seconds, tasks.
    await cell(w, "held = bytearray(b'x') * (64 << 20)");
    const usage = w.limitsUsage();
    expect(usage?.memory_bytes).toBeGreaterThan(64 * MiB);
    expect(usage?.peak_memory_bytes).toBeGreaterThanOrEqual(usage?.memory_bytes ?? Infinity);
    expect(usage?.cpu_seconds).toBeGreaterThan(0);
    expect(usage?.procs).toBeGreaterThanOrEqual(1);
    const err = await rejection(cell(w, "x = bytearray(b'x') * (400 << 20)"));
    expect(err).toBeInstanceOf(AwreplError);
    expect((err as AwreplError).code).toBe("worker_died");
    expect(err.message).toContain(`memory limit 256 MiB reached (${mechanism})`);
    const exit = await w.exited;
    expect(exit.signal).toBe("SIGKILL");
    expect(exit.reason).toContain("memory limit 256 MiB reached");
    await waitFor(() => ourGroups(parent).length === 0, 5_000, "the worker's memory group to be removed");
  });
});

describe("processes", () => {
  const forkBomb = forkCell(500);
  test("a bounded fork bomb under max_procs fails inside the cell; another worker and then the same one go on", async () => {
    const parent = cgroupParent("pids");
    const w = await workers.start({ limits: { max_procs: 64 }, cwd: project.home });
    expect(w.limitsUsage()?.mechanisms.procs).toMatch(/^cgroup v[12]$/);
    const other = await workers.start({ cwd: project.home });
    const bomb = await cell(w, forkBomb, 60_000);
    const [n, err] = bomb.out.trim().split(" ");
    expect(err).toBe("BlockingIOError");
    expect(Number(n)).toBeLessThan(64);
    expect(Number(n)).toBeGreaterThan(10);
    const spawnOk = "import subprocess\nprint(subprocess.run(['true']).returncode)";
    expect((await cell(other, spawnOk)).out.trim()).toBe("0");
    expect((await cell(w, spawnOk)).out.trim()).toBe("0");
    expect(w.limitsUsage()?.procs).toBeLessThanOrEqual(64);
    w.kill();
    await w.exited;
    await waitFor(() => ourGroups(parent).length === 0, 5_000, "the worker's pids group to be removed");
  });

  test("as root without the pids controller, max_procs cannot be enforced: the start fails naming it; best_effort starts without it", async () => {
    const interpreter = await resolveInterpreter({ python: PYTHON, home: tmp.home });
    const err = await rejection(runtimeLaunch(tmp.home, interpreter, { limits: { max_procs: 64 }, limitsHost: RLIMITS_ONLY }));
    expect(err.message).toContain("The limit max_procs (--max-procs) cannot be enforced here");
    expect(err.message).toContain("RLIMIT_NPROC does not bind root");
    const w = await workers.start({ limits: { max_procs: 64, max_file_bytes: MiB, best_effort: true }, limitsHost: RLIMITS_ONLY });
    expect(w.limitsUsage()?.mechanisms).toEqual({ procs: "none", file_size: "rlimit" });
    expect((await cell(w, "print(1 + 1)")).out.trim()).toBe("2");
  });
});

describe("file size", () => {
  test("a file over max_file_bytes is EFBIG for the cell, and nothing else: the worker, its output and small files go on", async () => {
    const w = await workers.start({ limits: { max_file_bytes: MiB }, cwd: project.home });
    expect(w.limitsUsage()?.mechanisms).toEqual({ file_size: "rlimit" });
    const big = join(project.home, "big.bin");
    const over = await cell(
      w,
      `
import os
try:
    with open(${JSON.stringify(big)}, "wb") as f:
        f.write(b"x" * (2 << 20))
except OSError as e:
    print(e.errno, os.path.getsize(${JSON.stringify(big)}))
`,
    );
    expect(over.out.trim()).toBe(`27 ${MiB}`);
    const after = await cell(w, `open(${JSON.stringify(join(project.home, "small.txt"))}, "w").write("ok")\nprint("x" * (2 << 20))`);
    expect(after.status).toBe("ok");
    expect(after.out.length).toBe((2 << 20) + 1); // a pipe is no file: the output is whole
    expect(readFileSync(join(project.home, "small.txt"), "utf8")).toBe("ok");
  });
});

describe("cpu", () => {
  test("cpu_percent in a cgroup: a busy cell gets about its share of a CPU", async () => {
    cgroupParent("cpu");
    const w = await workers.start({ limits: { cpu_percent: 20 }, cwd: project.home });
    expect(w.limitsUsage()?.mechanisms.cpu).toMatch(/^cgroup v[12]$/);
    const busy = await cell(w, "import time\nt, c = time.time(), time.process_time()\nwhile time.time() - t < 1.5: pass\nprint(time.process_time() - c)");
    // 20 % of 1.5 s is 0.3 s; unlimited it would be ~1.5 s (generous: the machine is shared).
    expect(Number(busy.out.trim())).toBeLessThan(0.9);
    expect((w.limitsUsage()?.cpu_seconds ?? 0) > 0).toBe(true);
  });

  test("with rlimits only, cpu_percent cannot be enforced (an rlimit caps total seconds, not a share)", async () => {
    const interpreter = await resolveInterpreter({ python: PYTHON, home: tmp.home });
    const err = await rejection(runtimeLaunch(tmp.home, interpreter, { limits: { cpu_percent: 50 }, limitsHost: RLIMITS_ONLY }));
    expect(err.message).toMatch(/The limit cpu_percent \(--cpu\) cannot be enforced here: the cpu cgroup controller is needed/);
  });
});

describe("every worker", () => {
  test("limits on a command-line worker (ssh, docker exec) are refused: they belong on its own side", async () => {
    const far = { command: "ssh box python3", argv: ["ssh", "box", "python3"], local: false, source: "option" };
    const err = await rejection(runtimeLaunch(tmp.home, far, { limits: { memory_bytes: 256 * MiB } }));
    expect(err.message).toBe('Resource limits apply to a local or sandboxed interpreter; "ssh box python3" is a command line (set limits on its own side)');
  });

  test("a limited worker whose interpreter is missing fails its start saying so, and leaves no group behind", async () => {
    const parent = cgroupParent("memory");
    const interpreter = await resolveInterpreter({ python: PYTHON, home: tmp.home });
    const launch = await runtimeLaunch(tmp.home, interpreter, { limits: { memory_bytes: 256 * MiB } });
    const argv = [...launch.argv.slice(0, 4), "/nonexistent/python3", "x.pyc"]; // the preamble, then a missing interpreter
    const err = await rejection(Worker.start({ argv, kind: "local", limits: launch.limits, label: "/nonexistent/python3" }));
    expect(err.code).toBe("no_interpreter");
    expect(err.message).toContain("/nonexistent/python3: not found");
    await waitFor(() => ourGroups(parent).length === 0, 5_000, "the failed worker's group to be removed");
  });

  test("its OOM score is above the host's, with limits and without (the kernel picks a worker before the supervisor)", async () => {
    const own = Number(readFileSync("/proc/self/oom_score_adj", "utf8"));
    const limited = await workers.start({ limits: { max_file_bytes: MiB } });
    const plain = await workers.start({});
    for (const w of [limited, plain]) expect(Number(readFileSync(`/proc/${w.pid}/oom_score_adj`, "utf8"))).toBeGreaterThan(own);
  });

  test("a group left by an awrepl that is gone is removed; this process's own are kept", async () => {
    const parent = cgroupParent("memory");
    mkdirSync(parent, { recursive: true });
    const dead = spawnSync("true").pid as number; // exited and reaped: its pid names no process
    const nsId = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1];
    const stale = join(parent, `w-${nsId}-${dead}-1`);
    const mine = join(parent, `w-${nsId}-${process.pid}-999999`);
    mkdirSync(stale);
    mkdirSync(mine);
    try {
      sweepStaleGroups(parent);
      expect(existsSync(stale)).toBe(false);
      expect(existsSync(mine)).toBe(true);
    } finally {
      for (const d of [stale, mine]) if (existsSync(d)) rmdirSync(d);
    }
  });
});

describe("under the sandbox", () => {
  test("the limits hold inside bwrap: the fork bomb fails in the cell, an allocation ends the worker with the limit named", async () => {
    requireBwrap();
    cgroupParent("pids");
    const w: Worker = await workers.start({ sandbox: {}, cwd: project.home, env: process.env, limits: { memory_bytes: 256 * MiB, max_procs: 64 } });
    expect(w.kind).toBe("sandbox");
    const bomb = await cell(
      w,
      "import os\ntry:\n    while True:\n        if os.fork() == 0:\n            import time; time.sleep(60); os._exit(0)\nexcept OSError as e:\n    print(type(e).__name__)",
      60_000,
    );
    expect(bomb.out.trim()).toBe("BlockingIOError");
    const err = await rejection(cell(w, "x = bytearray(b'x') * (400 << 20)"));
    expect(err.message).toContain("memory limit 256 MiB reached");
    // Its children die with the sandbox's pid namespace; the groups go once the last of them is reaped.
    await waitFor(() => ourGroups(cgroupParent("pids")).length === 0 && ourGroups(cgroupParent("memory")).length === 0, 15_000, "the sandbox's groups to be removed");
  });
});

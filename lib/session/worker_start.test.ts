// A session's resource limits reach its worker (startSessionWorker passes them to the launch and to
// Worker.start), a spare serves only a session with the same limits, and a death by the memory
// cgroup is a cell's `died` with the limit named, followed by the session's usual recovery. Real
// workers, real cgroups where this machine lets its root make them (cgroup v1 here), else rlimits.
import { describe, expect, test } from "bun:test";
import { limitsHost } from "../worker/limits/plan.ts";
import { SpareWorkers } from "../worker/spare.ts";
import { tempHome, useSessions } from "../../tests/harness/mod.ts";

const MiB = 1024 * 1024;
const fixture = useSessions("limited");

/** The pid of the one spare once it is ready (a session starts its spare 100 ms after its own worker). */
async function readySpare(spares: SpareWorkers): Promise<number> {
  const until = Date.now() + 10_000;
  for (;;) {
    const pids = await spares.pids();
    if (pids.length === 1) return pids[0] as number;
    if (Date.now() > until) throw new Error(`no spare ready within 10 s (${pids.length} ready)`);
    await Bun.sleep(25);
  }
}

describe("a session's limits", () => {
  test("reach its worker: its facts show them, and a file over the size limit is EFBIG in the cell", async () => {
    const project = tempHome("awrepl-project-");
    try {
      const s = await fixture.start({ cwd: project.home, limits: { memory_bytes: 256 * MiB, max_file_bytes: MiB } });
      const usage = (await s.workerFacts())?.limits;
      expect(usage?.limits).toEqual({ memory_bytes: 256 * MiB, max_file_bytes: MiB });
      expect(usage?.mechanisms.file_size).toBe("rlimit");
      expect(usage?.mechanisms.memory).toMatch(/^(cgroup v[12]|rlimit)$/);
      const r = await s.execute("import os\nf = open('big', 'wb')\ntry:\n    f.write(b'x' * (2 << 20)); f.flush()\nexcept OSError as e:\n    print(e.errno)\nf.close()\nos.path.getsize('big')");
      expect(r.stdout.trim()).toBe("27");
      expect(r.value).toBe(String(MiB));
      expect((await s.execute("21 * 2")).value).toBe("42");
    } finally {
      project.remove();
    }
  }, 30_000);

  test("over the memory limit: died with the limit named where a cgroup ends it, MemoryError under an rlimit; the session goes on", async () => {
    const s = await fixture.start({ limits: { memory_bytes: 256 * MiB } });
    await s.execute("kept = 1");
    const over = await s.execute("x = bytearray(b'x') * (400 << 20)");
    if (limitsHost().cgroups?.parents.memory) {
      expect(over.status).toBe("died");
      expect(over.exception).toContain("memory limit 256 MiB reached (cgroup v");
      const next = await s.execute("'kept' in globals()");
      expect(next.value).toBe("False");
      expect(next.notice).toContain("memory limit 256 MiB reached");
    } else {
      expect(over.status).toBe("error");
      expect(over.exception).toStartWith("MemoryError");
      expect((await s.execute("kept")).value).toBe("1");
    }
  }, 60_000);

  test("a spare serves only a session with the same limits", async () => {
    const spares = new SpareWorkers();
    try {
      const a = await fixture.start({ spares, limits: { memory_bytes: 256 * MiB } }, "a");
      const spare = await readySpare(spares);
      // Other limits (the same command line when a cgroup enforces them): a new worker, with its own.
      const b = await fixture.start({ spares, limits: { memory_bytes: 512 * MiB } }, "b");
      expect(b.pid).not.toBe(spare);
      expect((await b.workerFacts())?.limits?.limits).toEqual({ memory_bytes: 512 * MiB });
      // No limits: not that spare either.
      const c = await fixture.start({ spares }, "c");
      expect(c.pid).not.toBe(spare);
      expect((await c.workerFacts())?.limits).toBeNull();
      // The same limits: the spare.
      const d = await fixture.start({ spares, limits: { memory_bytes: 256 * MiB } }, "d");
      expect(d.pid).toBe(spare);
      expect((await d.workerFacts())?.limits?.limits).toEqual({ memory_bytes: 256 * MiB });
      expect(a.pid).not.toBe(d.pid);
    } finally {
      await spares.closeAll();
    }
  }, 60_000);
});

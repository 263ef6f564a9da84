// A stop that cannot save a session's state never loses it silently (issue 11, issue 15 items 9-11),
// through the compiled binary: `daemon stop` names every session it could not save, on stderr and in
// --json, and exits 1; the next use of that name is re-created with its saved spec (never the
// caller's default interpreter), and says which older snapshot came back and how old it is, or that
// the state is gone; `close --keep` does not close what it could not save; the on-disk files of
// sessions `x` and `x.spec` are disjoint; the old flat layout is migrated; `restore PATH` refuses a
// FIFO and honours --timeout. The record does not depend on free space when the stop fails (issue 21
// item 2): a marker is reserved while the session runs, so a full disk, or a supervisor killed before
// it could say anything, still reaches the next user, and every restore says how old its snapshot is.
import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, renameSync, rmdirSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ExecResult } from "../../lib/protocol/result.ts";
import { CAN_MOUNT_TMPFS, cleanupHome, PYTHON, run, start, waitForNoProcesses, withHome } from "../harness/mod.ts";

/** A command line the caller's default (AWREPL_PYTHON=PYTHON) is not: `sys.flags.no_site` tells them apart. */
const OTHER_PYTHON = `${PYTHON} -S`;

async function ok(args: string[], home: string, env?: Record<string, string>): Promise<string> {
  const r = await run(args, { home, env });
  if (r.code !== 0) throw new Error(`awrepl ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

/** Starts a cell in C code that no interrupt can stop (so the next stop cannot snapshot that session). */
async function busyInC(home: string, name: string) {
  const cell = await start(["-s", name, "run", "--timeout", "0", "print('go', flush=True)\nsum(range(10**13))"], { home });
  await cell.waitForStdout("go");
  await Bun.sleep(300); // inside sum() by now
  return cell;
}

/** What a first result says of every restore at start: the snapshot's time and age, and that later cells are not in it. */
const RESTORE_AGE = /came back from its snapshot of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s old\): cells run after that snapshot are not in it\./;

/**
 * Runs `fn` with AWREPL_HOME on a private tmpfs of `size` (root on Linux), and a filler beside the
 * home that `fill()` grows until the file system is full and `free()` removes. Afterwards: no
 * process of the home is left, and the tmpfs is unmounted.
 */
async function withSmallDisk(size: string, fn: (home: string, disk: { fill(): void; free(): void }) => Promise<void>): Promise<void> {
  const mount = mkdtempSync(join(tmpdir(), "awrepl-disk-"));
  execFileSync("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", mount]);
  const home = join(mount, "home");
  const filler = join(mount, "filler");
  mkdirSync(home, { mode: 0o700 });
  const fill = () => {
    const fd = openSync(filler, "a");
    try {
      // Big pieces, then ever smaller ones: not one byte is left.
      for (const piece of [1024 * 1024, 4096, 1]) {
        const buf = Buffer.alloc(piece, 120);
        for (;;) {
          try {
            if (writeSync(fd, buf) < piece) break;
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
            break;
          }
        }
      }
    } finally {
      closeSync(fd);
    }
  };
  try {
    await fn(home, { fill, free: () => rmSync(filler, { force: true }) });
  } finally {
    rmSync(filler, { force: true });
    try {
      await cleanupHome(home);
    } finally {
      execFileSync("umount", [mount]);
      rmdirSync(mount);
    }
  }
}

type StopJson = { stopped: boolean; unsaved: string[]; snapshots: { session: string; status: string; error?: string; kept?: { path: string; taken_at: string; age_ms: number } | null }[] };

describe("daemon stop reports every session it could not save, and the next use hears it", () => {
  test("an older snapshot comes back, with its age; the session keeps its interpreter; exit 1 and --json name it", () =>
    withHome(async (home) => {
      await ok(["-s", "s", "--python", OTHER_PYTHON, "run", "import sys\nx = 1"], home);
      await ok(["-s", "s", "snapshot"], home);
      await ok(["-s", "s", "run", "x = 2"], home);
      await ok(["-s", "fine", "run", "y = 3"], home);
      const cell = await busyInC(home, "s");
      const stop = await run(["daemon", "stop", "--json"], { home });
      expect(stop.code).toBe(1);
      const report = JSON.parse(stop.stdout) as StopJson;
      expect(report.stopped).toBe(true);
      expect(report.unsaved).toEqual(["s"]);
      const s = report.snapshots.find((o) => o.session === "s");
      expect(s).toMatchObject({ status: "failed", error: expect.stringContaining("did not stop within 2000 ms of being interrupted"), kept: { path: join(home, "snapshots", "s", "snapshot.pkl") } });
      expect(report.snapshots.find((o) => o.session === "fine")?.status).toBe("saved");
      expect(stop.stderr).toContain("awrepl: session s: state NOT saved: its running cell did not stop");
      expect(stop.stderr).toContain("its next use restores an OLDER snapshot, of ");
      await cell.result;
      // The caller's default interpreter is another one: the session is made as it was.
      const back = JSON.parse(await ok(["-s", "s", "run", "--json", "x, sys.flags.no_site"], home)) as ExecResult;
      expect(back.value).toBe("(1, 1)");
      expect(back.restored?.restored).toContain("x");
      expect(back.notice).toMatch(/The snapshot of session s when its supervisor stopped \(stop requested\) \d+ s ago failed: its running cell did not stop/);
      expect(back.notice).toMatch(/It was restored from an OLDER snapshot, of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s old, .*snapshot\.pkl\): anything done after that is lost\./);
      // Said once.
      expect((await run(["-s", "s", "run", "x"], { home })).stderr).toBe("");
    }), 90_000);

  test("no earlier snapshot: the state is said lost everywhere, and the session is re-created as it was made", () =>
    withHome(async (home) => {
      await ok(["-s", "t", "--python", OTHER_PYTHON, "run", "import sys\nx = 1"], home);
      const cell = await busyInC(home, "t");
      const stop = await run(["daemon", "stop"], { home });
      expect(stop.code).toBe(1);
      expect(stop.stderr).toContain("awrepl: session t: state NOT saved: ");
      expect(stop.stderr).toContain("it has no earlier snapshot: its state is lost");
      await cell.result;
      expect(await ok(["sessions"], home)).toBe("No sessions running\nState NOT saved (re-created empty on next use): t\n");
      // A command that only looks does not show an empty namespace as if it were the session.
      const vars = await run(["-s", "t", "vars"], { home });
      expect(vars.code).toBe(2);
      expect(vars.stderr).toContain("Session t is not running and its state is lost: its snapshot failed when its supervisor stopped (stop requested)");
      const r = await run(["-s", "t", "run", "import sys\n'x' in globals(), sys.flags.no_site"], { home });
      expect(r.stdout).toBe("(False, 1)\n");
      expect(r.stderr).toContain("Its state was lost; this call ran in a fresh worker made as the session was created.");
    }), 90_000);

  test("a stop nobody waits for (SIGTERM): the log has it, and the next user of the session hears it", () =>
    withHome(async (home) => {
      await ok(["-s", "sig", "run", "x = 1"], home);
      const pid = (JSON.parse(await ok(["daemon", "status", "--json"], home)) as { pid: number }).pid;
      const cell = await busyInC(home, "sig");
      process.kill(pid, "SIGTERM");
      await cell.result;
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline && (await run(["daemon", "status", "--json"], { home })).stdout.trim() !== "null") await Bun.sleep(100);
      const log = await ok(["daemon", "logs"], home);
      expect(log).toContain("session sig: state NOT saved: its running cell did not stop");
      expect(log).toContain("stopping with 1 session(s) NOT saved: sig");
      const r = await run(["-s", "sig", "run", "'x' in globals()"], { home });
      expect(r.stdout).toBe("False\n");
      expect(r.stderr).toContain("The snapshot of session sig when its supervisor stopped (received SIGTERM)");
      expect(r.stderr).toContain("Its state was lost");
    }), 60_000);

  test("close --keep whose snapshot fails does not close the session (exit 1)", () =>
    withHome(async (home) => {
      await ok(["-s", "k", "run", "x = 1"], home);
      const cell = await busyInC(home, "k");
      const close = await run(["close", "--keep", "k"], { home });
      expect(close.code).toBe(1);
      expect(close.stderr).toContain("awrepl: session k was NOT closed: its snapshot failed: its running cell did not stop");
      expect(await ok(["sessions"], home)).toContain("k ");
      expect((await run(["close", "k"], { home })).code).toBe(0);
      await cell.result;
    }), 60_000);

  test.skipIf(process.getuid?.() !== 0)("a full disk: the stop says so, exits 1, and the state comes back from nowhere else", () =>
    withHome(async (home) => {
      await ok(["-s", "big", "run", "blob = b'x' * 2_000_000\nsmall = 1"], home);
      // The snapshots directory becomes a tiny file system (the session's spec is already in it).
      const snapshots = join(home, "snapshots");
      const moved = `${snapshots}.real`;
      renameSync(snapshots, moved);
      mkdirSync(snapshots, { mode: 0o700 });
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k,mode=0700", "awrepl-full", snapshots]);
      try {
        execFileSync("cp", ["-a", `${moved}/.`, snapshots]);
        const stop = await run(["daemon", "stop"], { home });
        expect(stop.code).toBe(1);
        expect(stop.stderr).toContain("awrepl: session big: state NOT saved: ");
        expect(stop.stderr).toContain("No space left on device");
        const r = await run(["-s", "big", "run", "'small' in globals()"], { home });
        expect(r.stdout).toBe("False\n");
        expect(r.stderr).toContain("No space left on device");
        expect(r.stderr).toContain("Its state was lost");
      } finally {
        await run(["daemon", "stop"], { home });
        execFileSync("umount", [snapshots]);
        rmdirSync(snapshots);
        renameSync(moved, snapshots);
      }
    }), 90_000);
});

describe("the record of an unsaved state does not depend on free space when the stop fails (issue 21 item 2)", () => {
  test.skipIf(!CAN_MOUNT_TMPFS)(
    "a disk full at daemon stop: the stop says NOT saved, and the next use says the older snapshot came back and how old it is",
    () =>
      withSmallDisk("4m", async (home, disk) => {
        await ok(["-s", "s", "run", "x = 1"], home);
        await ok(["-s", "s", "snapshot"], home);
        await ok(["-s", "s", "run", "x = 2"], home);
        disk.fill();
        const stop = await run(["daemon", "stop"], { home });
        expect(stop.stderr).toContain("awrepl: session s: state NOT saved: ");
        expect(stop.stderr).toContain("No space left on device");
        expect(stop.code).toBe(1);
        expect(await waitForNoProcesses(home, 15_000)).toEqual([]);
        disk.free();
        const r = await run(["-s", "s", "run", "x"], { home });
        expect(r.stdout).toBe("1\n");
        expect(r.stderr).toContain("The snapshot of session s when its supervisor stopped (stop requested)");
        expect(r.stderr).toContain("No space left on device");
        expect(r.stderr).toMatch(/It was restored from an OLDER snapshot, of \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(\d+ s old, .*snapshot\.pkl\): anything done after that is lost\./);
        // Said once.
        expect((await run(["-s", "s", "run", "x"], { home })).stderr).toBe("");
      }),
    90_000,
  );

  test("a supervisor killed before it could save or say anything: the next use says the state was not saved, and how old the snapshot that came back is", () =>
    withHome(async (home) => {
      await ok(["-s", "k", "run", "x = 1"], home);
      await ok(["-s", "k", "snapshot"], home);
      await ok(["-s", "k", "run", "x = 2"], home);
      const pid = (JSON.parse(await ok(["daemon", "status", "--json"], home)) as { pid: number }).pid;
      process.kill(pid, "SIGKILL");
      // Its workers see EOF and exit by themselves.
      expect(await waitForNoProcesses(home, 15_000)).toEqual([]);
      const r = JSON.parse(await ok(["-s", "k", "run", "--json", "x"], home)) as ExecResult;
      expect(r.value).toBe("1");
      expect(r.restored?.restored).toEqual(["x"]);
      expect(r.notice).toMatch(
        new RegExp(
          `^Session k was held by process ${pid} from \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC, and its state was not saved when it ended: ` +
            "it came back from its snapshot of \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC \\(\\d+ s old, .*snapshot\\.pkl\\): cells run after that snapshot are not in it\\.$",
        ),
      );
      // Said once; and the next clean stop leaves nothing to say but the snapshot's age.
      expect((JSON.parse(await ok(["-s", "k", "run", "--json", "x = 3"], home)) as ExecResult).notice).toBeUndefined();
      await ok(["daemon", "stop"], home);
      const again = JSON.parse(await ok(["-s", "k", "run", "--json", "x"], home)) as ExecResult;
      expect(again.value).toBe("3");
      expect(again.notice).toMatch(new RegExp(`^Session k ${RESTORE_AGE.source}$`));
    }), 60_000);
});

describe("files on disk", () => {
  test("sessions x and x.spec share no file: closing x.spec leaves x and its spec whole", () =>
    withHome(async (home) => {
      await ok(["-s", "x", "--python", OTHER_PYTHON, "run", "import sys\nv = 'x'"], home);
      await ok(["-s", "x.spec", "run", "v = 'x.spec'"], home);
      await ok(["daemon", "stop"], home);
      await ok(["close", "x.spec"], home);
      expect(existsSync(join(home, "snapshots", "x.spec"))).toBe(false);
      const r = JSON.parse(await ok(["-s", "x", "run", "--json", "v, sys.flags.no_site"], home)) as ExecResult;
      expect(r.value).toBe("('x', 1)");
      expect(r.restored?.restored).toEqual(["sys", "v"]);
    }), 60_000);

  test("snapshots in the flat layout of awrepl 0.1 are moved into per-session directories and restored", () =>
    withHome(async (home) => {
      await ok(["-s", "old", "--python", OTHER_PYTHON, "run", "import sys\nv = 41"], home);
      await ok(["daemon", "stop"], home);
      // As 0.1 left them: snapshots/old.pkl, old.json, old.spec.json.
      const dir = join(home, "snapshots");
      renameSync(join(dir, "old", "snapshot.pkl"), join(dir, "old.pkl"));
      renameSync(join(dir, "old", "snapshot.json"), join(dir, "old.json"));
      renameSync(join(dir, "old", "spec.json"), join(dir, "old.spec.json"));
      // 0.1 kept nothing else (this version also writes the session's history and idempotency keys there).
      rmSync(join(dir, "old"), { recursive: true });
      expect(await ok(["sessions"], home)).toBe("No sessions running\nSaved, restored on next use: old\n");
      expect(readdirSync(dir)).toEqual(["old"]);
      const r = await run(["-s", "old", "run", "v + 1, sys.flags.no_site"], { home });
      expect(r.stdout).toBe("(42, 1)\n");
      const [restored, age, ...rest] = r.stderr.split("\n");
      expect(restored).toBe(`awrepl: restored 2 name(s) from ${join(dir, "old", "snapshot.pkl")}`);
      expect(age).toMatch(new RegExp(`^awrepl: Session old ${RESTORE_AGE.source}$`));
      expect(rest).toEqual([""]);
    }), 60_000);
});

describe("restore PATH (issue 15 item 11)", () => {
  test("a FIFO and /dev/zero are refused before the worker sees them; the session keeps its state", () =>
    withHome(async (home) => {
      await ok(["-s", "r", "run", "x = 7"], home);
      const fifo = join(home, "pipe.pkl");
      execFileSync("mkfifo", [fifo]);
      for (
        const [path, kind] of [
          [fifo, "a FIFO"],
          ["/dev/zero", "a character device"],
        ]
      ) {
        const r = await run(["-s", "r", "restore", path as string], { home, timeoutMs: 20_000 });
        expect(r.code).toBe(2);
        expect(r.stderr).toBe(`awrepl: Cannot restore from ${path}: it is ${kind}, not a snapshot file\n`);
      }
      expect(await ok(["-s", "r", "run", "x"], home)).toBe("7\n");
    }), 60_000);

  test("restore --timeout cuts off a restore that hangs its worker; the session keeps its state", () =>
    withHome(async (home) => {
      await ok(["-s", "h", "run", "import time\nclass Hang:\n    def __reduce__(self):\n        return (time.sleep, (60,))\nhang = Hang()\nx = 5"], home);
      await ok(["-s", "h", "snapshot", "hang.pkl"], home);
      const r = await run(["-s", "h", "restore", "hang.pkl", "--timeout", "500"], { home });
      expect(r.code).toBe(124);
      expect(r.stderr).toContain("The restore request exceeded the 500 ms timeout");
      expect(await ok(["-s", "h", "run", "x"], home)).toBe("5\n");
      writeFileSync(join(home, "not-a-pickle.pkl"), "nope");
      expect((await run(["-s", "h", "restore", "not-a-pickle.pkl", "--timeout", "soon"], { home })).code).toBe(2);
    }), 60_000);
});

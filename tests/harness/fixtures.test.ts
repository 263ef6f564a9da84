// The fixtures themselves: they start, do what they say, and leave nothing behind. The root-only
// variants (hide: a mount namespace; netns: a network namespace) are skipped for a non-root user, with
// the reason printed: the kernel gives those namespaces to root only, which a user accepts. A missing
// package fails with its install hint instead (CI installs them).
import { describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bwrapAvailable } from "./bwrap.ts";
import { sleep } from "./common.ts";
import { listProcs } from "./procs.ts";
import { isolationAvailable, requireSshd, startSshd, type TestSshd } from "./sshd.ts";

/** Runs a command over ssh. Async: the proxy variant's relay runs on this process's event loop. */
function ssh(s: TestSshd, cmd: string, timeout = 15_000): Promise<{ status: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const [file, ...args] = s.sshArgv(cmd);
    const c = spawn(file as string, args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    c.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    const t = setTimeout(() => c.kill("SIGKILL"), timeout);
    c.on("close", (status) => {
      clearTimeout(t);
      resolve({ status, stdout });
    });
  });
}

const sshdsOf = (s: TestSshd) =>
  listProcs().filter((p) => {
    try {
      return p.comm.startsWith("sshd") && p.state !== "Z" && readFileSync(`/proc/${p.pid}/cmdline`, "utf8").includes(s.dir);
    } catch {
      return false;
    }
  });

/** Skips (saying why) when this user cannot make the namespace; the test runs otherwise. */
function rootOnly(kind: "hide" | "netns"): boolean {
  const a = isolationAvailable(kind);
  if (!a.ok) console.log(`skipped: ${a.reason}`);
  return !a.ok;
}

describe("sshd fixture", () => {
  test("starts on 127.0.0.1, runs a remote command carrying its marker, stops with no process left", async () => {
    requireSshd();
    const s = await startSshd();
    try {
      const r = await ssh(s, "/usr/bin/python3 -c 'import os; print(os.environ[\"AWREPL_SSHD_FIXTURE\"])'");
      expect(r.status).toBe(0);
      expect(r.stdout.trim()).toBe(s.dir);
      // A session left running: stop() must end it too.
      const [file, ...args] = s.sshArgv("sleep 300");
      const bg = spawn(file as string, args, { stdio: "ignore" });
      for (let i = 0; i < 200 && !s.farProcesses().some((p) => p.comm === "sleep"); i++) await sleep(20);
      expect(s.farProcesses().some((p) => p.comm === "sleep")).toBe(true);
      await s.stop();
      expect(s.farProcesses()).toEqual([]);
      expect(sshdsOf(s)).toEqual([]);
      bg.kill();
    } finally {
      await s.stop();
    }
  });

  test.skipIf(rootOnly("hide"))("hide: the far side does not see the hidden directory's contents", async () => {
    const priv = mkdtempSync(join(tmpdir(), "awrepl-hidden-"));
    mkdirSync(join(priv, "home"));
    writeFileSync(join(priv, "home", "secret"), "x");
    const s = await startSshd({ hide: [priv] });
    try {
      const r = await ssh(s, `ls -A ${priv}; test -e ${priv}/home/secret && echo VISIBLE; touch ${priv}/w 2>&1 | head -1`);
      expect(r.stdout).not.toContain("VISIBLE");
      expect(r.stdout).toContain("Read-only file system");
    } finally {
      await s.stop();
      rmSync(priv, { recursive: true, force: true });
    }
  });

  for (const variant of ["proxy", "netns"] as const) {
    test.skipIf(variant === "netns" && rootOnly("netns"))(`partition and heal (${variant})`, async () => {
      requireSshd();
      const s = await startSshd(variant === "proxy" ? { proxy: true } : { netns: true });
      try {
        expect((await ssh(s, "echo up")).stdout.trim()).toBe("up");
        await s.partition();
        expect((await ssh(s, "echo up", 3_000)).stdout.trim()).toBe(""); // cut off; killed after 3 s
        await s.heal();
        expect((await ssh(s, "echo up")).stdout.trim()).toBe("up");
      } finally {
        await s.stop();
      }
    });
  }
});

test("bubblewrap's availability comes with a reason when it is not usable", () => {
  const a = bwrapAvailable();
  if (a.ok) expect(a.version).toMatch(/^\d+\.\d+/);
  else expect(a.reason.length).toBeGreaterThan(10);
});

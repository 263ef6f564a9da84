// Which executable runs the supervisor (AWREPL_BIN, this platform's npm package, a checkout's), an
// executable that cannot be started is said at once, naming it, and a start lock that turns stale while
// a client waits is taken over.
import { describe, expect, test } from "bun:test";
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AwreplError } from "../core/errors.ts";
import { homeLayout } from "../settings/home.ts";
import { STALE_LOCK_MS } from "../supervisor/start_lock.ts";
import { awreplBinary, processesOf, ROOT, tempHome, testEnv, waitFor, withHome } from "../../tests/harness/mod.ts";
import { connectSupervisor, platformPackage, SUPERVISOR_SUBCOMMAND, supervisorCommand } from "./start.ts";

const notInstalled = (specifier: string): string => {
  throw Object.assign(new Error(`Cannot find module '${specifier}'`), { code: "MODULE_NOT_FOUND" });
};

describe("supervisorCommand", () => {
  test("AWREPL_BIN comes first", () => {
    expect(supervisorCommand({ AWREPL_BIN: "/opt/awrepl" }, { fileURLToPath, resolvePackage: notInstalled })).toEqual(["/opt/awrepl", SUPERVISOR_SUBCOMMAND]);
  });

  test("then the executable of this platform's npm package, wherever the resolver finds it", () => {
    const { home: dir, remove } = tempHome("awrepl-platform-pkg-");
    try {
      const pkg = join(dir, "node_modules", ...platformPackage().split("/"));
      mkdirSync(join(pkg, "bin"), { recursive: true });
      writeFileSync(join(pkg, "package.json"), "{}");
      writeFileSync(join(pkg, "bin", process.platform === "win32" ? "awrepl.exe" : "awrepl"), "");
      const asked: string[] = [];
      const resolvePackage = (specifier: string) => {
        asked.push(specifier);
        return join(pkg, "package.json");
      };
      const [bin, sub] = supervisorCommand({}, { fileURLToPath, resolvePackage });
      expect(asked).toEqual([`${platformPackage()}/package.json`]);
      expect(bin).toBe(join(pkg, "bin", "awrepl"));
      expect(sub).toBe(SUPERVISOR_SUBCOMMAND);
    } finally {
      remove();
    }
  });

  test("without either, in a checkout under Bun: bun main.ts", () => {
    expect(supervisorCommand({}, { fileURLToPath, resolvePackage: notInstalled })).toEqual([process.execPath, join(ROOT, "main.ts"), SUPERVISOR_SUBCOMMAND]);
  });
});

test("an executable that cannot be started is said at once, with its name, not after the start timeout", async () => {
  const { home, remove } = tempHome();
  try {
    const missing = join(home, "no-such-awrepl");
    const started = Date.now();
    const err = await connectSupervisor(homeLayout(home), { autostart: true, env: { ...process.env, AWREPL_BIN: missing } }).catch((e) => e);
    expect(err).toBeInstanceOf(AwreplError);
    expect((err as AwreplError).code).toBe("supervisor_unreachable");
    expect((err as AwreplError).message).toContain(`Cannot start the supervisor (${missing} ${SUPERVISOR_SUBCOMMAND})`);
    expect((err as AwreplError).message).toContain("ENOENT");
    expect(Date.now() - started).toBeLessThan(10_000); // the start timeout is 15 s
  } finally {
    remove();
  }
});

test("a start lock held by a live process that is not a starter is taken over once it turns stale, within the start timeout (issue 21 item 7)", () =>
  withHome(async (home) => {
    // A state directory kept across a container restart: the lock names a pid that is alive again
    // (here: this test process), written less than STALE_LOCK_MS ago, so nobody owns the start now.
    const layout = homeLayout(home);
    writeFileSync(layout.lock, String(process.pid));
    const writtenAt = (Date.now() - (STALE_LOCK_MS - 3_000)) / 1000;
    utimesSync(layout.lock, writtenAt, writtenAt);
    const started = Date.now();
    const conn = await connectSupervisor(layout, { autostart: true, env: testEnv(home, { AWREPL_BIN: await awreplBinary() }) });
    try {
      expect(conn?.state).toBe("ready");
      // Stale 3 s after the call began; the start timeout (what it hit before) is 15 s.
      expect(Date.now() - started).toBeLessThan(12_000);
    } finally {
      conn?.close();
    }
  }), 30_000);

test("clients starting at once reach one supervisor; the starters that lost the race leave no process behind", () =>
  withHome(async (home) => {
    const layout = homeLayout(home);
    const env = testEnv(home, { AWREPL_BIN: await awreplBinary() });
    const conns = await Promise.all(Array.from({ length: 4 }, () => connectSupervisor(layout, { autostart: true, env })));
    try {
      const pids = new Set((await Promise.all(conns.map((c) => c?.hello))).map((h) => h?.pid));
      expect(pids.size).toBe(1);
      // Only the one supervisor (and no worker: no session yet) is left of this home.
      await waitFor(() => processesOf(home).length === 1, 10_000, "the losing starters to exit");
      expect(processesOf(home)).toEqual([...pids] as number[]);
    } finally {
      for (const c of conns) c?.close();
    }
  }), 30_000);

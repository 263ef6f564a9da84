import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { acquireStartLock, lockHolder } from "./start_lock.ts";
import { CAN_MOUNT_TMPFS, withFullDisk } from "../../tests/harness/mod.ts";

function withDir(fn: (dir: string) => void): void {
  const dir = mkdtempSync(join(tmpdir(), "awrepl-lock-"));
  try {
    fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("acquireStartLock", () => {
  test("one holder at a time; released on release()", () =>
    withDir((dir) => {
      const path = join(dir, "lock");
      const first = acquireStartLock(path);
      expect(first).not.toBeNull();
      expect(readFileSync(path, "utf8")).toBe(String(process.pid));
      expect(lockHolder(path)).toBe(process.pid);
      // The same live pid holds it: a second attempt is refused.
      expect(acquireStartLock(path)).toBeNull();
      first?.release();
      expect(existsSync(path)).toBe(false);
    }));

  test("takes over a lock whose owner is dead", () =>
    withDir((dir) => {
      const path = join(dir, "lock");
      writeFileSync(path, "999999999");
      const lock = acquireStartLock(path);
      expect(lock).not.toBeNull();
      expect(readFileSync(path, "utf8")).toBe(String(process.pid));
      lock?.release();
    }));

  test("takes over a lock that is too old, even if its pid is alive", () =>
    withDir((dir) => {
      const path = join(dir, "lock");
      writeFileSync(path, String(process.ppid));
      const old = Date.now() / 1000 - 60;
      utimesSync(path, old, old);
      expect(lockHolder(path)).toBeNull();
      const lock = acquireStartLock(path);
      expect(lock).not.toBeNull();
      lock?.release();
    }));
});

// A real full disk is a tiny tmpfs, which only root on Linux can mount (CI runs as root).
describe.skipIf(!CAN_MOUNT_TMPFS)("on a full disk", () => {
  test("the lock fails with the disk's error and leaves no file behind", () =>
    withFullDisk((dir) => {
      expect(() => acquireStartLock(join(dir, "supervisor.lock"))).toThrow("no space left on device");
      expect(readdirSync(dir)).toEqual([]);
    }));
});

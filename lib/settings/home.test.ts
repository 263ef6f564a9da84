import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdirSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { tempHome } from "../../tests/harness/mod.ts";
import { ensurePrivateDir } from "./home.ts";

const dirs: ReturnType<typeof tempHome>[] = [];
afterEach(() => dirs.splice(0).forEach((d) => d.remove()));
function scratch(): string {
  const d = tempHome();
  dirs.push(d);
  return d.home;
}

describe("ensurePrivateDir: awrepl never changes a directory it did not create", () => {
  test("a new directory (and its parents) is created 0700", () => {
    const dir = join(scratch(), "a", "b");
    expect(ensurePrivateDir(dir)).toBe(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, "..")).mode & 0o777).toBe(0o700);
    expect(ensurePrivateDir(dir)).toBe(dir); // and used again
  });

  test("a directory open to others is refused, named, and left as it was (/tmp, a 0755 one)", () => {
    expect(() => ensurePrivateDir("/tmp")).toThrow(/Directory \/tmp is open to other users \(mode 1777\)/);
    expect(statSync("/tmp").mode & 0o7777).toBe(0o1777);
    const dir = join(scratch(), "shared");
    mkdirSync(dir, { mode: 0o755 });
    chmodSync(dir, 0o755);
    const err = (() => {
      try {
        ensurePrivateDir(dir);
      } catch (e) {
        return e as { code?: string; message: string };
      }
      return null;
    })();
    expect(err?.code).toBe("usage");
    expect(err?.message).toContain(`chmod 700 ${dir}`);
    expect(statSync(dir).mode & 0o777).toBe(0o755);
  });

  test("a symbolic link and a directory of another user's are refused", () => {
    const base = scratch();
    const real = join(base, "real");
    mkdirSync(real, { mode: 0o700 });
    symlinkSync(real, join(base, "link"));
    expect(() => ensurePrivateDir(join(base, "link"))).toThrow(/is a symbolic link/);
    if (process.getuid?.() === 0) {
      const theirs = join(base, "theirs");
      mkdirSync(theirs, { mode: 0o700 });
      chownSync(theirs, 65534, 65534);
      expect(() => ensurePrivateDir(theirs)).toThrow(/belongs to uid 65534, not to you/);
      expect(statSync(theirs).uid).toBe(65534);
    }
  });
});

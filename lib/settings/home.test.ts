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

  test("`mkdir -p` (0755, 0750) is accepted as it is: others may read the directory, not change it", () => {
    for (const mode of [0o755, 0o750]) {
      const dir = join(scratch(), "made-by-mkdir-p");
      mkdirSync(dir);
      chmodSync(dir, mode);
      expect(ensurePrivateDir(dir)).toBe(dir);
      expect(statSync(dir).mode & 0o777).toBe(mode);
      // What awrepl makes inside is private.
      expect(statSync(ensurePrivateDir(join(dir, "snapshots"))).mode & 0o777).toBe(0o700);
    }
  });

  test("a directory others can write is refused, named, and left as it was (/tmp, a 0775, a 0757 one)", () => {
    expect(() => ensurePrivateDir("/tmp")).toThrow(/Directory \/tmp can be written by other users \(mode 1777\)/);
    expect(statSync("/tmp").mode & 0o7777).toBe(0o1777);
    for (const mode of [0o775, 0o757]) {
      const dir = join(scratch(), "shared");
      mkdirSync(dir);
      chmodSync(dir, mode);
      expect(() => ensurePrivateDir(dir)).toThrow(`mode 0${mode.toString(8)}`);
    }
    const dir = join(scratch(), "shared");
    mkdirSync(dir, { mode: 0o777 });
    chmodSync(dir, 0o777);
    const err = (() => {
      try {
        ensurePrivateDir(dir);
      } catch (e) {
        return e as { code?: string; message: string };
      }
      return null;
    })();
    expect(err?.code).toBe("usage");
    expect(err?.message).toContain(`chmod go-w ${dir}`);
    expect(statSync(dir).mode & 0o777).toBe(0o777);
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

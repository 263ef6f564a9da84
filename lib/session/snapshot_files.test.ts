import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { defaultSnapshotPath, forgetSnapshot, readSessionSpec, specPath, writeSessionSpec } from "./snapshot_files.ts";

const homes: string[] = [];
function home(): string {
  const h = mkdtempSync(join(tmpdir(), "awrepl-store-"));
  homes.push(h);
  return h;
}
afterEach(() => {
  for (const h of homes.splice(0)) rmSync(h, { recursive: true, force: true });
});

describe("a session's saved spec", () => {
  test("is written private, read back, and forgotten with the snapshot", () => {
    const h = home();
    const spec = { python: "/usr/bin/python3", cwd: "/tmp", env: { SECRET: "s3" }, timeoutMs: 5 };
    writeSessionSpec(h, "a", spec);
    expect(statSync(specPath(h, "a")).mode & 0o777).toBe(0o600);
    expect(readSessionSpec(h, "a")).toEqual(spec);
    // No temp file left behind.
    expect(readdirSync(join(h, "snapshots")).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    writeFileSync(defaultSnapshotPath(h, "a"), "payload");
    expect(forgetSnapshot(h, "a")).toBe(true);
    expect(existsSync(specPath(h, "a"))).toBe(false);
  });

  test("a missing or unreadable spec is null", () => {
    const h = home();
    expect(readSessionSpec(h, "none")).toBeNull();
    writeSessionSpec(h, "b", {});
    writeFileSync(specPath(h, "b"), "[1, 2");
    expect(readSessionSpec(h, "b")).toBeNull();
    writeFileSync(specPath(h, "b"), "[1, 2]");
    expect(readSessionSpec(h, "b")).toBeNull();
  });
});

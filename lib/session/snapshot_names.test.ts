import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sessionFiles } from "./snapshot_names.ts";

const root = mkdtempSync(join(tmpdir(), "awrepl-snapnames-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("snapshot names, without node:fs", () => {
  test("sessions with a snapshot, sessions known by a spec too; flat files beside the session directories are noticed", () => {
    const home = join(root, "h1");
    expect(sessionFiles(home)).toEqual({ saved: [], known: [], flat: false }); // no snapshots/ yet
    for (const [name, files] of [["b", ["snapshot.pkl", "spec.json"]], ["a", ["snapshot.pkl"]], ["c", ["spec.json"]], ["bad name", ["snapshot.pkl"]]] as const) {
      mkdirSync(join(home, "snapshots", name), { recursive: true });
      for (const f of files) writeFileSync(join(home, "snapshots", name, f), "");
    }
    expect(sessionFiles(home)).toEqual({ saved: ["a", "b"], known: ["a", "b", "c"], flat: false });
    writeFileSync(join(home, "snapshots", "old.pkl"), ""); // the older flat layout: listing alone does not migrate
    expect(sessionFiles(home)).toEqual({ saved: ["a", "b"], known: ["a", "b", "c"], flat: true });
  });
});

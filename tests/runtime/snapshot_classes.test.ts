import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeAll, Runtime } from "../harness/mod.ts";

let dir = "";
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awrepl-snapcls-"));
});
afterEach(() => {
  closeAll();
  rmSync(dir, { recursive: true, force: true });
});

type Failure = { name: string; reason: string };

const DEFINE = `import dataclasses
class Node:
    pass
@dataclasses.dataclass
class D:
    a: int
class Base:
    pass
class Leaf(Base):
    pass
class _Private:
    pass
n = Node(); ns = [Node()]; d = D(1); ds = [D(2)]; dd = {'x': D(3)}
leaves = [Leaf()]; hidden = {'p': _Private()}
try:
    import dill
    del dill
    has_dill = True
except ImportError:
    has_dill = False`;

async function snapshotAndRestore(src: Runtime, fresh: Runtime) {
  const path = join(dir, "s.pkl");
  const snap = await src.request({ type: "snapshot", path, manifest_path: join(dir, "s.json") });
  expect(snap.done.status).toBe("ok");
  const restore = await fresh.request({ type: "restore", path });
  expect(restore.done.status).toBe("ok");
  return { snap: snap.done, restore: restore.done };
}

describe("cell-defined classes across a snapshot", () => {
  test("instances in names, lists and dicts belong to the restored class; dataclass == holds", async () => {
    const rt = await Runtime.start();
    expect((await rt.exec(DEFINE)).done.status).toBe("ok");
    const hasDill = (await rt.exec("has_dill")).result === "True";
    const fresh = await Runtime.start();
    const { snap, restore } = await snapshotAndRestore(rt, fresh);
    if (!hasDill) {
      // Without dill no class can be saved; every value needing one is skipped, saying which class.
      const skipped = snap.skipped as Failure[];
      expect(skipped.find((s) => s.name === "ns")!.reason).toBe("needs the class Node, which was not saved");
      expect(skipped.find((s) => s.name === "dd")!.reason).toBe("needs the class D, which was not saved");
      expect(skipped.find((s) => s.name === "hidden")!.reason).toBe("needs the class _Private, which was not saved");
      expect(restore.restored).toEqual(["dataclasses", "has_dill"]);
      return;
    }
    expect(restore.failed).toEqual([]);
    expect(restore.restored).toEqual(["Base", "D", "Leaf", "Node", "d", "dataclasses", "dd", "ds", "has_dill", "hidden", "leaves", "n", "ns"]);
    const checks = await fresh.exec(
      "(isinstance(n, Node), isinstance(ns[0], Node), isinstance(d, D), isinstance(ds[0], D),\n" +
        " isinstance(dd['x'], D), ds[0] == D(2), dd['x'] == D(3), d == D(1), type(ns[0]) is Node,\n" +
        " isinstance(leaves[0], Base), type(hidden['p']) is _Private)",
    );
    expect(checks.result).toBe("(True, True, True, True, True, True, True, True, True, True, True)");
    // A method edited after the restore is seen by the restored instances.
    expect((await fresh.exec("Node.hello = lambda self: 'hi'\nns[0].hello()")).result).toBe("'hi'");
  });

  test("a class that fails to restore fails only the names that need it, each listed", async () => {
    const home = join(dir, "proj");
    mkdirSync(home);
    writeFileSync(join(home, "helpermod.py"), "VALUE = 7\n");
    const rt = await Runtime.start({ cwd: home });
    const defined = await rt.exec(
      "import helpermod\nclass Needs:\n    mod = helpermod\nclass Fine:\n    pass\n" +
        "a = [Needs()]\nb = {'k': Needs()}\nc = [Fine()]\nplain = [1, 2]\n" +
        "try:\n    import dill\n    del dill\n    has_dill = True\nexcept ImportError:\n    has_dill = False",
    );
    expect(defined.done.status).toBe("ok");
    if ((await rt.exec("has_dill")).result !== "True") return; // classes are never saved without dill
    const fresh = await Runtime.start({ cwd: dir }); // helpermod is not importable here
    const { restore } = await snapshotAndRestore(rt, fresh);
    const failed = restore.failed as Failure[];
    expect(failed.map((f) => f.name).sort()).toEqual(["Needs", "a", "b", "helpermod"]);
    expect(failed.find((f) => f.name === "a")!.reason).toContain("needs the class 'Needs', which was not restored");
    expect(failed.find((f) => f.name === "b")!.reason).toContain("needs the class 'Needs'");
    expect(restore.restored).toEqual(["Fine", "c", "has_dill", "plain"]);
    expect((await fresh.exec("type(c[0]) is Fine, plain")).result).toBe("(True, [1, 2])");
  });
});

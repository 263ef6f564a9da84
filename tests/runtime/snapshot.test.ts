import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closeAll, Runtime } from "../harness/mod.ts";

let dir = "";
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awrepl-snap-"));
});
afterEach(() => {
  closeAll();
  rmSync(dir, { recursive: true, force: true });
});

async function snapshot(rt: Runtime, extra: Record<string, unknown> = {}) {
  const path = join(dir, "state.pkl");
  const manifest_path = join(dir, "state.json");
  const { done } = await rt.request({ type: "snapshot", path, manifest_path, ...extra });
  return { done, path, manifest_path };
}

describe("snapshot, restore, list_names", () => {
  test("list_names: sorted user names, without _-prefixed and reserved names", async () => {
    const rt = await Runtime.start();
    await rt.exec("import asyncio, json\nzeta = 1\nalpha = 2\n_hidden = 3\nopen = open\nexit = 4");
    const { done } = await rt.request({ type: "list_names" });
    expect(done.names).toEqual(["alpha", "json", "zeta"]);
  });

  test("a snapshot restores into a fresh runtime; the manifest describes it", async () => {
    const rt = await Runtime.start();
    await rt.exec("import json\ndata = {'k': [1, 2.5, None]}\ntext = 'héllo'\nnan = float('nan')");
    const { done, path, manifest_path } = await snapshot(rt);
    expect(done.status).toBe("ok");
    expect(done.saved).toEqual(["data", "json", "nan", "text"]);
    expect(done.skipped).toEqual([]);
    expect(done.bytes as number).toBeGreaterThan(0);
    const manifest = JSON.parse(readFileSync(manifest_path, "utf8"));
    expect(manifest.savedNames).toEqual(["data", "json", "nan", "text"]);
    expect(manifest.bytes).toBe(done.bytes);
    expect(manifest.pythonVersion).toMatch(/^3\./);
    expect(typeof manifest.timestamp).toBe("number");
    expect(manifest.version).toBe(1);

    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path });
    expect(r.done.status).toBe("ok");
    expect(r.done.restored).toEqual(["data", "json", "nan", "text"]);
    expect(r.done.failed).toEqual([]);
    expect((await fresh.exec("json.dumps(data), text, nan != nan")).result).toBe(`('{"k": [1, 2.5, null]}', 'héllo', True)`);
  });

  test("one unsaveable name is skipped with a reason; the rest is saved", async () => {
    const rt = await Runtime.start();
    await rt.exec("import threading\nlock = threading.Lock()\ngen = (i for i in range(3))\nok = 5");
    const { done } = await snapshot(rt);
    expect(done.status).toBe("ok");
    expect(done.saved).toContain("ok");
    const skipped = done.skipped as Array<{ name: string; reason: string }>;
    expect(skipped.map((s) => s.name)).toContain("gen");
    for (const s of skipped) expect(s.reason.length).toBeGreaterThan(0);
  });

  test("max_variable_ms: a name slower to pickle is skipped with that reason; the others are saved", async () => {
    const rt = await Runtime.start();
    await rt.exec("import time\nclass Slow:\n    def __reduce__(self):\n        time.sleep(20)\n        return (int, (1,))\nslow = Slow()\nkept = [1, 2]");
    const started = Date.now();
    const { done } = await snapshot(rt, { max_variable_ms: 200 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(done.status).toBe("ok");
    expect(done.saved).toContain("kept");
    expect(done.skipped).toContainEqual({ name: "slow", reason: "took longer than 200 ms to pickle" });
    expect((await rt.exec("kept")).result).toBe("[1, 2]"); // the namespace is untouched
  });

  test("cell-defined functions: saved by dill, or skipped with a reason under pickle", async () => {
    const rt = await Runtime.start();
    await rt.exec("def double(x):\n    return 2 * x\nclass P:\n    def __init__(self): self.v = 7\np = P()");
    const { done, path, manifest_path } = await snapshot(rt);
    const serializer = JSON.parse(readFileSync(manifest_path, "utf8")).serializer;
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path });
    if (serializer === "dill") {
      expect(done.saved).toEqual(["P", "double", "p"]);
      expect(r.done.restored).toEqual(["P", "double", "p"]);
      expect((await fresh.exec("double(p.v)")).result).toBe("14");
    } else {
      expect(serializer).toBe("pickle");
      const names = (done.skipped as Array<{ name: string; reason: string }>).map((s) => s.name);
      expect(names).toEqual(["P", "double", "p"]);
      expect((done.skipped as Array<{ reason: string }>)[0]!.reason).toContain("dill");
    }
  });

  test("plain data goes through stdlib pickle, cell definitions through dill; restore loads both", async () => {
    const rt = await Runtime.start();
    await rt.exec("import json\nnums = list(range(1000))\nclass C:\n    pass\nboxed = [C()]\ntry:\n    import dill\n    del dill\n    has_dill = True\nexcept ImportError:\n    has_dill = False");
    const hasDill = (await rt.exec("has_dill")).result === "True";
    const { done, path, manifest_path } = await snapshot(rt);
    const manifest = JSON.parse(readFileSync(manifest_path, "utf8"));
    expect(manifest.serializers.nums).toBe("pickle");
    expect(manifest.serializers.has_dill).toBe("pickle");
    expect(manifest.serializers.json).toBe("pickle"); // modules by name: restoring them needs no dill
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path });
    if (hasDill) {
      // The class itself needs dill; an instance in a list refers to it by name (awrepl._class_ref).
      expect(manifest.serializers.boxed).toBe("pickle");
      expect(manifest.serializers.C).toBe("dill");
      expect(manifest.serializer).toBe("dill");
      expect(r.done.restored).toEqual(["C", "boxed", "has_dill", "json", "nums"]);
      expect((await fresh.exec("type(boxed[0]) is C, sum(nums), json.dumps(1)")).result).toBe("(True, 499500, '1')");
    } else {
      expect(manifest.serializer).toBe("pickle");
      expect((done.skipped as Array<{ name: string }>).map((s) => s.name)).toEqual(["C", "boxed"]);
      expect(r.done.restored).toEqual(["has_dill", "json", "nums"]);
      expect((await fresh.exec("sum(nums), json.dumps(1)")).result).toBe("(499500, '1')");
    }
  });

  test("restored cell functions read and write the live namespace, also from containers, closures and classes", async () => {
    const rt = await Runtime.start();
    const hasDill = (await rt.exec("try:\n    import dill\n    True\nexcept ImportError:\n    False")).result === "True";
    if (!hasDill) return; // without dill, cell functions are skipped (tested above)
    await rt.exec(
      [
        "import asyncio",
        "x = 1",
        "def f(): return x",
        "def bump():\n    global x\n    x += 1\n    return x",
        "callbacks = {'lam': lambda: x + 100, 'f': f}",
        "def make():\n    k = 5\n    def inner(): return k + x\n    return inner",
        "closure = make()",
        "class P:\n    def get(self): return x\n    @staticmethod\n    def s(): return x\n    @property\n    def prop(self): return x",
        "p = P()",
        "def _helper(): return 'helped'",
        "def uses_helper(): return _helper()",
        "async def sleeper():\n    await asyncio.sleep(0)\n    return x",
      ].join("\n"),
    );
    const { done, path, manifest_path } = await snapshot(rt);
    expect(done.skipped).toEqual([]);
    expect(done.saved).not.toContain("_helper");
    expect(JSON.parse(readFileSync(manifest_path, "utf8")).support).toEqual(["_helper", "asyncio"]);
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path });
    expect(r.done.failed).toEqual([]);
    await fresh.exec("x = 50");
    const got = await fresh.exec(
      "f(), callbacks['lam'](), callbacks['f'](), closure(), p.get(), P.s(), p.prop, isinstance(p, P), uses_helper(), await sleeper()",
    );
    expect(got.result).toBe("(50, 150, 50, 55, 50, 50, 50, True, 'helped', 50)");
    expect((await fresh.exec("bump(), x, callbacks['f'].__globals__ is globals()")).result).toBe("(51, 51, True)");
    // Support names never replace the namespace's own.
    const again = await Runtime.start();
    await again.exec("def _helper(): return 'mine'");
    await again.request({ type: "restore", path });
    expect((await again.exec("uses_helper()")).result).toBe("'mine'");
  });

  test("max_variable_bytes with prune_oversized deletes only per-variable offenders; max_bytes skips but keeps", async () => {
    const rt = await Runtime.start();
    await rt.exec("big = 'x' * 100000\na = 'y' * 600\nb = 'z' * 600\nsmall = 1");
    const { done } = await snapshot(rt, { max_variable_bytes: 50000, max_bytes: 1000, prune_oversized: true });
    expect(done.status).toBe("ok");
    expect(done.pruned).toEqual(["big"]);
    const skipped = (done.skipped as Array<{ name: string }>).map((s) => s.name);
    expect(skipped).toContain("big");
    expect(skipped).toContain("b");
    expect(done.saved).toEqual(["a", "small"]);
    const names = (await rt.request({ type: "list_names" })).done.names;
    expect(names).toEqual(["a", "b", "small"]);
  });

  test("a manifest write failure fails the snapshot and prunes nothing", async () => {
    const rt = await Runtime.start();
    await rt.exec("big = 'x' * 100000");
    const path = join(dir, "s.pkl");
    mkdirSync(join(dir, "manifest-is-a-dir"));
    const { done } = await rt.request({
      type: "snapshot",
      path,
      manifest_path: join(dir, "manifest-is-a-dir"),
      max_variable_bytes: 10,
      prune_oversized: true,
    });
    expect(done.status).toBe("error");
    expect(String(done.reason)).toContain("manifest");
    expect((await rt.exec("len(big)")).result).toBe("100000");
  });

  test("restoring a missing file is an ok empty restore; a corrupt one fails with a reason", async () => {
    const rt = await Runtime.start();
    const missing = await rt.request({ type: "restore", path: join(dir, "nope.pkl") });
    expect(missing.done.status).toBe("ok");
    expect(missing.done.restored).toEqual([]);
    expect(missing.done.failed).toEqual([]);
    expect(missing.done.reason).toBe("snapshot not found");
    const bad = join(dir, "bad.pkl");
    writeFileSync(bad, "this is not a pickle");
    const corrupt = await rt.request({ type: "restore", path: bad });
    expect(corrupt.done.status).toBe("error");
    expect(String(corrupt.done.reason)).toContain("corrupt");
    expect((await rt.exec("1")).result).toBe("1");
  });

  test("snapshot without a path is a clear failure", async () => {
    const rt = await Runtime.start();
    const { done } = await rt.request({ type: "snapshot" });
    expect(done.status).toBe("error");
    expect(String(done.reason)).toContain("path");
  });

  test("In, Out and get_ipython in a payload are never restored; a dill payload without dill fails per name", async () => {
    const rt = await Runtime.start();
    const plain = join(dir, "plain.pkl");
    const withDill = join(dir, "dill.pkl");
    await rt.exec(
      [
        "import pickle",
        "blobs = {'In': pickle.dumps([1]), 'Out': pickle.dumps({}), 'get_ipython': pickle.dumps(0), 'ok': pickle.dumps(2)}",
        `with open(${JSON.stringify(plain)}, 'wb') as f: pickle.dump({'format': 1, 'serializer': 'pickle', 'names': blobs}, f)`,
        `with open(${JSON.stringify(withDill)}, 'wb') as f: pickle.dump({'format': 1, 'serializer': 'dill', 'names': {'v': pickle.dumps(3)}}, f)`,
        "try:\n    import dill\n    has_dill = True\nexcept ImportError:\n    has_dill = False",
      ].join("\n"),
    );
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path: plain });
    expect(r.done.restored).toEqual(["ok"]);
    expect(r.done.failed).toEqual([]);
    const hasDill = (await rt.exec("has_dill")).result === "True";
    const d = await fresh.request({ type: "restore", path: withDill });
    if (hasDill) {
      expect(d.done.restored).toEqual(["v"]);
    } else {
      expect(d.done.restored).toEqual([]);
      expect((d.done.failed as Array<{ name: string; reason: string }>)[0]!.reason).toContain("dill");
    }
  });
});

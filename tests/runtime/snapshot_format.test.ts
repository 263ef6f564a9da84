// The snapshot payload's format 2 (docs/protocol.md, "Snapshot and restore"): each name's pickle is a
// record written straight into the file, then an index and a trailer. What must hold: a torn file is
// refused whole; a name that fails, goes over a cap or runs out of time mid-write leaves no bytes
// behind and fails only itself; a full disk fails the snapshot (never a name) and leaves the last
// good file; a payload made by path restores from the host too; only the pickler's opcodes are
// searched for a __main__ reference, never a big value's own bytes.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CAN_MOUNT_TMPFS, closeAll, type Event, Runtime } from "../harness/mod.ts";

const MAGIC = Buffer.from("AWREPL\x02\n", "latin1");

let dir = "";
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "awrepl-snapfmt-"));
});
afterEach(() => {
  closeAll();
  rmSync(dir, { recursive: true, force: true });
});

async function snapshot(rt: Runtime, extra: Record<string, unknown> = {}, at = dir) {
  const path = join(at, "state.pkl");
  const manifest_path = join(at, "state.json");
  const { done } = await rt.request({ type: "snapshot", path, manifest_path, ...extra }, 60_000);
  return { done, path, manifest_path };
}

async function restoreFromHost(rt: Runtime, payload: Buffer): Promise<Event> {
  const id = rt.newId("restore");
  const from = rt.events.length;
  const sha256 = createHash("sha256").update(payload).digest("hex");
  rt.send({ type: "restore", id, from: "host", bytes: payload.length, sha256 });
  for (let off = 0; off < payload.length; off += 1 << 20) rt.send({ type: "data", id, data: payload.subarray(off, off + (1 << 20)).toString("base64") });
  return rt.waitFor((e) => e.event === "done" && e.id === id, 60_000, from);
}

describe("snapshot payload, format 2", () => {
  test("the file starts and ends with the format's mark; the manifest's bytes are the file's size", async () => {
    const rt = await Runtime.start();
    await rt.exec("import os\nbig = os.urandom(3 << 20)\nsmall = {'k': [1, 2]}");
    const { done, path, manifest_path } = await snapshot(rt);
    expect(done.status).toBe("ok");
    const file = readFileSync(path);
    expect(file.subarray(0, 8)).toEqual(MAGIC);
    expect(file.subarray(file.length - 8)).toEqual(MAGIC);
    expect(file.length).toBe(done.bytes as number);
    expect(JSON.parse(readFileSync(manifest_path, "utf8")).bytes).toBe(file.length);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  test("fsync: false writes the same whole payload (only its durability differs)", async () => {
    const rt = await Runtime.start();
    await rt.exec("x = list(range(1000))");
    const { done, path } = await snapshot(rt, { fsync: false });
    expect(done.status).toBe("ok");
    const fresh = await Runtime.start();
    expect((await fresh.request({ type: "restore", path })).done.restored).toEqual(["x"]);
    expect((await fresh.exec("sum(x)")).result).toBe("499500");
  });

  test("a torn payload (cut anywhere) is refused whole: nothing of it is restored", async () => {
    const rt = await Runtime.start();
    await rt.exec("import os, hashlib\nbig = os.urandom(2 << 20)\nsmall = 41\nh = hashlib.sha256(big).hexdigest()");
    const { done, path } = await snapshot(rt);
    expect(done.status).toBe("ok");
    const whole = readFileSync(path);
    for (const cut of [whole.length - 1, whole.length - 20, Math.floor(whole.length / 2), 9]) {
      writeFileSync(path, whole.subarray(0, cut));
      const fresh = await Runtime.start();
      const r = await fresh.request({ type: "restore", path });
      expect(r.done.status).toBe("error");
      expect(r.done.reason as string).toContain(`corrupt snapshot ${path}`);
      expect(r.done.restored).toEqual([]);
      expect((await fresh.exec("'small' in globals()")).result).toBe("False");
    }
    writeFileSync(path, whole);
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path });
    expect(r.done.restored).toEqual(["big", "h", "hashlib", "os", "small"]);
    expect((await fresh.exec("hashlib.sha256(big).hexdigest() == h, small")).result).toBe("(True, 41)");
  });

  test("a name that fails after its big bytes were written leaves none of them; the others restore", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      [
        "import os",
        "before = os.urandom(1 << 16)",
        "bad = [os.urandom(4 << 20), (i for i in range(3))]", // 4 MiB written, then the generator fails
        "after = list(range(10))",
      ].join("\n"),
    );
    const { done, path } = await snapshot(rt);
    expect(done.status).toBe("ok");
    expect(done.saved).toEqual(["after", "before", "os"]);
    expect((done.skipped as { name: string; reason: string }[]).map((s) => s.name)).toEqual(["bad"]);
    expect(statSync(path).size).toBeLessThan(1 << 20);
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path });
    expect(r.done.restored).toEqual(["after", "before", "os"]);
    expect(r.done.failed).toEqual([]);
    expect((await fresh.exec("len(before), after[-1]")).result).toBe("(65536, 9)");
  });

  test("over max_variable_bytes or max_bytes: skipped with its exact size, and not in the file", async () => {
    const rt = await Runtime.start();
    await rt.exec("big = b'a' * (3 << 20)\nmid = b'b' * (2 << 20)\nsmall = 1");
    const pickled = Number((await rt.exec("import pickle\nlen(pickle.dumps(big, protocol=5))")).result);
    const cap = (2 << 20) + 1000;
    const perName = await snapshot(rt, { max_variable_bytes: cap });
    expect(perName.done.skipped).toEqual([{ name: "big", reason: `${pickled} bytes exceeds max_variable_bytes ${cap}` }]);
    expect(statSync(perName.path).size).toBeLessThan((2 << 20) + 100_000);
    const total = await snapshot(rt, { max_bytes: 4 << 20 });
    expect(total.done.saved).toEqual(["big", "pickle", "small"]);
    expect((total.done.skipped as { name: string; reason: string }[])[0]!.reason).toMatch(/^\d+ bytes would exceed max_bytes 4194304$/);
    expect(statSync(total.path).size).toBeLessThan((3 << 20) + 100_000);
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path: total.path });
    expect(r.done.restored).toEqual(["big", "pickle", "small"]);
    expect((await fresh.exec("len(big), 'mid' in globals()")).result).toBe(`(${3 << 20}, False)`);
  });

  test("max_variable_ms cutting a name after its bytes were written: skipped, cut off, the rest restores", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      [
        "import os, time",
        "class Slow:",
        "    def __reduce__(self):",
        "        time.sleep(5)",
        "        return (int, ())",
        "slow = [os.urandom(4 << 20), Slow()]",
        "fast = os.urandom(1000)",
      ].join("\n"),
    );
    const { done, path } = await snapshot(rt, { max_variable_ms: 300 });
    expect(done.status).toBe("ok");
    expect(done.skipped).toContainEqual({ name: "slow", reason: "took longer than 300 ms to pickle" });
    expect(statSync(path).size).toBeLessThan(1 << 20);
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path });
    expect(r.done.restored).toContain("fast");
    expect(r.done.restored).not.toContain("slow");
    expect((await fresh.exec("len(fast)")).result).toBe("1000");
  });

  test("a payload written by path restores from the host, and one streamed to the host restores from a file", async () => {
    const rt = await Runtime.start();
    await rt.exec("import os, hashlib\nx = os.urandom((1 << 20) + 3)\nh = hashlib.sha256(x).hexdigest()");
    const { path } = await snapshot(rt);
    const fresh = await Runtime.start();
    const r = await restoreFromHost(fresh, readFileSync(path));
    expect(r.status).toBe("ok");
    expect(r.restored).toEqual(["h", "hashlib", "os", "x"]);
    expect((await fresh.exec("hashlib.sha256(x).hexdigest() == h")).result).toBe("True");

    const id = rt.newId("snapshot");
    const from = rt.events.length;
    rt.send({ type: "snapshot", id, to: "host" });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 60_000, from);
    const pieces = rt.events.slice(from).filter((e) => e.event === "data" && e.id === id);
    const streamed = Buffer.concat(pieces.map((e) => Buffer.from(e.data as string, "base64")));
    expect(streamed.length).toBe(done.bytes as number);
    expect(streamed.subarray(0, 8)).toEqual(MAGIC);
    const file = join(dir, "streamed.pkl");
    writeFileSync(file, streamed);
    const third = await Runtime.start();
    const back = await third.request({ type: "restore", path: file });
    expect(back.done.restored).toEqual(["h", "hashlib", "os", "x"]);
    expect((await third.exec("hashlib.sha256(x).hexdigest() == h")).result).toBe("True");
  });

  test("a big value holding the __main__ marker's bytes stays pickle; a cell function after a big value is seen", async () => {
    const rt = await Runtime.start();
    await rt.exec(["marker = b'\\x8c\\x08__main__' * 100_000", "def f(v):", "    return v + 1", "pair = [b'x' * 200_000, f]"].join("\n"));
    const { done, manifest_path, path } = await snapshot(rt);
    expect(done.status).toBe("ok");
    const manifest = JSON.parse(readFileSync(manifest_path, "utf8"));
    expect(manifest.serializers.marker).toBe("pickle");
    const hasDill = (await rt.exec("import importlib.util\nimportlib.util.find_spec('dill') is not None")).result === "True";
    if (hasDill) {
      expect(manifest.serializers.pair).toBe("dill");
      const fresh = await Runtime.start();
      await fresh.request({ type: "restore", path });
      expect((await fresh.exec("pair[1](1), len(marker)")).result).toBe("(2, 1000000)");
    } else {
      expect((done.skipped as { name: string; reason: string }[]).map((s) => s.name)).toContain("pair");
    }
  });

  test.skipIf(!CAN_MOUNT_TMPFS)("the disk filling up mid-value fails the snapshot, not the name; the last good file stays; no temp file", async () => {
    const mount = mkdtempSync(join(tmpdir(), "awrepl-snapfull-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", mount]);
    try {
      const at = join(mount, "d");
      mkdirSync(at, { mode: 0o700 });
      const rt = await Runtime.start();
      await rt.exec("small = 7");
      const good = await snapshot(rt, {}, at);
      expect(good.done.status).toBe("ok");
      const kept = readFileSync(good.path);
      await rt.exec("import os\nbig = os.urandom(8 << 20)");
      const full = await snapshot(rt, {}, at);
      expect(full.done.status).toBe("error");
      expect(full.done.reason as string).toContain(`cannot write snapshot ${full.path}: No space left on device`);
      expect(readFileSync(full.path)).toEqual(kept);
      expect(readdirSync(at).sort()).toEqual(["state.json", "state.pkl"]);
      expect((await rt.exec("small")).result).toBe("7");
    } finally {
      closeAll();
      execFileSync("umount", [mount]);
      rmSync(mount, { recursive: true, force: true });
    }
  });

  test("a damaged record fails that name only; the others restore", async () => {
    const rt = await Runtime.start();
    await rt.exec("a = 1\nb = [1, 2]");
    const { path } = await snapshot(rt);
    // Corrupt b's record in place (the index and trailer stay whole): b fails, a restores.
    const file = readFileSync(path);
    const list = file.indexOf(Buffer.from([0x5d])); // EMPTY_LIST: only in b's record
    expect(list).toBeGreaterThan(8);
    file[list] = 0xff;
    writeFileSync(path, file);
    const fresh = await Runtime.start();
    const r = await fresh.request({ type: "restore", path });
    expect(r.done.status).toBe("ok");
    expect(r.done.restored).toEqual(["a"]);
    expect((r.done.failed as { name: string }[]).map((f) => f.name)).toEqual(["b"]);
  });
});

import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rejection, useWorkers } from "../../tests/harness/mod.ts";
import { openPayload, PayloadFile, restoreFromFile, snapshotToFile } from "./payload.ts";
import { readDataFrame } from "../wire/data_frames.ts";

const workers = useWorkers();
const startWorker = workers.start;

describe("snapshots over the protocol, host side", () => {
  test("snapshotToFile writes the payload whole (0600), restoreFromFile brings the names back", async () => {
    const w = await startWorker();
    await w.request({ type: "execute", code: "import os, hashlib\nx = os.urandom(5 * 2**20)\nh = hashlib.sha256(x).hexdigest()" });
    const target = join(workers.tmp.home, "s.pkl");
    const done = await snapshotToFile(w, target);
    expect(done.status).toBe("ok");
    expect(readFileSync(target).length).toBe(done.bytes as number);
    expect(execFileSync("stat", ["-c", "%a", target], { encoding: "utf8" }).trim()).toBe("600");
    expect(done.manifest?.savedNames).toEqual(expect.arrayContaining(["x", "h"]));
    expect(readdirSync(workers.tmp.home).filter((n) => n.endsWith(".tmp"))).toEqual([]);
    await w.request({ type: "reset" });
    const back = await restoreFromFile(w, target);
    expect(back.status).toBe("ok");
    let same = "";
    await w.request({ type: "execute", code: "hashlib.sha256(x).hexdigest() == h" }, { result: (t) => (same = t) });
    expect(same).toBe("True");
  });

  test("a failed snapshot leaves no temp file and never replaces the target", async () => {
    const w = await startWorker();
    const target = join(workers.tmp.home, "s.pkl");
    writeFileSync(target, "old");
    const file = new PayloadFile(target);
    try {
      const done = await w.request({ type: "snapshot", to: "host", prune_oversized: true }, file.handlers);
      expect(() => file.commit(done)).toThrow(/prune_oversized/);
    } finally {
      file.discard();
    }
    expect(readFileSync(target, "utf8")).toBe("old");
    expect(existsSync(file.tmp)).toBe(false);
  });

  test("a payload that does not match the done's size or sha256 is refused", () => {
    const target = join(workers.tmp.home, "s.pkl");
    const file = new PayloadFile(target);
    try {
      file.handlers.data?.(Buffer.from("abc"), 0);
      expect(() => file.commit({ event: "done", id: "1", status: "ok", bytes: 4, sha256: "x" })).toThrow(/sent 3 bytes but reported 4/);
      expect(() => file.commit({ event: "done", id: "1", status: "ok", bytes: 3, sha256: "x" })).toThrow(/sha256/);
    } finally {
      file.discard();
    }
    const gap = new PayloadFile(target);
    try {
      gap.handlers.data?.(Buffer.from("abc"), 1);
      expect(() => gap.commit({ event: "done", id: "1", status: "ok", bytes: 0, sha256: "" })).toThrow(/piece 1 arrived where 0 was expected/);
    } finally {
      gap.discard();
    }
    expect(existsSync(target)).toBe(false);
  });

  test("openPayload refuses what is not a regular file, or is over the cap, before the worker sees it", async () => {
    const fifo = join(workers.tmp.home, "fifo");
    execFileSync("mkfifo", [fifo]);
    expect((await rejection(openPayload(fifo, 0))).message).toContain("not a regular file");
    expect((await rejection(openPayload("/dev/zero", 0))).message).toContain("not a regular file");
    expect((await rejection(openPayload(workers.tmp.home, 0))).message).toContain("not a regular file");
    const big = join(workers.tmp.home, "big");
    writeFileSync(big, Buffer.alloc(1000));
    expect((await rejection(openPayload(big, 999))).message).toContain("holds 1000 bytes, over the snapshot cap of 999");
    expect((await rejection(openPayload(join(workers.tmp.home, "missing"), 0))).code).toBe("restore_failed");
    const ok = await openPayload(big, 1000);
    expect(ok.bytes).toBe(1000);
    let sent = 0;
    for await (const piece of ok.pieces()) sent += piece.length;
    expect(sent).toBe(1000);
  });

  test("data frames are read without JSON.parse; other shapes are left to the JSON path", () => {
    const line = Buffer.from('{"event":"data","id":"12","seq":3,"data":"aGVsbG8="}');
    const frame = readDataFrame(line);
    expect(frame?.id).toBe("12");
    expect(frame?.seq).toBe(3);
    expect(frame?.piece.toString()).toBe("hello");
    expect(readDataFrame(Buffer.from('{"event":"data","id":"1","data":"aGVsbG8=","seq":3}'))).toBeNull();
    expect(readDataFrame(Buffer.from('{"event":"stdout","id":"1","text":"aGVsbG8="}'))).toBeNull();
  });
});

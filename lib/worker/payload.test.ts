import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rejection, useWorkers } from "../../tests/harness/mod.ts";
import { openPayload, PayloadFile, restoreFromFile, snapshotToFile } from "./payload.ts";
import { readBinaryDataHeader, readDataFrame } from "../wire/data_frames.ts";
import type { Worker } from "./worker.ts";

const workers = useWorkers();

/** A fresh namespace restored from `target` holds the x whose sha256 the snapshot's h says. */
async function expectRestored(w: Worker, target: string): Promise<void> {
  await w.request({ type: "reset" });
  const back = await restoreFromFile(w, target);
  expect(back.status).toBe("ok");
  let same = "";
  await w.request({ type: "execute", code: "hashlib.sha256(x).hexdigest() == h" }, { result: (t) => (same = t) });
  expect(same).toBe("True");
}
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
    await expectRestored(w, target);
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

  test("a binary data frame's header is read without JSON.parse; a base64 frame or another shape is not one", () => {
    expect(readBinaryDataHeader(Buffer.from('{"event":"data","id":"12","seq":3,"bytes":1048576}'))).toEqual({ id: "12", seq: 3, bytes: 1048576 });
    expect(readBinaryDataHeader(Buffer.from('{"event":"data","id":"12","seq":3,"data":"aGVsbG8="}'))).toBeNull();
    expect(readBinaryDataHeader(Buffer.from('{"event":"data","id":"12","seq":3,"bytes":-1}'))).toBeNull();
    expect(readBinaryDataHeader(Buffer.from('{"event":"data","id":"1\\"","seq":3,"bytes":1}'))).toBeNull();
  });
});

/** Frames of a snapshot to the host as the data handler saw them: the count of distinct pieces (seq). */
async function snapshotPieces(w: Worker, target: string): Promise<number> {
  const file = new PayloadFile(target);
  let pieces = 0;
  try {
    const done = await w.request({ type: "snapshot", to: "host" }, {
      data: (piece, seq) => {
        pieces = Math.max(pieces, seq + 1);
        file.handlers.data?.(piece, seq);
      },
    });
    file.commit(done);
  } finally {
    file.discard();
  }
  return pieces;
}

// Bytes that look like the protocol inside the payload: newlines, frame openings, invalid UTF-8.
const TRICKY =
  `x = (b'\\n{"event":"done","id":"1","status":"ok"}\\n' * 40000 + bytes([0xff, 0xfe, 0xc3, 0x28, 10]) * 30000 + __import__('os').urandom(3 << 20))\nimport hashlib\nh = hashlib.sha256(x).hexdigest()`;

describe("binary data frames (the runtime's binary_data)", () => {
  test("both ways: raw pieces of 1 MiB that hold newlines, frame openings and invalid UTF-8 come back whole", async () => {
    const w = await startWorker();
    expect(w.ready?.capabilities).toContain("binary_data");
    await w.request({ type: "execute", code: TRICKY });
    const target = join(workers.tmp.home, "s.pkl");
    const pieces = await snapshotPieces(w, target);
    const size = statSync(target).size;
    expect(size).toBeGreaterThan(4 << 20);
    expect(pieces).toBe(Math.ceil(size / (1 << 20))); // 1 MiB binary frames, not 256 KiB base64 ones
    await expectRestored(w, target);
    // The channel is still framed right after both: an ordinary request answers.
    let two = "";
    await w.request({ type: "execute", code: "1+1" }, { result: (t) => (two = t) });
    expect(two).toBe("2");
  });

  test("a runtime without binary_data gets base64 frames and a sha256 up front, both ways", async () => {
    const w = await startWorker();
    if (w.ready) w.ready.capabilities = w.ready.capabilities.filter((c) => c !== "binary_data"); // as an older runtime says
    await w.request({ type: "execute", code: TRICKY });
    const target = join(workers.tmp.home, "s.pkl");
    const pieces = await snapshotPieces(w, target);
    expect(pieces).toBe(Math.ceil(statSync(target).size / (1 << 18)));
    await expectRestored(w, target);
  });

  test("a worker killed in the middle of a binary snapshot: the request fails, no temp file, the old snapshot stays", async () => {
    const w = await startWorker();
    await w.request({ type: "execute", code: "import os\nx = os.urandom(256 << 20)" });
    const target = join(workers.tmp.home, "s.pkl");
    writeFileSync(target, "old");
    let killed = false;
    const file = new PayloadFile(target);
    try {
      const done = w.request({ type: "snapshot", to: "host" }, {
        data: (piece, seq) => {
          file.handlers.data?.(piece, seq);
          if (!killed && file.bytes > 3 << 20) {
            killed = true; // mid-frame: the handler sees a part of a piece at a time
            w.kill();
          }
        },
      });
      expect((await rejection(done)).code).toBe("worker_died");
    } finally {
      file.discard();
    }
    expect(killed).toBe(true);
    expect(readFileSync(target, "utf8")).toBe("old");
    expect(readdirSync(workers.tmp.home).filter((n) => n.endsWith(".tmp"))).toEqual([]);
  });

  test("a worker killed in the middle of a binary restore: the request fails at once instead of hanging", async () => {
    const w = await startWorker();
    await w.request({ type: "execute", code: "import os\nx = os.urandom(64 << 20)" });
    const target = join(workers.tmp.home, "s.pkl");
    await snapshotToFile(w, target);
    const source = await openPayload(target, 0);
    let sent = 0;
    const slow: AsyncIterable<Uint8Array> & { sha256(): Promise<string> } = {
      sha256: () => source.pieces().sha256(),
      async *[Symbol.asyncIterator]() {
        for await (const piece of source.pieces()) {
          sent += piece.length;
          if (sent > 8 << 20) w.kill(); // the frame it belongs to is under way
          yield piece;
        }
      },
    };
    const done = w.request({ type: "restore", from: "host", bytes: source.bytes }, undefined, slow);
    expect((await rejection(done)).code).toBe("worker_died");
  });
});

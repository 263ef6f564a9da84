// Snapshot payloads over the protocol (docs/protocol.md, "Payloads over the protocol"): a snapshot
// streamed to the host as data events, and a restore whose payload the host sends in data requests.
import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { closeAll, type Event, Runtime, sleep } from "../harness/mod.ts";

afterEach(closeAll);

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** Snapshots to the host; returns the done and the payload put together from its data events. */
async function snapshotToHost(rt: Runtime, extra: Record<string, unknown> = {}): Promise<{ done: Event; payload: Buffer; pieces: Event[] }> {
  const { done, events } = await rt.request({ type: "snapshot", to: "host", ...extra }, 60_000);
  const pieces = events.filter((e) => e.event === "data");
  return { done, pieces, payload: Buffer.concat(pieces.map((e) => Buffer.from(e.data as string, "base64"))) };
}

/** Sends a restore from the host with `payload` in pieces of `piece` bytes; resolves with its done. */
async function restoreFromHost(rt: Runtime, payload: Buffer, piece = 1 << 20, hash: string | null = sha256(payload)): Promise<Event> {
  const id = rt.newId("restore");
  const from = rt.events.length;
  rt.send({ type: "restore", id, from: "host", bytes: payload.length, ...(hash ? { sha256: hash } : {}) });
  for (let off = 0; off < payload.length; off += piece) rt.send({ type: "data", id, data: payload.subarray(off, off + piece).toString("base64") });
  return rt.waitFor((e) => e.event === "done" && e.id === id, 60_000, from);
}

describe("snapshot to the host", () => {
  test("streams the payload in order; its size, sha256 and manifest are in the done; it restores", async () => {
    const rt = await Runtime.start();
    await rt.exec("import os, hashlib\nx = os.urandom(3 * 2**20 + 7)\ny = {'a': [1, 2, 3]}\nh = hashlib.sha256(x).hexdigest()");
    const { done, payload, pieces } = await snapshotToHost(rt);
    expect(done.status).toBe("ok");
    expect(pieces.length).toBeGreaterThan(10); // 256 KiB pieces: never the whole payload in one event
    expect(pieces.map((e) => e.seq)).toEqual(pieces.map((_, i) => i));
    expect(payload.length).toBe(done.bytes as number);
    expect(sha256(payload)).toBe(done.sha256 as string);
    const manifest = done.manifest as Record<string, unknown>;
    expect(manifest.savedNames).toEqual(expect.arrayContaining(["x", "y", "h"]));
    expect(manifest.bytes).toBe(payload.length);
    expect(manifest.version).toBe(1);
    expect(done.pruned).toEqual([]);
    const before = (await rt.exec("h")).result;
    await rt.exec("del x, y, h");
    const restored = await restoreFromHost(rt, payload);
    expect(restored.status).toBe("ok");
    expect(restored.restored).toEqual(expect.arrayContaining(["h", "x", "y"]));
    expect((await rt.exec("hashlib.sha256(x).hexdigest()")).result).toBe(before);
    expect((await rt.exec("y")).result).toBe("{'a': [1, 2, 3]}");
  });

  test("chunk_bytes sets the piece size; over 16 MiB is refused; prune_oversized is refused", async () => {
    const rt = await Runtime.start();
    await rt.exec("x = b'a' * 100_000");
    const { done, pieces } = await snapshotToHost(rt, { chunk_bytes: 10_000 });
    expect(done.status).toBe("ok");
    expect(pieces.length).toBe(Math.ceil((done.bytes as number) / 10_000));
    const big = await rt.request({ type: "snapshot", to: "host", chunk_bytes: 1 << 25 });
    expect(big.done.status).toBe("error");
    expect(String(big.done.reason)).toContain("chunk_bytes");
    const prune = await rt.request({ type: "snapshot", to: "host", prune_oversized: true });
    expect(prune.done.status).toBe("error");
    expect(String(prune.done.reason)).toContain("prune_oversized");
    expect((await rt.exec("len(x)")).result).toBe("100000");
  });

  test("a snapshot with neither a path nor to: host is refused, saying both", async () => {
    const rt = await Runtime.start();
    const { done } = await rt.request({ type: "snapshot" });
    expect(done.status).toBe("error");
    expect(String(done.reason)).toContain("'to': 'host'");
  });

  test("an interrupt lands between two pieces: the snapshot ends with reason interrupted, the session serves on", async () => {
    const rt = await Runtime.start();
    await rt.exec("import os\nx = os.urandom(64 * 2**20)");
    const id = rt.newId("snap");
    rt.send({ type: "snapshot", id, to: "host", chunk_bytes: 4096 });
    await rt.waitFor((e) => e.event === "data" && e.id === id, 30_000);
    rt.send({ type: "interrupt", id });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 30_000);
    expect(done.status).toBe("error");
    expect(done.reason).toBe("interrupted");
    expect((await rt.exec("len(x)")).result).toBe(String(64 * 2 ** 20));
  });
});

describe("restore from the host", () => {
  test("a wrong sha256, too many bytes, a piece that is not base64 fail clearly; the session serves on", async () => {
    const rt = await Runtime.start();
    await rt.exec("x = 1");
    const { payload } = await snapshotToHost(rt);
    const wrong = await restoreFromHost(rt, payload, 1 << 20, "00".repeat(32));
    expect(wrong.status).toBe("error");
    expect(String(wrong.reason)).toContain("corrupt snapshot <from host>: sha256");
    const id = rt.newId("r");
    rt.send({ type: "restore", id, from: "host", bytes: 3 });
    rt.send({ type: "data", id, data: payload.toString("base64") });
    const over = await rt.waitFor((e) => e.event === "done" && e.id === id);
    expect(String(over.reason)).toContain("more than the 3 declared");
    const junk = await restoreFromHost(rt, Buffer.from("not a pickle at all"), 1 << 20, null);
    expect(junk.status).toBe("error");
    expect(String(junk.reason)).toContain("corrupt snapshot <from host>");
    expect((await rt.exec("x")).result).toBe("1");
  });

  test("pieces may arrive while an earlier cell runs; the restore waits for the last one", async () => {
    const rt = await Runtime.start();
    await rt.exec("import os\nx = os.urandom(2**20)\nimport hashlib\nh = hashlib.sha256(x).hexdigest()");
    const { payload } = await snapshotToHost(rt);
    const h = (await rt.exec("h")).result;
    await rt.exec("del x, h");
    rt.send({ type: "execute", id: "slow", code: "import time\ntime.sleep(0.5)" });
    const id = rt.newId("r");
    rt.send({ type: "restore", id, from: "host", bytes: payload.length, sha256: sha256(payload) });
    const half = payload.length >> 1;
    rt.send({ type: "data", id, data: payload.subarray(0, half).toString("base64") });
    await sleep(800); // the cell is done; the restore now waits for the rest
    expect(rt.events.some((e) => e.event === "done" && e.id === id)).toBe(false);
    rt.send({ type: "data", id, data: payload.subarray(half).toString("base64") });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 30_000);
    expect(done.status).toBe("ok");
    expect((await rt.exec("h")).result).toBe(h);
  });

  test("an interrupt while it waits for pieces ends it; later pieces are dropped; a bad bytes field is refused", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("r");
    rt.send({ type: "restore", id, from: "host", bytes: 100 });
    await sleep(200);
    rt.send({ type: "interrupt", id });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 5_000);
    expect(done.reason).toBe("interrupted");
    rt.send({ type: "data", id, data: Buffer.alloc(100).toString("base64") });
    const bad = await rt.request({ type: "restore", from: "host", bytes: -1 });
    expect(bad.done.status).toBe("error");
    expect(String(bad.done.reason)).toContain("bytes");
    expect((await rt.exec("1 + 1")).result).toBe("2");
  });

  test("stdin closing before the payload's end fails the restore instead of hanging", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("r");
    rt.send({ type: "restore", id, from: "host", bytes: 1000 });
    rt.send({ type: "data", id, data: Buffer.alloc(10).toString("base64") });
    await sleep(100);
    rt.proc.stdin?.end();
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id, 5_000);
    expect(done.status).toBe("error");
    expect(String(done.reason)).toContain("stdin closed");
  });
});

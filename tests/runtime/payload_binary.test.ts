// Binary data frames into the runtime (docs/protocol.md, "Payloads over the protocol"): a restore
// `from: "host"` with `binary: true` gets its payload as `{"type":"data","id","bytes":N}` lines, each
// followed by N raw bytes, and the sha256 of them all in a closing data request. The runtime's reader
// must switch between lines and raw bytes without ever mis-framing what follows.
import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { closeAll, type Event, Runtime, sleep, tempHome } from "../harness/mod.ts";

afterEach(closeAll);

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

// A namespace whose payload holds what looks like the protocol: newlines, request openings, invalid UTF-8.
const TRICKY = `import os, hashlib
x = (b'\\n{"type":"data","id":"r1","bytes":5}\\n{"type":"shutdown"}\\n' * 20000 + bytes([0xff, 0xfe, 0xc3, 0x28, 10]) * 20000 + os.urandom(1 << 20))
h = hashlib.sha256(x).hexdigest()`;

/** The namespace's payload (format 2) as a path-mode snapshot writes it. */
async function payloadOf(rt: Runtime): Promise<Buffer> {
  const tmp = tempHome();
  try {
    const path = join(tmp.home, "s.pkl");
    const { done } = await rt.request({ type: "snapshot", path, manifest_path: `${path}.json` }, 30_000);
    expect(done.status).toBe("ok");
    return readFileSync(path);
  } finally {
    tmp.remove();
  }
}

/** One binary frame: its header line and its raw bytes. */
const frame = (id: string, piece: Uint8Array) => Buffer.concat([Buffer.from(`${JSON.stringify({ type: "data", id, bytes: piece.length })}\n`), piece]);

/** A binary restore of `payload` in frames of the given sizes (cycled), then `closing` (default: the right sha256). */
function sendBinaryRestore(rt: Runtime, payload: Buffer, sizes: number[], closing?: Record<string, unknown> | null): string {
  const id = rt.newId("restore");
  rt.send({ type: "restore", id, from: "host", bytes: payload.length, binary: true });
  for (let off = 0, k = 0; off < payload.length; k++) {
    const n = sizes[k % sizes.length]!;
    rt.sendRaw(frame(id, payload.subarray(off, off + n)));
    off += n;
  }
  if (closing !== null) rt.send({ type: "data", id, ...(closing ?? { sha256: sha256(payload) }) });
  return id;
}

const doneOf = (rt: Runtime, id: string, timeoutMs = 30_000): Promise<Event> => rt.waitFor((e) => e.event === "done" && e.id === id, timeoutMs);

describe("restore from the host in binary frames", () => {
  test("raw pieces of any size, holding newlines, request lines and invalid UTF-8, restore whole; the channel stays framed", async () => {
    const rt = await Runtime.start();
    expect((rt.events.find((e) => e.event === "ready")?.capabilities as string[]) ?? []).toContain("binary_data");
    await rt.exec(TRICKY, 30_000);
    const h = (await rt.exec("h")).result;
    const payload = await payloadOf(rt);
    await rt.exec("del x, h");
    const id = sendBinaryRestore(rt, payload, [1, 7, 65_536, 300_001, 1 << 20]);
    const done = await doneOf(rt, id);
    expect(done.status).toBe("ok");
    expect(done.restored).toEqual(expect.arrayContaining(["x", "h"]));
    expect((await rt.exec("hashlib.sha256(x).hexdigest() == h")).result).toBe("True");
    expect((await rt.exec("h")).result).toBe(h);
    expect(rt.badLines).toEqual([]);
  });

  test("a wrong sha256, too few bytes, too many, a base64 piece, a closing line without a hash: each fails clearly and the next request is read right", async () => {
    const rt = await Runtime.start();
    await rt.exec("import os\ny = os.urandom(300_000)");
    const payload = await payloadOf(rt);
    const cases: [string, () => string][] = [
      ["sha256", () => sendBinaryRestore(rt, payload, [100_000], { sha256: "0".repeat(64) })],
      [`of the ${payload.length} declared`, () => {
        const id = rt.newId("restore");
        rt.send({ type: "restore", id, from: "host", bytes: payload.length, binary: true });
        rt.sendRaw(frame(id, payload.subarray(0, 1000)));
        rt.send({ type: "data", id, sha256: sha256(payload) });
        return id;
      }],
      ["more than", () => {
        const id = rt.newId("restore");
        rt.send({ type: "restore", id, from: "host", bytes: 10, binary: true });
        rt.sendRaw(frame(id, Buffer.from('0123456789\n{"type":"shutdown"}\n')));
        return id;
      }],
      ["base64", () => {
        const id = rt.newId("restore");
        rt.send({ type: "restore", id, from: "host", bytes: 10, binary: true });
        rt.send({ type: "data", id, data: Buffer.alloc(10).toString("base64") });
        return id;
      }],
      ["sha256", () => sendBinaryRestore(rt, payload, [1 << 20], { sha256: 5 })],
      ["binary data frame arrived for a base64 restore", () => {
        const id = rt.newId("restore");
        rt.send({ type: "restore", id, from: "host", bytes: 10 });
        rt.sendRaw(frame(id, Buffer.from('01234\n{"type":"shutdown"}\n')));
        return id;
      }],
    ];
    for (const [reason, send] of cases) {
      const done = await doneOf(rt, send(), 10_000);
      expect(done.status).toBe("error");
      expect(String(done.reason)).toContain(reason);
      expect((await rt.exec("1 + 1")).result).toBe("2"); // the raw bytes were never read as requests
    }
    expect(rt.exitCode).toBeNull();
  });

  test("an interrupted restore's later frames, and a frame for no restore, are dropped whole", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("r");
    rt.send({ type: "restore", id, from: "host", bytes: 100, binary: true });
    await sleep(200);
    rt.send({ type: "interrupt", id });
    const done = await doneOf(rt, id, 5_000);
    expect(done.reason).toBe("interrupted");
    rt.sendRaw(frame(id, Buffer.from('{"type":"execute","id":"evil","code":"1/0"}\n'.repeat(2))));
    rt.sendRaw(frame("nobody", Buffer.from('\n{"type":"shutdown"}\n')));
    expect((await rt.exec("1 + 1")).result).toBe("2");
    expect(rt.events.some((e) => e.id === "evil")).toBe(false);
  });

  test("stdin closing in the middle of a frame fails the restore instead of hanging", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("r");
    rt.send({ type: "restore", id, from: "host", bytes: 1000, binary: true });
    rt.sendRaw(Buffer.concat([Buffer.from(`${JSON.stringify({ type: "data", id, bytes: 1000 })}\n`), Buffer.alloc(10)]));
    await sleep(100);
    rt.proc.stdin?.end();
    const done = await doneOf(rt, id, 5_000);
    expect(done.status).toBe("error");
    expect(String(done.reason)).toContain("stdin closed");
    expect(await rt.waitExit(5_000)).toBe(true);
  });
});

import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connectLines, connectNode, listenSocket, wireLines } from "./socket.ts";
import { LineSplitter } from "./lines.ts";
import { shortHash, socketPath } from "../settings/home.ts";

describe("LineSplitter", () => {
  test("joins lines split across chunks, including a UTF-8 character cut in half", () => {
    const s = new LineSplitter(1024);
    const bytes = Buffer.from('{"a":"é"}\n{"b":1}\n');
    const cut = bytes.indexOf(0xc3) + 1; // inside the two-byte é
    expect(s.push(bytes.subarray(0, cut))).toEqual([]);
    expect(s.push(bytes.subarray(cut))).toEqual(['{"a":"é"}', '{"b":1}']);
  });

  test("throws once a line passes the cap, whether or not its newline has arrived", () => {
    expect(() => new LineSplitter(8).push(Buffer.from("0123456789"))).toThrow(RangeError);
    expect(() => new LineSplitter(8).push(Buffer.from("0123456789\n"))).toThrow(RangeError);
    const s = new LineSplitter(8);
    s.push(Buffer.from("01234"));
    expect(() => s.push(Buffer.from("56789"))).toThrow(RangeError);
  });

  test("strict mode gives null for a line that is not UTF-8; lenient mode replaces", () => {
    const bad = Buffer.concat([Buffer.from('{"code":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}\nok\n')]);
    expect(new LineSplitter(64, true).push(bad)).toEqual([null, "ok"]);
    expect(new LineSplitter(64).push(bad)[0]).toContain("\ufffd");
  });

  test("does not keep a reference to a chunk the caller reuses", () => {
    const s = new LineSplitter(64);
    const chunk = Buffer.from("abc");
    s.push(chunk);
    chunk.fill(0x7a);
    expect(s.push(Buffer.from("\n"))).toEqual(["abc"]);
  });
});

describe("socketPath", () => {
  test("lives in the state directory when short enough", () => {
    expect(socketPath("/home/u/.local/state/awrepl")).toBe("/home/u/.local/state/awrepl/supervisor.sock");
  });

  test("falls back to a short path derived from the home, the same in every process", () => {
    const home = `/tmp/${"x".repeat(120)}`;
    const path = socketPath(home);
    expect(Buffer.byteLength(path)).toBeLessThanOrEqual(100);
    expect(path).toBe(socketPath(home));
    expect(path).not.toBe(socketPath(`${home}y`));
    expect(path).toContain(shortHash(home));
  });
});

describe.each(
  [
    ["Bun.connect", connectLines],
    ["node:net", connectNode],
  ] as const,
)("client over %s", (_name, connectTo) => {
  test("exchanges lines both ways and reports a missing socket as ENOENT", async () => {
    const dir = mkdtempSync(join(tmpdir(), "awrepl-transport-"));
    const path = join(dir, "s.sock");
    try {
      await expect(connectTo(path, { onLine() {}, onClose() {} })).rejects.toMatchObject({ code: "ENOENT" });
      const server = await listenSocket(path, (socket) => {
        wireLines(socket, { maxLineBytes: 1 << 20, onLine: (line) => socket.write(`echo:${line}\n`), onClose: () => {} });
      });
      const got: string[] = [];
      let closed!: () => void;
      const closedP = new Promise<void>((r) => (closed = r));
      const conn = await connectTo(path, { onLine: (l) => got.push(l), onClose: () => closed() });
      const big = "y".repeat(300_000);
      conn.write("one");
      conn.write(big);
      const deadline = Date.now() + 5000;
      while (got.length < 2 && Date.now() < deadline) await Bun.sleep(5);
      expect(got).toEqual(["echo:one", `echo:${big}`]);
      conn.close();
      await closedP;
      server.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

import { describe, expect, test } from "bun:test";
import { capEntries, capText, OutputCollector, truncationMarker } from "./output.ts";
import { LINE_SNAP_BYTES } from "../core/limits.ts";
import { utf8Length, utf8Prefix, utf8Suffix } from "../core/utf8.ts";
import { RawText, readOutputFrame } from "../wire/output_frames.ts";

/**
 * Checks that `kept` is a head of `written`, one marker line, and a tail of `written`, with exactly the
 * marker's count of bytes between them. Returns the kept and dropped byte counts.
 */
function splitAtMarker(kept: string, written: string): { keptBytes: number; dropped: number } {
  const m = /\.\.\. \[(\d+) bytes truncated\] \.\.\.\n/.exec(kept);
  if (!m) {
    expect(kept).toBe(written);
    return { keptBytes: utf8Length(kept), dropped: 0 };
  }
  const dropped = Number(m[1]);
  const tail = kept.slice(m.index + m[0].length);
  let head = kept.slice(0, m.index);
  // The newline before the marker is the collector's own when the head ended mid-line.
  if (utf8Length(head) + dropped + utf8Length(tail) !== utf8Length(written) && head.endsWith("\n")) head = head.slice(0, -1);
  expect(written.startsWith(head)).toBe(true);
  expect(written.endsWith(tail)).toBe(true);
  expect(utf8Length(head) + dropped + utf8Length(tail)).toBe(utf8Length(written));
  return { keptBytes: utf8Length(head) + utf8Length(tail), dropped };
}

describe("OutputCollector", () => {
  test("keeps everything under the limit, per stream", () => {
    const c = new OutputCollector(100);
    c.add("stdout", "hello\n");
    c.add("stderr", "oops\n");
    c.add("stdout", "world\n");
    expect(c.result()).toEqual({ stdout: "hello\nworld\n", stderr: "oops\n", truncated: false, truncated_bytes: 0 });
  });

  test("exactly the limit is not truncated", () => {
    const c = new OutputCollector(10);
    c.add("stdout", "0123456789");
    expect(c.result().truncated).toBe(false);
    expect(c.result().stdout).toBe("0123456789");
  });

  test("50-byte limit: head, one marker line, tail, exact count", () => {
    const c = new OutputCollector(50);
    const text = "x".repeat(1000);
    c.add("stdout", text);
    const r = c.result();
    expect(r.truncated).toBe(true);
    expect(r.truncated_bytes).toBe(950);
    expect(r.stdout).toBe(`${"x".repeat(25)}\n${truncationMarker(950)}${"x".repeat(25)}`);
  });

  test("many small writes: head is the first bytes, tail the last", () => {
    const c = new OutputCollector(40);
    let all = "";
    for (let i = 0; i < 1000; i++) {
      const line = `${i}\n`;
      all += line;
      c.add("stdout", line);
    }
    const r = c.result();
    const [head] = utf8Prefix(all, 20);
    const [tail] = utf8Suffix(all, 20);
    expect(r.stdout.startsWith(head)).toBe(true);
    expect(r.stdout.endsWith(tail)).toBe(true);
    expect(r.truncated_bytes).toBe(utf8Length(all) - 40);
    expect(r.stdout).toContain(truncationMarker(r.truncated_bytes));
  });

  test("the cuts land on line boundaries near them: no half line is kept, the bytes moved are counted", () => {
    for (const raw of [false, true]) {
      const c = new OutputCollector(1000);
      let all = "";
      for (let i = 0; i < 300; i++) {
        const piece = `line ${String(i).padStart(3, "0")} ${"x".repeat(i % 17)}\n${i % 5 === 0 ? "and a second one\n" : ""}`;
        all += piece;
        if (raw) c.addRaw("stdout", readOutputFrame(Buffer.from(`{"event":"stdout","id":"1","text":${JSON.stringify(piece)}}`))!.raw);
        else c.add("stdout", piece);
      }
      const r = c.result();
      const { keptBytes, dropped } = splitAtMarker(r.stdout, all);
      expect(r.truncated_bytes).toBe(dropped);
      expect(keptBytes).toBeLessThanOrEqual(1000);
      expect(keptBytes).toBeGreaterThan(1000 - 2 * 40);
      const [head, tail] = r.stdout.split(/\.\.\. \[\d+ bytes truncated\] \.\.\.\n/) as [string, string];
      expect(head.endsWith("\n")).toBe(true);
      const lines = new Set(all.split("\n"));
      for (const line of [...head.split("\n"), ...tail.split("\n")]) expect(lines.has(line)).toBe(true); // whole lines only
    }
  });

  test("no newline within LINE_SNAP_BYTES: the cut stays where the limit put it", () => {
    const c = new OutputCollector(3000); // head and tail 1500 bytes: each holds 731 bytes of a partial line
    const line = `${"y".repeat(LINE_SNAP_BYTES * 3)}\n`;
    for (let i = 0; i < 10; i++) c.add("stdout", line);
    const r = c.result();
    expect(r.truncated_bytes).toBe(10 * line.length - 3000);
    expect(splitAtMarker(r.stdout, line.repeat(10)).keptBytes).toBe(3000);
  });

  test("an undecoded piece ending in an escaped backslash and an n does not end a line", () => {
    const c = new OutputCollector(20);
    const frame = (text: string) => readOutputFrame(Buffer.from(`{"event":"stdout","id":"1","text":${JSON.stringify(text)}}`))!.raw;
    const pieces = ["a".repeat(10), "b".repeat(30), "c\\n", "d\ne".repeat(2)];
    for (const p of pieces) c.addRaw("stdout", frame(p));
    const r = c.result();
    // The tail "d\ned\ne" follows "c\\n" (no newline there): its first, partial line is cut.
    expect(r.stdout).toBe(`${"a".repeat(10)}\n${truncationMarker(pieces.join("").length - 10 - 4)}ed\ne`);
  });

  test("stdout and stderr share one limit and each reports its own marker", () => {
    const c = new OutputCollector(20);
    c.add("stdout", "a".repeat(15)); // 10 kept in head, 5 to tail
    c.add("stderr", "b".repeat(15)); // tail rolls
    c.add("stdout", "c".repeat(5));
    const r = c.result();
    // The kept bytes are the first 10 and the last 10 of the combined sequence.
    expect(r.truncated_bytes).toBe(15);
    expect(r.stdout).toBe(`${"a".repeat(10)}\n${truncationMarker(5)}${"c".repeat(5)}`);
    expect(r.stderr).toBe(`${truncationMarker(10)}${"b".repeat(5)}`);
  });

  test("multi-byte characters are never split and truncated_bytes stays exact", () => {
    for (const ch of ["é", "€", "😀"]) {
      for (const limit of [1, 2, 3, 5, 7, 11, 50]) {
        const c = new OutputCollector(limit);
        const written = { stdout: "", stderr: "" };
        for (let i = 0; i < 37; i++) {
          const piece = ch.repeat((i % 4) + 1) + (i % 3 === 0 ? "\n" : "");
          const stream = i % 2 ? "stdout" : "stderr";
          written[stream] += piece;
          c.add(stream, piece);
        }
        const r = c.result();
        // Decoding never produced a replacement character: nothing was cut mid-character.
        expect(`${r.stdout}${r.stderr}`.includes("\uFFFD")).toBe(false);
        let dropped = 0;
        let kept = 0;
        for (const stream of ["stdout", "stderr"] as const) {
          const v = splitAtMarker(r[stream], written[stream]);
          dropped += v.dropped;
          kept += v.keptBytes;
        }
        expect(kept).toBeLessThanOrEqual(limit);
        expect(r.truncated_bytes).toBe(dropped);
        expect(kept + dropped).toBe(utf8Length(written.stdout) + utf8Length(written.stderr));
        expect(r.truncated).toBe(dropped > 0);
      }
    }
  });

  test("memory stays bounded while 10 MB goes through", () => {
    const c = new OutputCollector(1000);
    const chunk = "y".repeat(8192);
    for (let i = 0; i < 1280; i++) c.add("stdout", chunk);
    const r = c.result();
    expect(utf8Length(r.stdout)).toBeLessThan(1000 + 100);
    expect(r.truncated_bytes).toBe(1280 * 8192 - 1000);
    expect(c.totalBytes).toBe(1280 * 8192);
  });

  test("frames larger than a small limit's tail pass through undecoded: only the kept ones are decoded", () => {
    const text = RawText.prototype.text;
    let decoded = 0;
    RawText.prototype.text = function (this: RawText) {
      decoded++;
      return text.call(this);
    };
    try {
      const c = new OutputCollector(4096);
      const frames = Array.from({ length: 1000 }, (_, i) => `${String(i).padStart(4, "0")}${"é".repeat(4500)}\n`);
      for (const f of frames) c.addRaw("stdout", RawText.fromText(f));
      expect(decoded).toBe(1); // the first frame, which fills the head
      const r = c.result();
      expect(decoded).toBe(2); // and the last one, cut for the tail
      const total = frames.reduce((n, f) => n + utf8Length(f), 0);
      const [head] = utf8Prefix(frames[0] as string, 2048);
      const [tail] = utf8Suffix(frames[999] as string, 2048);
      expect(r.stdout).toBe(`${head}\n${truncationMarker(total - utf8Length(head) - utf8Length(tail))}${tail}`);
      expect(r.truncated_bytes).toBe(total - utf8Length(head) - utf8Length(tail));
    } finally {
      RawText.prototype.text = text;
    }
  });

  test("a zero limit is no limit, as a timeout of 0 is none: everything is kept, raw pieces too", () => {
    const c = new OutputCollector(0);
    const big = "y".repeat(200_000);
    c.add("stdout", big);
    c.addRaw("stdout", RawText.fromText("z"));
    c.add("stderr", "e");
    expect(c.result()).toEqual({ stdout: `${big}z`, stderr: "e", truncated: false, truncated_bytes: 0 });
    expect(capText(big, c.limit)).toEqual({ text: big, dropped: 0 });
  });

  test("rejects a negative limit", () => {
    expect(() => new OutputCollector(-1)).toThrow(RangeError);
  });
});

describe("capText", () => {
  test("a text within the limit is kept whole", () => {
    expect(capText("abc", 3)).toEqual({ text: "abc", dropped: 0 });
    expect(capText("é".repeat(5), 10)).toEqual({ text: "é".repeat(5), dropped: 0 });
  });

  test("an over-long text keeps head and tail around one marker line, cut on character boundaries", () => {
    const text = "é".repeat(100); // 200 bytes
    const capped = capText(text, 11); // head 6 bytes, tail 5 -> 4 bytes (2 characters)
    expect(capped.dropped).toBe(200 - 6 - 4);
    expect(capped.text).toBe(`ééé\n${truncationMarker(190)}éé`);
  });

  test("a text of lines is cut on line boundaries near the limit's cut, counted exactly", () => {
    const text = Array.from({ length: 100 }, (_, i) => `row ${i}: ${"v".repeat(i % 13)}`).join("\n");
    const capped = capText(text, 300);
    const { keptBytes, dropped } = splitAtMarker(capped.text, text);
    expect(capped.dropped).toBe(dropped);
    expect(keptBytes).toBeLessThanOrEqual(300);
    const [head, tail] = capped.text.split(truncationMarker(dropped)) as [string, string];
    expect(head.endsWith("\n")).toBe(true);
    expect(tail.startsWith("row ")).toBe(true);
  });

  test("a head ending in a newline gets no extra line break", () => {
    expect(capText("ab\ncdefgh", 6)).toEqual({ text: `ab\n${truncationMarker(3)}fgh`, dropped: 3 });
  });
});

describe("capEntries", () => {
  const frames = ["Traceback (most recent call last):\n", '  File "<cell-1>", line 2, in f\n    raise ValueError(x)\n'];

  test("entries within the limit are joined whole", () => {
    expect(capEntries([...frames, "ValueError: short\n"], 1000)).toEqual({ text: `${frames.join("")}ValueError: short\n`, dropped: 0 });
  });

  test("a huge exception line is cut and the frames are kept whole", () => {
    const message = `ValueError: ${"e".repeat(10_000)}\n`;
    const capped = capEntries([...frames, message], 1000);
    const share = 1000 - Buffer.byteLength(frames.join(""));
    expect(capped.dropped).toBe(message.length - share);
    expect(capped.text).toBe(frames.join("") + capText(message, share).text);
  });

  test("two huge entries share the limit evenly", () => {
    const a = "a".repeat(5000);
    const b = "b".repeat(3000);
    const capped = capEntries(["x\n", a, b], 1002);
    expect(capped.text).toBe(`x\n${capText(a, 500).text}${capText(b, 500).text}`);
    expect(capped.dropped).toBe(5000 - 500 + 3000 - 500);
  });

  test("too many entries for a useful share: the joined text is cut", () => {
    const entries = Array.from({ length: 100 }, (_, i) => `  File "f.py", line ${i}\n`);
    expect(capEntries(entries, 300)).toEqual(capText(entries.join(""), 300));
  });
});

import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AwreplError } from "../core/errors.ts";
import { decodeCell, type InputStreams, readCell } from "./input.ts";

function stdin(text: string | Uint8Array, tty = false): InputStreams & { reads: number } {
  const io = {
    reads: 0,
    stdinIsTTY: () => tty,
    readStdin: async () => {
      io.reads++;
      return typeof text === "string" ? new TextEncoder().encode(text) : text;
    },
  };
  return io;
}

async function usageErrorOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AwreplError);
    expect((err as AwreplError).exitCode).toBe(2);
    return (err as Error).message;
  }
  throw new Error("expected a usage error");
}

describe("readCell", () => {
  test("CODE is the cell; stdin is not read", async () => {
    const io = stdin("ignored");
    expect(await readCell({ code: "1 + 1" }, io)).toBe("1 + 1");
    expect(io.reads).toBe(0);
  });

  test("- and -f - read stdin, also when stdin is a terminal", async () => {
    expect(await readCell({ code: "-" }, stdin("print(1)\n", true))).toBe("print(1)\n");
    expect(await readCell({ file: "-" }, stdin("x = 2\n", true))).toBe("x = 2\n");
  });

  test("no CODE reads a piped stdin, and refuses to wait on a terminal", async () => {
    expect(await readCell({}, stdin("piped\n"))).toBe("piped\n");
    expect(await usageErrorOf(readCell({}, stdin("", true)))).toContain("No code given");
  });

  test("-f FILE reads the file; a missing file or a directory is a clear usage error", async () => {
    const dir = mkdtempSync(join(tmpdir(), "awrepl-input-"));
    try {
      writeFileSync(join(dir, "cell.py"), "\ufeffprint('bom dropped')\n");
      expect(await readCell({ file: join(dir, "cell.py") })).toBe("print('bom dropped')\n");
      expect(await usageErrorOf(readCell({ file: join(dir, "nope.py") }))).toBe(`Cannot read cell file ${JSON.stringify(join(dir, "nope.py"))}: no such file`);
      expect(await usageErrorOf(readCell({ file: dir }))).toContain("it is a directory");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("CODE and -f together are refused", async () => {
    expect(await usageErrorOf(readCell({ code: "1", file: "x.py" }, stdin("")))).toContain("not both");
  });

  test("invalid UTF-8 is refused, not altered", async () => {
    expect(await usageErrorOf(readCell({ code: "-" }, stdin(new Uint8Array([0x78, 0x3d, 0xff, 0x0a]))))).toBe("The cell from stdin is not valid UTF-8");
    expect(decodeCell(new TextEncoder().encode("s = 'é€😀'"), "x")).toBe("s = 'é€😀'");
  });
});

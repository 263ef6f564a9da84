// writeStream() in a real process: the order of stdout and stderr when both are one file, everything
// delivered before process.exit() however slow the reader, and a reader that goes away is no crash.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const dir = mkdtempSync(join(tmpdir(), "awrepl-stdio-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const STDIO = join(import.meta.dir, "stdio.ts");

/** Runs `body` (which may use writeStream and drainStdio) in a Bun process, as main.ts ends it. */
function script(name: string, body: string): string {
  const path = join(dir, `${name}.ts`);
  writeFileSync(path, `import { drainStdio, stdoutWasLost, writeStream } from ${JSON.stringify(STDIO)};\n${body}\nawait drainStdio();\nprocess.exit(stdoutWasLost() ? 125 : 0);\n`);
  return path;
}

function sh(command: string, args: string[]): { code: number | null; stderr: string } {
  const r = Bun.spawnSync(["/bin/sh", "-c", command, "sh", ...args], { stdout: "pipe", stderr: "pipe", timeout: 60_000 });
  return { code: r.exitCode, stderr: r.stderr.toString() };
}

describe("writeStream", () => {
  test("stdout and stderr redirected to one file keep the order they were written in", () => {
    const path = script("order", 'for (let i = 0; i < 2000; i++) void writeStream(i % 2 ? "stderr" : "stdout", `${i}\\n`);');
    const out = join(dir, "order.log");
    expect(sh(`"${process.execPath}" "$1" >"$2" 2>&1`, [path, out]).code).toBe(0);
    const lines = readFileSync(out, "utf8").trimEnd().split("\n").map(Number);
    expect(lines).toEqual(Array.from({ length: 2000 }, (_, i) => i));
  });

  test("everything written reaches a slow reader before the process exits", () => {
    const path = script("slow", 'void writeStream("stdout", "x".repeat(3_000_000)); void writeStream("stdout", "END\\n");');
    const out = join(dir, "slow.out");
    expect(sh(`"${process.execPath}" "$1" | (sleep 0.3; cat >"$2")`, [path, out]).code).toBe(0);
    const text = readFileSync(out, "utf8");
    expect(text.length).toBe(3_000_004);
    expect(text.endsWith("xEND\n")).toBe(true);
  });

  test("a reader that goes away (| head -1) ends the output quietly, with the command's status", () => {
    const path = script("epipe", 'for (let i = 0; i < 20000; i++) await writeStream("stdout", `${i} ${"y".repeat(100)}\\n`);\nvoid writeStream("stderr", "still here\\n");');
    const r = sh(`("${process.execPath}" "$1"; echo "status $?" >&2) | head -1 >/dev/null`, [path]);
    expect(r.stderr).toBe("still here\nstatus 0\n");
  });
});

import { expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { PipeWriter } from "./pipe_writer.ts";

test("big and small writes, some fast and some queued behind a partial write, come out whole and in order", async () => {
  // cat echoes stdin: what comes back is exactly what the pipe got, in the order it got it.
  const cat = spawn("cat", [], { stdio: ["pipe", "pipe", "ignore"] });
  try {
    const received: Buffer[] = [];
    cat.stdout.on("data", (chunk: Buffer) => received.push(chunk));
    const ended = new Promise<void>((resolve) => cat.stdout.on("end", () => resolve()));
    const writer = new PipeWriter(cat.stdin);
    const expected: string[] = [];
    const send = (text: string) => {
      expected.push(text);
      writer.write(text);
    };
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 200; i++) send(`line ${round}.${i}\n`);
      send(`${String(round).repeat(3_000_000)}\n`); // more than the pipe holds: a partial write
      for (let i = 0; i < 200; i++) send(`after ${round}.${i}\n`); // must wait behind the rest
      await new Promise((r) => setTimeout(r, 20));
    }
    writer.end();
    await Promise.race([ended, new Promise((_, reject) => setTimeout(() => reject(new Error("cat did not finish")), 20_000))]);
    const got = Buffer.concat(received).toString();
    expect(got.length).toBe(expected.join("").length);
    expect(got === expected.join("")).toBe(true);
  } finally {
    cat.kill();
  }
});

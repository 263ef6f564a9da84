import { expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { deadline } from "../core/deadline.ts";
import { processAlive } from "../core/process.ts";
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
    expect(writer.ended).toBe(false);
    writer.end();
    expect(writer.ended).toBe(true);
    await deadline(ended, 20_000, "cat's end of output");
    const got = Buffer.concat(received).toString();
    expect(got.length).toBe(expected.join("").length);
    expect(got === expected.join("")).toBe(true);
  } finally {
    cat.kill();
  }
});

test("write() says false once the reader is gone: EPIPE before the exit is seen, a closed stream after", async () => {
  const reader = spawn("sleep", ["60"], { stdio: ["pipe", "ignore", "ignore"] });
  try {
    const writer = new PipeWriter(reader.stdin);
    expect(writer.write("read or not, it is in the pipe\n")).toBe(true);
    const exited = new Promise((resolve) => reader.once("exit", resolve));
    reader.kill("SIGKILL");
    // No turn of the event loop until it is gone: the stream cannot know yet, only the write can.
    const giveUpAt = performance.now() + 5000;
    while (processAlive(reader.pid ?? 0)) if (performance.now() > giveUpAt) throw new Error("sleep did not die within 5 s");
    expect(reader.stdin.destroyed).toBe(false);
    expect(writer.write("nobody reads this\n")).toBe(false);
    await deadline(exited, 10_000, "sleep's exit event");
    expect(writer.write("nor this\n")).toBe(false);
  } finally {
    reader.kill("SIGKILL");
  }
});

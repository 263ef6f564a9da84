// A raw conversation on the supervisor's socket, line by line, as a client of any version would hold
// it: for the end-to-end tests of the supervisor protocol (tests/e2e/supervisor*.test.ts).
import { connect } from "node:net";

export async function waitUntil(what: string, cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting until ${what}`);
    await Bun.sleep(20);
  }
}

export type Conversation = {
  send(message: unknown): void;
  /** The next reply line, parsed (within `timeoutMs`). */
  next(timeoutMs?: number): Promise<Record<string, unknown>>;
  /** The next reply with this id and a final event (`result`, `ok` or `error`), skipping the rest. */
  final(id: unknown, timeoutMs?: number): Promise<Record<string, unknown>>;
  close(): void;
};

/** Connects to the socket at `path`. */
export async function converse(path: string): Promise<Conversation> {
  const socket = connect(path);
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve);
    socket.once("error", reject);
  });
  let buffered = "";
  const lines: string[] = [];
  socket.on("data", (d) => {
    buffered += d.toString();
    for (let nl = buffered.indexOf("\n"); nl >= 0; nl = buffered.indexOf("\n")) {
      lines.push(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
  });
  socket.on("error", () => {});
  const next = async (timeoutMs = 10_000): Promise<Record<string, unknown>> => {
    await waitUntil("the supervisor replies", () => lines.length > 0, timeoutMs);
    return JSON.parse(lines.shift() as string) as Record<string, unknown>;
  };
  return {
    send(message: unknown): void {
      socket.write(`${JSON.stringify(message)}\n`);
    },
    next,
    async final(id: unknown, timeoutMs = 30_000): Promise<Record<string, unknown>> {
      const giveUpAt = Date.now() + timeoutMs;
      for (;;) {
        const reply = await next(Math.max(1, giveUpAt - Date.now()));
        if (reply.id === id && (reply.event === "result" || reply.event === "ok" || reply.event === "error")) return reply;
      }
    },
    close(): void {
      socket.destroy();
    },
  };
}

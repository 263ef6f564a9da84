// End to end: how `awrepl mcp` reads its stdin, over raw pipes (the SDK's client writes none of the
// malformed lines tested here; it drives the oversized call). A frame larger than the SDK's 10 MiB read buffer (a big cell) is served; one over the
// limit (64 MiB, the supervisor's own) is discarded as it streams and answered with a JSON-RPC error
// carrying its id; stdin EOF, even in the middle of such a frame, ends the process. A line that is not
// JSON, not UTF-8, a batch, or an invalid request is answered as JSON-RPC 2.0 says, and serving goes on.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { alive, cleanupHome, COMMAND_TIMEOUT_MS, makeHome, waitFor } from "../harness/mod.ts";
import { exec, type RawServer, rawServer, run, within, withMcp } from "./mcp_client.ts";

/** Every test here ends its server within this long after stdin EOF. */
const EXIT_MS = 5_000;
const MiB = 1024 * 1024;
/** The frame limit the server enforces (the supervisor's MAX_REQUEST_BYTES). */
const LIMIT = 64 * MiB;

/** A `tools/call run` frame as the SDK's client writes it (method and params first, the id last), without its newline; `code` is JSON string content. */
function runFrame(id: number | string, code: Buffer): Buffer {
  return Buffer.concat([Buffer.from('{"method":"tools/call","params":{"name":"run","arguments":{"code":"'), code, Buffer.from(`"}},"jsonrpc":"2.0","id":${JSON.stringify(id)}}`)]);
}

/** Writes `data` to the server's stdin and resolves once the pipe took it (a big frame takes a while). */
function write(s: RawServer, data: string | Uint8Array): Promise<void> {
  return within(new Promise<void>((resolve, reject) => s.child.stdin!.write(data, (e) => (e ? reject(e) : resolve()))), COMMAND_TIMEOUT_MS, "the write to the server's stdin");
}

/** Writes one line and returns the one stdout line it brings. */
async function answer(s: RawServer, line: string | Uint8Array): Promise<any> {
  const n = s.lines.length;
  await write(s, typeof line === "string" ? `${line}\n` : Buffer.concat([line, Buffer.from("\n")]));
  await waitFor(() => s.lines.length > n, COMMAND_TIMEOUT_MS, `an answer to ${JSON.stringify(String(line).slice(0, 60))}`);
  return JSON.parse(s.lines[n]!);
}

/** CPU time (user + system) the process has used, in clock ticks. Linux. */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(f[11]) + Number(f[12]);
}

/** The server answers a ping: it is still serving. */
async function pings(s: RawServer): Promise<void> {
  expect(await s.request("ping", {})).toMatchObject({ result: {} });
}

/** stdin EOF, then the process exits with status 0 within EXIT_MS. */
async function endsAtEof(s: RawServer): Promise<void> {
  s.child.stdin!.end();
  expect(await within(s.exited, EXIT_MS, "exit after stdin EOF")).toBe(0);
}

describe("awrepl mcp's stdin framing", () => {
  let home: string;
  const servers: RawServer[] = [];
  const start = async (session: string) => {
    const s = await rawServer(home, ["--session", session]);
    servers.push(s);
    s.child.stdin!.on("error", () => {}); // a write cut short by the server's exit: the test says what failed
    await s.init();
    return s;
  };
  beforeAll(() => {
    home = makeHome();
  });
  afterAll(async () => {
    for (const s of servers) if (s.child.exitCode === null && s.child.pid !== undefined && alive(s.child.pid)) s.child.kill("SIGKILL");
    await cleanupHome(home);
  });

  test("a cell of 11 MiB (over the SDK's 10 MiB read buffer) runs; the server goes on and ends at EOF", async () => {
    const s = await start("big");
    const size = 11 * MiB;
    const reply = await answer(s, runFrame(2, Buffer.concat([Buffer.from("s = '"), Buffer.alloc(size, "a"), Buffer.from("'\\nlen(s)")])));
    expect(reply).toMatchObject({ jsonrpc: "2.0", id: 2 });
    expect(reply.result.structuredContent).toMatchObject({ status: "ok", value: String(size) });
    await pings(s);
    await endsAtEof(s);
  });

  test("a frame over 64 MiB is discarded as it streams: -32600 with its id, its size and the limit; the server goes on, idle, and ends at EOF", async () => {
    const s = await start("huge");
    const pid = s.child.pid!;
    const frame = runFrame("huge-1", Buffer.alloc(LIMIT + MiB, "a"));
    const reply = await answer(s, frame);
    expect(reply).toMatchObject({ jsonrpc: "2.0", id: "huge-1", error: { code: -32600 } });
    expect(reply.error.message).toContain(`${frame.length} bytes`);
    expect(reply.error.message).toContain(`${LIMIT} bytes`);
    await pings(s);
    // Idle means idle: no core spinning behind the discarded frame.
    const t0 = cpuTicks(pid);
    await new Promise((r) => setTimeout(r, 1000));
    expect(cpuTicks(pid) - t0).toBeLessThan(20); // 0.2 s of CPU in 1 s (100 ticks a second)
    await pings(s);
    await endsAtEof(s);
  }, 60_000);

  test("through the SDK's client: a call over the limit is refused at once (its id read from the frame's end), and the connection goes on", async () => {
    await withMcp(home, ["--session", "sdk"], async (c) => {
      const t0 = performance.now();
      const refused = run(c.client, "a".repeat(LIMIT + MiB));
      await expect(refused).rejects.toMatchObject({ code: -32600, message: expect.stringContaining(`over the limit of ${LIMIT} bytes`) });
      expect(performance.now() - t0).toBeLessThan(COMMAND_TIMEOUT_MS);
      expect(exec(await run(c.client, "6 * 7")).value).toBe("42");
    });
  }, 60_000);

  test("stdin EOF in the middle of a frame over the limit (being discarded) ends the process", async () => {
    const s = await start("cut");
    await write(s, runFrame(3, Buffer.alloc(LIMIT + 4 * MiB, "a")).subarray(0, LIMIT + 2 * MiB));
    await endsAtEof(s);
    expect(s.lines.length).toBe(1); // the initialize reply: a message cut short is not answered
  }, 60_000);

  test("malformed lines get JSON-RPC 2.0's errors (-32700, -32600, id null unless valid), and serving goes on after each", async () => {
    const s = await start("malformed");
    const beforeBadByte = '{"jsonrpc":"2.0","id":5,"method":"pi';
    const cases: [string | Uint8Array, string | number | null, number, RegExp][] = [
      ["hello", null, -32700, /Parse error: .*not valid JSON.*"hello"/],
      ['{"jsonrpc":"2.0","id":4,"method":"ping"', null, -32700, /Parse error: .*not valid JSON/],
      [Buffer.from([...Buffer.from(beforeBadByte), 0xff, ...Buffer.from('ng"}')]), null, -32700, new RegExp(`Parse error: .*not valid UTF-8 .*byte ${beforeBadByte.length}.*0xff`)],
      ['[{"jsonrpc":"2.0","id":6,"method":"ping"}]', null, -32600, /Invalid Request: .*batch.*not supported/],
      ["[]", null, -32600, /Invalid Request: .*batch/],
      ["42", null, -32600, /Invalid Request: .*a number/],
      ['{"jsonrpc":"2.0","id":{"n":7},"method":"ping"}', null, -32600, /Invalid Request: id must be a string or an integer, not an object/],
      ['{"jsonrpc":"2.0","id":null,"method":"ping"}', null, -32600, /Invalid Request: id must be a string or an integer, not null/],
      ['{"jsonrpc":"2.0","id":8.5,"method":"ping"}', null, -32600, /Invalid Request: id must be a string or an integer, not a number \(8.5\)/],
      ['{"jsonrpc":"2.0","id":9}', 9, -32600, /Invalid Request: no method/],
      ['{"jsonrpc":"2.0","id":"ten","method":10}', "ten", -32600, /Invalid Request: method must be a string, not a number/],
      ['{"jsonrpc":"1.0","id":11,"method":"ping"}', 11, -32600, /Invalid Request: jsonrpc must be "2.0", not "1.0"/],
      ['{"id":12,"method":"ping"}', 12, -32600, /Invalid Request: jsonrpc must be "2.0" \(it is missing\)/],
      ['{"jsonrpc":"2.0","id":13,"method":"ping","params":[1]}', 13, -32600, /Invalid Request: params must be an object, not an array/],
      ['{"jsonrpc":"2.0","method":"notifications/x","params":"p"}', null, -32600, /Invalid Request: params must be an object, not a string/],
    ];
    for (const [line, id, code, message] of cases) {
      const reply = await answer(s, line);
      expect(reply).toEqual({ jsonrpc: "2.0", id, error: { code, message: expect.stringMatching(message) } });
      await pings(s);
    }
    // A malformed response is not answered (answering a response could loop between two peers), nor is a
    // blank line: the next line out is the ping's answer.
    const n = s.lines.length;
    await write(s, '{"jsonrpc":"2.0","id":14,"result":"not an object"}\n\n  \r\n');
    await pings(s);
    expect(s.lines.length).toBe(n + 1);
    await endsAtEof(s);
  });
});

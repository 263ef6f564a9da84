// The statement splitter of piped `serve`, with a real worker's `is_complete` deciding: which lines make
// one statement, and when each is handed out.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ReplSession } from "../../session/session.ts";
import { PYTHON, tempHome } from "../../../tests/harness/mod.ts";
import { StatementSplitter } from "./piped.ts";
import { completeness } from "./run.ts";

let tmp: ReturnType<typeof tempHome>;
let session: ReplSession;

beforeAll(async () => {
  tmp = tempHome();
  session = await ReplSession.start("splitter", { python: PYTHON, home: tmp.home });
}, 30_000);

afterAll(async () => {
  await session.close();
  tmp.remove();
}, 30_000);

/** Pushes the lines one at a time; each entry is what the push of that line (or the flush) released. */
async function split(lines: string[]): Promise<string[][]> {
  const splitter = new StatementSplitter((code) => completeness(session, code));
  const released: string[][] = [];
  for (const line of lines) released.push(await splitter.push(line));
  const last = splitter.flush();
  released.push(last === null ? [] : [last]);
  return released;
}

describe("StatementSplitter", () => {
  test("a blank line inside a function waits for the next line: indented, it continues the function", async () => {
    expect(await split(["def f():", "    a = 1", "", "    return a + 1", "print(f())"])).toEqual([
      [],
      [],
      [],
      [],
      ["def f():\n    a = 1\n\n    return a + 1", "print(f())"],
      [],
    ]);
  });

  test("blank, whitespace-only and comment lines between a class's methods stay inside the class", async () => {
    const released = await split(["class A:", "    def f(self):", "        return 1", "    ", "# note", "", "    def g(self):", "        return 2", "x = A()"]);
    expect(released.flat()).toEqual(["class A:\n    def f(self):\n        return 1\n\n# note\n\n    def g(self):\n        return 2", "x = A()"]);
    // Nothing was released before the column-0 line that ends the class.
    expect(released.slice(0, 8).flat()).toEqual([]);
  });

  test("else at column 0 after a blank line continues the if; a blank-ended block runs at end of input", async () => {
    const released = await split(["if x:", "    y = 1", "", "else:", "    y = 2", "", "# end"]);
    expect(released.slice(0, 7).flat()).toEqual([]);
    expect(released[7]).toEqual(["if x:\n    y = 1\n\nelse:\n    y = 2"]);
  });

  test("a simple statement is released at its own line; an open bracket spans blank and column-0 lines", async () => {
    expect(await split(["x = 1", "data = [", "", "1,", "]"])).toEqual([["x = 1"], [], [], [], ["data = [\n\n1,\n]"], []]);
  });
});

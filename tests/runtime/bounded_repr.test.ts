// `variables` and `inspect` show short reprs that are cut before they are formatted: a 256 MiB
// bytearray is never turned into its 1 GiB repr (which runs in C, past the per-value time budget,
// and then was cut), a long list or dict is never walked whole, numpy and pandas are asked for their
// own bounded forms whatever display options the cell set. Memory is measured where it is spent: the
// worker's peak RSS (VmHWM, reset through /proc/PID/clear_refs) beside the payload's size.
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { closeAll, PYTHON, pythonHas, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

const MIB = 1024 * 1024;
const PAYLOAD = 256 * MIB;

function statusKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/** The worker's peak RSS while `fn` runs, above its RSS before (bytes); the peak is reset first. */
async function peakGrowth(pid: number, fn: () => Promise<unknown>): Promise<{ growth: number; rss: number }> {
  const rss = statusKb(pid, "VmRSS");
  writeFileSync(`/proc/${pid}/clear_refs`, "5"); // resets VmHWM to the current RSS (Linux 4.0+)
  await fn();
  return { growth: statusKb(pid, "VmHWM") - rss, rss };
}

function needs(module: string) {
  const has = pythonHas(module);
  return (name: string, fn: () => Promise<void>, timeoutMs?: number) => test.skipIf(!has)(has ? name : `${name} [skipped: ${PYTHON} cannot import ${module}]`, fn, timeoutMs);
}

/** The listing in its `type: short repr` form (the one these tests are about); `form: "line"` for the default. */
async function vars(rt: Runtime, timeoutMs = 30_000, form: "repr" | "line" = "repr"): Promise<Record<string, string>> {
  const v = await rt.request({ type: "variables", form }, timeoutMs);
  expect(v.done.status).toBe("ok");
  return v.done.variables as Record<string, string>;
}

async function inspectRepr(rt: Runtime, name: string, timeoutMs = 30_000): Promise<Record<string, unknown>> {
  const i = await rt.request({ type: "inspect", name }, timeoutMs);
  expect(i.done.status).toBe("ok");
  return i.done.info as Record<string, unknown>;
}

describe("short reprs slice before they format", () => {
  for (const kind of ["bytearray", "bytes"] as const) {
    test(`a 256 MiB ${kind}: variables and inspect answer, and the worker's peak RSS grows far less than the payload`, async () => {
      const rt = await Runtime.start();
      // Varied bytes (escapes in the repr), every page touched: the payload is resident before the listing.
      const made = await rt.exec(`big = ${kind}(bytes(range(256)) * (${PAYLOAD} // 256))\nlen(big)`, 60_000);
      expect(made.result).toBe(String(PAYLOAD));
      let listed: Record<string, string> = {};
      const v = await peakGrowth(rt.pid, async () => (listed = await vars(rt)));
      let info: Record<string, unknown> = {};
      const i = await peakGrowth(rt.pid, async () => (info = await inspectRepr(rt, "big")));
      console.log(`${kind} of ${PAYLOAD / MIB} MiB: worker RSS ${(v.rss / MIB).toFixed(0)} MiB; peak growth: variables ${(v.growth / MIB).toFixed(1)} MiB, inspect ${(i.growth / MIB).toFixed(1)} MiB`);
      expect(v.growth).toBeLessThan(PAYLOAD * 0.5);
      expect(i.growth).toBeLessThan(PAYLOAD * 0.5);
      const open = kind === "bytes" ? "b'" : "bytearray(b'";
      expect(listed.big).toStartWith(`${kind}: ${open}\\x00\\x01\\x02`);
      expect(listed.big).toContain("...");
      expect(listed.big!.length).toBeLessThanOrEqual(kind.length + 2 + 120);
      const repr = info.repr as string;
      expect(repr).toStartWith(`${open}\\x00\\x01`);
      expect(repr.length).toBeLessThanOrEqual(2000);
      expect(repr).toEndWith(kind === "bytes" ? "\\xfd\\xfe\\xff'" : "\\xfd\\xfe\\xff')"); // head and tail, as reprlib cuts a str
      expect(info.len).toBe(PAYLOAD);
    }, 120_000);
  }

  test("a 256 MiB str, a 32M-item list and a 4M-key dict: bounded, fast enough for the budget, in their own order", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      `s = 'ab\\n' * (${PAYLOAD} // 3)\nitems = list(range(32 * 1024 * 1024))\nd = {i: -i for i in range(4 * 1024 * 1024, 0, -1)}\n` +
        "nested = [[[[[[[[1]]]]]]]]\nwide = [[list(range(100))] * 100] * 100\n0",
      120_000,
    );
    let listed: Record<string, string> = {};
    const v = await peakGrowth(rt.pid, async () => (listed = await vars(rt)));
    console.log(`str/list/dict listing: worker RSS ${(v.rss / MIB).toFixed(0)} MiB; peak growth ${(v.growth / MIB).toFixed(1)} MiB`);
    // Sorting the dict's 4M keys alone (reprlib) costs 32 MiB of list, its full repr far more.
    expect(v.growth).toBeLessThan(16 * MIB);
    expect(listed.s).toStartWith("str: 'ab\\nab\\n");
    expect(listed.s).toContain("...");
    expect(listed.items).toBe("list: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...]");
    // Insertion order, as the builtin repr shows it (reprlib sorted every key first).
    expect(listed.d).toStartWith("dict: {4194304: -4194304, 4194303: -4194303, ");
    expect(listed.d).toEndWith(", ...}");
    expect(listed.nested).toBe("list: [[[[[[[...]]]]]]]"); // six levels shown, as reprlib did
    for (const name of ["s", "items", "d", "wide"]) expect(listed[name]!.length).toBeLessThanOrEqual(6 + 120);
    // The default form (one line saying what each is) samples as little: its length and first items.
    let lines: Record<string, string> = {};
    const l = await peakGrowth(rt.pid, async () => (lines = await vars(rt, 30_000, "line")));
    expect(l.growth).toBeLessThan(16 * MIB);
    expect(lines.items).toBe(`list[int] len ${32 * 1024 * 1024}: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...]`);
    expect(lines.d).toStartWith(`dict[int, int] len ${4 * 1024 * 1024}: {4194304: -4194304, `);
    expect(lines.s).toStartWith(`str len ${3 * Math.floor(PAYLOAD / 3)}: 'ab\\nab`);
    for (const name of ["s", "items", "d", "wide"]) expect(lines[name]!.length).toBeLessThanOrEqual(120);
    const wide = (await inspectRepr(rt, "wide")).repr as string;
    expect(wide.length).toBeLessThanOrEqual(2000);
    expect(wide).toStartWith("[[[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...], [0, 1, ");
  }, 180_000);

  test("other builtin containers keep their repr's shape; subclasses with their own __repr__ keep it", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      "import collections, array\n" +
        "t1, t0, e, fs = (1,), (), set(), frozenset(range(3))\n" +
        "dq = collections.deque(range(100), maxlen=200)\n" +
        "dd = collections.defaultdict(list, {'a': [1]})\n" +
        "ar = array.array('i', range(100))\n" +
        "keys = dict.fromkeys(range(100)).keys()\n" +
        "class L(list):\n    pass\nclass R(list):\n    def __repr__(self):\n        return 'R!'\n" +
        "l, r = L(range(20)), R([1])\n" +
        "neg = -(10 ** 100000)\nsmall = 10 ** 30\nflag = True\nmv = memoryview(b'x' * 1000)",
    );
    const listed = await vars(rt);
    expect(listed.t1).toBe("tuple: (1,)");
    expect(listed.t0).toBe("tuple: ()");
    expect(listed.e).toBe("set: set()");
    expect(listed.fs).toBe("frozenset: frozenset({0, 1, 2})");
    expect(listed.dq).toBe("collections.deque: deque([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...], maxlen=200)");
    expect(listed.dd).toBe("collections.defaultdict: defaultdict(<class 'list'>, {'a': [1]})");
    expect(listed.ar).toBe("array.array: array('i', [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...])");
    expect(listed.keys).toBe("dict_keys: dict_keys([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...])");
    expect(listed.l).toBe("L: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...]");
    expect(listed.r).toBe("R: R!");
    // A huge int is never converted (quadratic before 3.11, refused past 4300 digits after): its size is said.
    expect(listed.neg).toBe("int: <int of 332193 bits, about 100001 decimal digits>");
    expect(listed.small).toBe(`int: ${10n ** 30n}`);
    expect(listed.flag).toBe("bool: True");
    expect(listed.mv).toStartWith("memoryview: <memory at 0x");
  });

  test("inspect's keys and docstring are cut before they are shipped", async () => {
    const rt = await Runtime.start();
    await rt.exec(`m = {('k' * ${64 * MIB}): 1}\nclass D:\n    pass\nD.__doc__ = 'doc ' * ${16 * MIB}\nobj = D()`, 60_000);
    const m = await inspectRepr(rt, "m");
    expect((m.keys as string[])[0]!.length).toBeLessThanOrEqual(200);
    expect((m.repr as string).length).toBeLessThanOrEqual(2000);
    const d = await inspectRepr(rt, "obj");
    expect((d.docstring as string).length).toBeLessThanOrEqual(2000);
  }, 60_000);

  needs("numpy")("numpy: its own summarised repr, whatever threshold the cell set", async () => {
    const rt = await Runtime.start();
    await rt.exec("import numpy as np, sys\nnp.set_printoptions(threshold=sys.maxsize)\na = np.arange(20_000_000)\ngrid = np.zeros((3000, 3000))\nboxed = [a]", 60_000);
    const listed = await vars(rt);
    expect(listed.a).toStartWith("numpy.ndarray: array([       0,        1,        2, ...");
    expect(listed.a).not.toContain("timed out");
    expect(listed.grid).toStartWith("numpy.ndarray: array([[0., 0., 0., ..., 0., 0., 0.],");
    expect(listed.boxed).toStartWith("list: [array([       0,        1,        2, ...");
    const info = await inspectRepr(rt, "a");
    expect(info.repr as string).toEndWith("19999997, 19999998, 19999999])");
    expect(info.shape).toBe("(20000000,)");
    // The cell's own options are left as it set them.
    expect((await rt.exec("np.get_printoptions()['threshold'] == sys.maxsize")).result).toBe("True");
  }, 60_000);

  needs("pandas")("pandas: its own bounded to_string, whatever display options the cell set", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      "import pandas as pd\npd.set_option('display.max_rows', None)\npd.set_option('display.max_columns', None)\n" +
        "df = pd.DataFrame({'c%d' % i: range(200_000) for i in range(40)})\nser = df['c0']",
      60_000,
    );
    const listed = await vars(rt);
    expect(listed.df).toStartWith("pandas.core.frame.DataFrame:");
    expect(listed.df).not.toContain("timed out");
    const df = (await inspectRepr(rt, "df")).repr as string;
    expect(df).toContain("...");
    expect(df).toContain("[200000 rows x 40 columns]");
    expect(df.split("\n").length).toBeLessThan(20);
    const ser = (await inspectRepr(rt, "ser")).repr as string;
    expect(ser).toContain("199999    199999");
    expect(ser).toContain("Name: c0, Length: 200000, dtype: int64");
    expect(ser.split("\n").length).toBeLessThan(20);
    expect((await rt.exec("pd.get_option('display.max_rows') is None")).result).toBe("True");
  }, 60_000);
});

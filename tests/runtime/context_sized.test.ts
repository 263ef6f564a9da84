// `variables` and `inspect` answers sized for an agent's context window: one line per variable that
// says what it is, and an inspect answer with the facts that size a value first, one docstring (its
// first paragraph unless asked for all) and a short public dir.
import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, PYTHON, pythonHas, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

function needs(module: string) {
  const has = pythonHas(module);
  return (name: string, fn: () => Promise<void>, timeoutMs?: number) => test.skipIf(!has)(has ? name : `${name} [skipped: ${PYTHON} cannot import ${module}]`, fn, timeoutMs);
}

async function listing(rt: Runtime, form?: string): Promise<Record<string, string>> {
  const v = await rt.request(form === undefined ? { type: "variables" } : { type: "variables", form });
  expect(v.done.status).toBe("ok");
  return v.done.variables as Record<string, string>;
}

async function inspect(rt: Runtime, name: string, full?: boolean): Promise<Record<string, unknown>> {
  const i = await rt.request(full === undefined ? { type: "inspect", name } : { type: "inspect", name, full });
  expect(i.done.status).toBe("ok");
  return i.done.info as Record<string, unknown>;
}

const DOCUMENTED = "def greet(who, punct='!'):\n    '''Say hello to someone.\n\n    A second paragraph that only a full answer shows.\n    '''\n    return who\n";

describe("variables: one line per name", () => {
  test("containers say their element types and length, then as much of their repr as fits", async () => {
    const rt = await Runtime.start();
    await rt.exec(
      DOCUMENTED +
        "xs = [1, 2, 3]\nd = {'a': 1, 'b': 2}\nmixed = (1, 'a', None)\nempty = []\nn = 5\nf = 1.5\nname = 'Alice'\n" +
        "long_text = 'x' * 5000\nclass Point:\n    def __repr__(self):\n        return 'Point(\\n    x=1,\\n    y=2)'\np = Point()\nimport json",
    );
    const v = await listing(rt);
    expect(v.xs).toBe("list[int] len 3: [1, 2, 3]");
    expect(v.d).toBe("dict[str, int] len 2: {'a': 1, 'b': 2}");
    expect(v.mixed).toBe("tuple[int | str | NoneType] len 3: (1, 'a', None)");
    expect(v.empty).toBe("list len 0: []");
    expect(v.n).toBe("int: 5");
    expect(v.f).toBe("float: 1.5");
    expect(v.name).toBe("str: 'Alice'");
    expect(v.long_text).toStartWith("str len 5000: 'xxx");
    expect(v.greet).toBe("function greet(who, punct='!')");
    expect(v.Point).toBe("class Point");
    expect(v.p).toBe("Point: Point( x=1, y=2)"); // a multi-line repr on one line
    expect(v.json).toBe("module json");
    for (const line of Object.values(v)) {
      expect(line.length).toBeLessThanOrEqual(120);
      expect(line).not.toContain("\n");
    }
  });

  test("a value whose facts raise (a shape property that fails) gets the `type: short repr` line; the rest are listed", async () => {
    const rt = await Runtime.start();
    await rt.exec("class Odd:\n    shape = property(lambda s: 1/0)\n    dtype = 'f4'\n    def __repr__(self):\n        return 'Odd()'\nodd = Odd()\nok = 1");
    const v = await listing(rt);
    expect(v.odd).toBe("Odd: Odd()");
    expect(v.ok).toBe("int: 1");
    const info = await inspect(rt, "odd");
    expect(info.shape).toBeUndefined();
    expect(info.repr).toBe("Odd()");
  });

  test('form "repr" gives the `type: short repr` listing; another form is refused, naming it', async () => {
    const rt = await Runtime.start();
    await rt.exec("xs = [1, 2, 3]");
    expect((await listing(rt, "repr")).xs).toBe("list: [1, 2, 3]");
    const bad = await rt.request({ type: "variables", form: "pretty" });
    expect(bad.done.status).toBe("error");
    expect(bad.done.reason).toContain("'pretty'");
  });

  needs("numpy")("an ndarray: its dtype and shape", async () => {
    const rt = await Runtime.start();
    await rt.exec("import numpy as np\narr = np.zeros((3, 4))\nscalar = np.float64(2.5)");
    const v = await listing(rt);
    expect(v.arr).toBe("ndarray float64 (3, 4)");
    expect(v.scalar).toBe("numpy.float64: 2.5"); // a 0-d value is shown as the scalar it is
  }, 60_000);

  needs("pandas")("a DataFrame: its shape and columns with their dtypes, never its table", async () => {
    const rt = await Runtime.start();
    await rt.exec("import pandas as pd\ndf = pd.DataFrame({'a': [0.5] * 7, 'b': list('abcdefg')})\nwide = pd.DataFrame({'column_%d' % i: [i] for i in range(50)})");
    const v = await listing(rt);
    expect(v.df).toBe("DataFrame 7×2 [a: float64, b: object]");
    expect(v.wide).toStartWith("DataFrame 1×50 [column_0: int64, column_1: int64, ");
    expect(v.wide).toEndWith("...]");
    expect(v.wide!.length).toBeLessThanOrEqual(120);
  }, 60_000);
});

describe("inspect: sized for a context window", () => {
  test("one docstring, its first paragraph; `more` says what was left out; full gives it all", async () => {
    const rt = await Runtime.start();
    await rt.exec(DOCUMENTED);
    const short = await inspect(rt, "greet");
    expect(short.docstring).toBe("Say hello to someone.");
    expect(short.doc).toBeUndefined();
    expect(short.signature).toBe("(who, punct='!')");
    expect((short.more as Record<string, number>).docstring).toBeGreaterThan(40);
    expect(short.dir).toEqual([]); // a function's own names are all private
    const full = await inspect(rt, "greet", true);
    expect(full.docstring).toContain("A second paragraph that only a full answer shows.");
    expect(full.dir).toContain("__call__");
    expect(full.more).toBeUndefined();
    const bad = await rt.request({ type: "inspect", name: "greet", full: "yes" });
    expect(bad.done.status).toBe("error");
    expect(bad.done.reason).toContain("'yes'");
  });

  test("a container: its len and element types first; dir without private names and at most 40", async () => {
    const rt = await Runtime.start();
    await rt.exec("import json\nxs = [1, 2, 3]");
    const xs = await inspect(rt, "xs");
    expect(Object.keys(xs).slice(0, 5)).toEqual(["name", "type", "len", "elements", "summary"]);
    expect(xs.elements).toBe("int");
    expect(xs.summary).toBe("list[int] len 3: [1, 2, 3]");
    expect((xs.dir as string[]).every((n) => !n.startsWith("_"))).toBe(true);
    const mod = await inspect(rt, "json");
    expect((mod.dir as string[]).length).toBeLessThanOrEqual(40);
    expect((mod.dir as string[]).some((n) => n.startsWith("_"))).toBe(false);
  });

  needs("numpy")("an ndarray: shape and dtype as numpy spells them", async () => {
    const rt = await Runtime.start();
    await rt.exec("import numpy as np\narr = np.zeros((3, 4))");
    const info = await inspect(rt, "arr");
    expect(info.shape).toBe("(3, 4)");
    expect(info.dtype).toBe("float64");
    expect(Object.keys(info).indexOf("shape")).toBeLessThan(Object.keys(info).indexOf("repr"));
  }, 60_000);

  needs("pandas")("a DataFrame: shape, columns, dtypes first, and the whole answer stays small", async () => {
    const rt = await Runtime.start();
    await rt.exec("import pandas as pd\ndf = pd.DataFrame({'a': [0.5] * 7, 'b': list('abcdefg')})");
    const i = await rt.request({ type: "inspect", name: "df" });
    const info = i.done.info as Record<string, unknown>;
    expect(Object.keys(info).slice(0, 5)).toEqual(["name", "type", "shape", "columns", "dtypes"]);
    expect(info.shape).toBe("(7, 2)");
    expect(info.columns).toEqual(["a", "b"]);
    expect(info.dtypes).toEqual({ a: "float64", b: "object" });
    expect(info.docstring).toBe("Two-dimensional, size-mutable, potentially heterogeneous tabular data.");
    expect(info.keys).toBeUndefined(); // the columns say it
    // Was 6.1 KB (the class docstring twice and 200 attribute names).
    expect(JSON.stringify(i.done).length).toBeLessThan(1500);
  }, 60_000);
});

// Rich display with the libraries a data cell uses: matplotlib inline (figures rendered by Agg, shipped,
// closed), IPython.display without an IPython shell, pandas tables. Each test needs its library in the
// interpreter under test (Debian's python3-matplotlib, python3-ipython, python3-pandas); the pyenv
// interpreters the suite also runs on have none, and there these tests say so and are skipped.
import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, type Event, PYTHON, pythonHas, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

/** `test`, or a skip that names the missing module when PYTHON cannot import it. */
function needs(module: string) {
  const has = pythonHas(module);
  return (name: string, fn: () => Promise<void>, timeoutMs?: number) => test.skipIf(!has)(has ? name : `${name} [skipped: ${PYTHON} cannot import ${module}]`, fn, timeoutMs);
}
const withMatplotlib = needs("matplotlib");
const withIPython = needs("IPython");
const withPandas = needs("pandas");

const displays = (events: Event[]) => events.filter((e) => e.event === "display");
const data = (e: Event | undefined) => (e?.data ?? {}) as Record<string, unknown>;

/** Width and height from a PNG's IHDR chunk; throws unless the bytes start with the PNG signature. */
function pngSize(base64: unknown): { width: number; height: number } {
  const png = Buffer.from(String(base64), "base64");
  if (!png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) throw new Error("not a PNG");
  if (png.subarray(12, 16).toString("latin1") !== "IHDR") throw new Error("no IHDR chunk first");
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

const PYPLOT = "import matplotlib.pyplot as plt";
/** The pixel size rcParams gives a new figure, as a Python expression. */
const RC_SIZE = "[round(v * plt.rcParams['figure.dpi']) for v in plt.rcParams['figure.figsize']]";

describe("matplotlib inline", () => {
  withMatplotlib("plt.show() ships exactly one PNG of the size rcParams says, and closes the figure", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`${PYPLOT}\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()\n(plt.get_fignums(), ${RC_SIZE})`, 60_000);
    expect(a.done.status).toBe("ok");
    const ds = displays(a.events);
    expect(ds).toHaveLength(1);
    expect(data(ds[0])["text/plain"]).toBe("<Figure size 640x480 with 1 Axes>");
    expect(pngSize(data(ds[0])["image/png"])).toEqual({ width: 640, height: 480 });
    expect(a.result).toBe("([], [640, 480])");
  });

  withMatplotlib("a figure left open at the end of the cell: exactly one PNG, then closed; rcParams size and DPI are honoured", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`${PYPLOT}\nplt.rcParams['figure.figsize'] = (3, 2)\nplt.rcParams['figure.dpi'] = 50\nfig, ax = plt.subplots()\n_ = ax.plot([1, 2])`, 60_000);
    const ds = displays(a.events);
    expect(ds).toHaveLength(1);
    expect(pngSize(data(ds[0])["image/png"])).toEqual({ width: 150, height: 100 });
    expect((await rt.exec("plt.get_fignums()")).result).toBe("[]");
    // Nothing open, nothing shown.
    expect(displays((await rt.exec("x = 1")).events)).toEqual([]);
  });

  withMatplotlib("a trailing figure is shown once, as the value's entry; so is one shown by fig.show() or display()", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`${PYPLOT}\nfig = plt.figure()\nfig.add_subplot().plot([1, 2])\nfig`, 60_000);
    expect(a.result).toBeNull(); // its image says what `<Figure size 640x480 with 1 Axes>` would
    expect((await rt.exec("_ is fig")).result).toBe("True");
    const ds = displays(a.events);
    expect(ds).toHaveLength(1);
    expect(ds[0]!.source).toBe("value");
    expect(Object.keys(data(ds[0]))).toEqual(["image/png"]);
    expect(pngSize(data(ds[0])["image/png"])).toEqual({ width: 640, height: 480 });
    for (const code of ["fig = plt.figure(); fig.show()", "fig = plt.figure(); display(fig); fig"]) {
      const b = await rt.exec(code);
      expect({ code, shown: displays(b.events).length }).toEqual({ code, shown: 1 });
    }
    // A figure made without pyplot (never "open") is shown when it is the value.
    const c = await rt.exec("from matplotlib.figure import Figure\nf = Figure(figsize=(2, 1), dpi=100)\nf");
    expect(pngSize(data(displays(c.events)[0])["image/png"])).toEqual({ width: 200, height: 100 });
  });

  withMatplotlib("a trailing Axes, or the lines plt.plot() returns, whose figure the cell showed: the image and no repr line", async () => {
    const rt = await Runtime.start();
    for (
      const code of [`${PYPLOT}\nplt.plot([1, 2, 3])`, "fig, ax = plt.subplots()\nax.plot([1, 2])\nax", "fig, axes = plt.subplots(1, 2)\naxes.tolist() if hasattr(axes, 'tolist') else list(axes)"]
    ) {
      const out = await rt.exec(code, 60_000);
      expect({ code, result: out.result, shown: displays(out.events).length }).toEqual({ code, result: null, shown: 1 });
    }
    // The Axes of a figure that was not shown (made without pyplot, never open) keeps its repr.
    const kept = await rt.exec("from matplotlib.figure import Figure\nFigure().add_subplot()", 60_000);
    expect(kept.result).toMatch(/^<Axes/);
    expect(displays(kept.events)).toEqual([]);
    expect((await rt.exec("[1, 2]")).result).toBe("[1, 2]");
  });

  withMatplotlib("figures in order: plt.show() mid-cell, then the ones still open at the end", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`${PYPLOT}\nplt.figure(figsize=(1, 1))\nplt.show()\nplt.figure(figsize=(2, 1))\nplt.figure(figsize=(3, 1))\nprint('end')`, 60_000);
    expect(displays(a.events).map((e) => pngSize(data(e)["image/png"]).width)).toEqual([100, 200, 300]);
  });

  withMatplotlib("figure_format svg renders SVG text", async () => {
    const rt = await Runtime.start();
    const a = await rt.request({ type: "execute", code: `${PYPLOT}\nplt.plot([1, 2])`, figure_format: "svg" }, 60_000);
    const d = data(displays(a.events)[0]);
    expect(Object.keys(d).sort()).toEqual(["image/svg+xml", "text/plain"]);
    expect(String(d["image/svg+xml"])).toContain("<svg");
  });

  withMatplotlib("1,000 figures in one cell: as many rendered as the entry limit, the rest counted and closed", async () => {
    const rt = await Runtime.start();
    const started = performance.now();
    const a = await rt.request(
      { type: "execute", code: `${PYPLOT}\nimport warnings\nwarnings.simplefilter('ignore')\nfor i in range(1000): plt.figure(figsize=(1, 1))`, max_display_entries: 100 },
      120_000,
    );
    const ms = performance.now() - started;
    expect(a.done.status).toBe("ok");
    expect(displays(a.events)).toHaveLength(100);
    expect(a.done.display_dropped).toBe(900);
    expect((await rt.exec("plt.get_fignums()")).result).toBe("[]");
    console.log(`1,000 figures, 100 rendered: ${Math.round(ms)} ms`);
  }, 150_000);

  withMatplotlib("the backend is awrepl's inline one, whatever MPLBACKEND and DISPLAY say; no GUI toolkit is loaded", async () => {
    const rt = await Runtime.start({ env: { MPLBACKEND: "TkAgg", DISPLAY: ":99" } });
    const a = await rt.exec(
      `${PYPLOT}\nimport matplotlib, sys\nplt.plot([1])\nplt.show()\n(matplotlib.get_backend(), sorted(m for m in sys.modules if m.split('.')[0] in ('tkinter', '_tkinter', 'PyQt5', 'PyQt6', 'PySide6', 'gi', 'wx')))`,
      60_000,
    );
    expect(a.result).toBe("('module://awrepl.inline', [])");
    expect(displays(a.events)).toHaveLength(1);
  });

  withMatplotlib("a cell that picks another backend keeps its figures: nothing is rendered or closed", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`import matplotlib\nmatplotlib.use('agg')\n${PYPLOT}\nplt.figure()\nplt.show()`, 60_000);
    expect(displays(a.events)).toEqual([]);
    expect((await rt.exec("len(plt.get_fignums())")).result).toBe("1");
  });

  withMatplotlib("a cell that raises still shows its open figures; a figure that fails to draw reports it and the cell succeeds", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`${PYPLOT}\nplt.plot([1])\n1 / 0`, 60_000);
    expect(a.error!.ename).toBe("ZeroDivisionError");
    expect(displays(a.events)).toHaveLength(1);
    const b = await rt.exec("fig = plt.figure()\nfig.text(0.5, 0.5, r'$\\notacommand{x}$')\n'after'");
    expect(b.done.status).toBe("ok");
    expect(b.result).toBe("'after'");
    const d = displays(b.events)[0]!;
    expect(String(d.error)).toStartWith("drawing the figure raised ValueError");
    expect(data(d)["text/plain"]).toBe("<Figure size 640x480 with 0 Axes>");
    expect(data(d)["image/png"]).toBeUndefined();
  });

  withMatplotlib("an interrupted cell renders nothing; its figures are shown by the next cell", async () => {
    const rt = await Runtime.start();
    await rt.exec(PYPLOT, 60_000);
    const id = rt.newId("int");
    rt.send({ type: "execute", id, code: "plt.figure()\nprint('made', flush=True)\nimport time\ntime.sleep(30)" });
    await rt.waitFor((e) => e.event === "stdout" && String(e.text).includes("made"));
    rt.send({ type: "interrupt", id });
    await rt.waitFor((e) => e.event === "done" && e.id === id);
    expect(rt.events.filter((e) => e.event === "display" && e.id === id)).toEqual([]);
    expect(displays((await rt.exec("None")).events)).toHaveLength(1);
  });
});

describe("IPython.display without an IPython shell", () => {
  withIPython("display(Markdown), HTML, Latex: their text forms; no InteractiveShell is started", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(
      "from IPython.display import display, Markdown, HTML, Latex\nimport IPython\ndisplay(Markdown('# hi'), HTML('<b>x</b>'))\ndisplay(Latex('$x$'))\nIPython.get_ipython() is None",
      60_000,
    );
    expect(a.result).toBe("True");
    const ds = displays(a.events).map(data);
    expect(ds.map((d) => d["text/markdown"] ?? d["text/html"] ?? d["text/latex"])).toEqual(["# hi", "<b>x</b>", "$x$"]);
    expect(ds.every((d) => typeof d["text/plain"] === "string")).toBe(true);
  });

  withIPython("Image(filename=...) ships the file's bytes as image/png", async () => {
    const rt = await Runtime.start();
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAYAAAC56t6BAAAAEklEQVR42mNk+M9Qz8DAwMAAAA4NAQD3X8ZyAAAAAElFTkSuQmCC";
    const a = await rt.exec(
      `import base64, tempfile, os\np = os.path.join(tempfile.mkdtemp(), 'dot.png')\nopen(p, 'wb').write(base64.b64decode('${png}'))\nimport IPython.display\nIPython.display.display(IPython.display.Image(filename=p))`,
      60_000,
    );
    const d = data(displays(a.events)[0]);
    expect(d["image/png"]).toBe(png);
    expect(pngSize(d["image/png"])).toEqual({ width: 2, height: 3 });
  });

  withIPython("publish_display_data ships its bundle; clear_output writes nothing; a trailing Markdown is the value's entry", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(
      "from IPython.display import publish_display_data, clear_output, Markdown\nclear_output()\npublish_display_data({'text/plain': 'pub', 'image/png': b'PNG'})\nMarkdown('**b**')",
      60_000,
    );
    expect(a.stdout).toBe("");
    expect(a.rawStdout).toBe("");
    const ds = displays(a.events);
    expect(data(ds[0])).toEqual({ "text/plain": "pub", "image/png": Buffer.from("PNG").toString("base64") });
    expect(ds[1]).toMatchObject({ source: "value", data: { "text/markdown": "**b**" } });
  });
});

describe("pandas", () => {
  withPandas("a trailing DataFrame: its text table is the value, its HTML the value's entry; display(df) has both", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2], 'b': [3, 4]})\ndf", 60_000);
    expect(a.result).toBe("   a  b\n0  1  3\n1  2  4");
    const ds = displays(a.events);
    expect(ds).toHaveLength(1);
    expect(ds[0]!.source).toBe("value");
    expect(Object.keys(data(ds[0]))).toEqual(["text/html"]);
    expect(String(data(ds[0])["text/html"])).toContain("<table");
    const b = await rt.exec("display(df)");
    expect(data(displays(b.events)[0])["text/plain"]).toBe("   a  b\n0  1  3\n1  2  4");
    // A Series has no HTML form: nothing but its value.
    expect(displays((await rt.exec("df['a']")).events)).toEqual([]);
  });
});

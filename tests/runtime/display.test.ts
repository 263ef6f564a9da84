// Jupyter's display protocol in runtime.py, with no library at all: display() in every cell, the
// _repr_*_ methods and _repr_mimebundle_, the trailing value's richer forms, repr methods that raise,
// and the per-cell entry limit the host sends.
import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, type Event, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

const displays = (events: Event[]) => events.filter((e) => e.event === "display");
const b64 = (text: string) => Buffer.from(text, "latin1").toString("base64");

const EVERY_REPR = `
class Every:
    def _repr_png_(self): return b"\\x89PNG-png"
    def _repr_jpeg_(self): return b"\\xff\\xd8-jpeg"
    def _repr_svg_(self): return "<svg/>"
    def _repr_html_(self): return "<b>html</b>"
    def _repr_markdown_(self): return "# markdown"
    def _repr_latex_(self): return "$x^2$"
    def _repr_json_(self): return {"a": [1, 2]}
    def _repr_pdf_(self): return b"%PDF-1.4"
    def __repr__(self): return "Every()"
`;

describe("display() and the repr methods", () => {
  test("display() is a builtin in every cell, also after reset, and awrepl.display is the same", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("display is __import__('awrepl').display, 'display' in dir(__import__('builtins'))");
    expect(a.result).toBe("(True, True)");
    await rt.request({ type: "reset" });
    const b = await rt.exec("display(1, 'two')");
    expect(displays(b.events).map((e) => e.data)).toEqual([{ "text/plain": "1" }, { "text/plain": "'two'" }]);
    expect(b.result).toBeNull(); // display() returns None
  });

  test("each _repr_*_ method gives its MIME type; bytes travel as base64; text/plain is the repr", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`${EVERY_REPR}\ndisplay(Every())`);
    expect(a.done.status).toBe("ok");
    const [d] = displays(a.events);
    expect(d!.data).toEqual({
      "image/png": b64("\x89PNG-png"),
      "image/jpeg": b64("\xff\xd8-jpeg"),
      "image/svg+xml": "<svg/>",
      "text/html": "<b>html</b>",
      "text/markdown": "# markdown",
      "text/latex": "$x^2$",
      "application/json": { a: [1, 2] },
      "application/pdf": b64("%PDF-1.4"),
      "text/plain": "Every()",
    });
    expect(d!.source).toBeUndefined();
    expect(d!.id).toBe(a.done.id);
  });

  test("a repr method returning (data, metadata) or None; a class and a claim-everything object are not asked", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`
class T:
    def _repr_html_(self): return ("<i>t</i>", {"isolated": True})
    def _repr_markdown_(self): return None
class Anything:
    def __getattr__(self, name): return lambda *a, **k: "<claimed>"
    def __repr__(self): return "Anything()"
display(T(), T, Anything())`);
    const [t, cls, anything] = displays(a.events);
    expect(t!.data).toEqual({ "text/html": "<i>t</i>", "text/plain": expect.stringContaining("<__main__.T object") });
    expect(Object.keys(cls!.data as object)).toEqual(["text/plain"]);
    expect(anything!.data).toEqual({ "text/plain": "Anything()" });
  });

  test("_repr_mimebundle_ comes first and gets include/exclude; the _repr_*_ methods fill in the rest", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`
seen = []
class M:
    def _repr_mimebundle_(self, include=None, exclude=None):
        seen.append((include, exclude))
        return {"text/html": "<i>bundle</i>", "text/plain": "M!", "application/vnd.custom+json": {"k": 1}}
    def _repr_html_(self): return "<i>not used</i>"
    def _repr_markdown_(self): return "*md*"
display(M())
display(M(), include=["text/html", "text/markdown"])
display(M(), exclude=["text/html", "text/plain"])
seen`);
    const [all, included, excluded] = displays(a.events).map((e) => e.data);
    expect(all).toEqual({ "text/html": "<i>bundle</i>", "text/plain": "M!", "application/vnd.custom+json": { k: 1 }, "text/markdown": "*md*" });
    expect(included).toEqual({ "text/html": "<i>bundle</i>", "text/markdown": "*md*" });
    expect(excluded).toEqual({ "application/vnd.custom+json": { k: 1 }, "text/markdown": "*md*" });
    expect(a.result).toBe("[(None, None), (['text/html', 'text/markdown'], None), (None, ['text/html', 'text/plain'])]");
  });

  test("a repr method that raises is reported in the entry's error; the other types stay and the cell succeeds", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`
class Bad:
    def _repr_html_(self): raise ValueError("boom")
    def _repr_png_(self): return 42
    def _repr_latex_(self): return "$ok$"
    def __repr__(self): raise RuntimeError("no repr either")
display(Bad())
'after'`);
    expect(a.done.status).toBe("ok");
    expect(a.result).toBe("'after'");
    const [d] = displays(a.events);
    expect(d!.data).toEqual({ "text/latex": "$ok$", "text/plain": expect.stringMatching(/^<Bad object at 0x[0-9a-f]+>$/) });
    expect(d!.error).toBe("_repr_png_() for image/png returned int, not str or bytes; _repr_html_() raised ValueError: boom; repr() raised RuntimeError: no repr either");
  });

  test("display(raw=True) ships ready bundles; display_id gives a handle whose update shows again", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("h = display({'text/markdown': '**raw**', 'image/png': b'PNG'}, raw=True, display_id=True)\nh.update('v2')\nh.display_id != ''");
    expect(displays(a.events).map((e) => e.data)).toEqual([{ "text/markdown": "**raw**", "image/png": b64("PNG") }, { "text/plain": "'v2'" }]);
    expect(a.result).toBe("True");
    const b = await rt.exec("display([1], raw=True)");
    expect(b.error!.ename).toBe("TypeError");
  });
});

describe("the trailing value", () => {
  test("plain values add no display entry; the value's text stays the result", async () => {
    const rt = await Runtime.start();
    for (const code of ["1 + 1", "'s'", "[1, {2: 3}]", "object()", "type"]) {
      const a = await rt.exec(code);
      expect({ code, displays: displays(a.events) }).toEqual({ code, displays: [] });
      expect(a.result).not.toBeNull();
    }
  });

  test("a value with richer forms: one entry marked source value, without text/plain; the repr is still the result", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec(`${EVERY_REPR}\nEvery()`);
    expect(a.result).toBe("Every()");
    const ds = displays(a.events);
    expect(ds).toHaveLength(1);
    expect(ds[0]!.source).toBe("value");
    expect(Object.keys(ds[0]!.data as object).sort()).toEqual(
      ["application/json", "application/pdf", "image/jpeg", "image/png", "image/svg+xml", "text/html", "text/latex", "text/markdown"].sort(),
    );
    // The display event precedes the result, which comes with the done.
    expect(a.events.map((e) => e.event)).toEqual(["display", "result", "done"]);
  });

  test("a value whose only rich method raises: an entry with the error and no data; the cell succeeds", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("class B:\n    def _repr_html_(self): raise KeyError('k')\n    def __repr__(self): return 'B()'\nB()");
    expect(a.done.status).toBe("ok");
    expect(a.result).toBe("B()");
    expect(displays(a.events)).toEqual([expect.objectContaining({ data: {}, source: "value", error: "_repr_html_() raised KeyError: 'k'" })]);
  });

  test("an interrupt inside a slow repr method interrupts the cell", async () => {
    const rt = await Runtime.start();
    const id = rt.newId("slow");
    rt.send({ type: "execute", id, code: "import time\nclass S:\n    def _repr_html_(self):\n        print('in repr', flush=True); time.sleep(30)\nS()" });
    await rt.waitFor((e) => e.event === "stdout" && String(e.text).includes("in repr"));
    rt.send({ type: "interrupt", id });
    const done = await rt.waitFor((e) => e.event === "done" && e.id === id);
    expect(done.status).toBe("error");
    expect(rt.events.find((e) => e.event === "error" && e.id === id)!.ename).toBe("KeyboardInterrupt");
  });
});

describe("the per-cell entry limit (execute's max_display_entries)", () => {
  test("entries past it are not shipped and done counts them; the next cell starts afresh", async () => {
    const rt = await Runtime.start();
    const a = await rt.request({ type: "execute", code: "import awrepl\nfor i in range(10): awrepl.emit({'text/plain': str(i)})\nfor i in range(5): display(i)", max_display_entries: 4 });
    expect(displays(a.events).map((e) => (e.data as Record<string, string>)["text/plain"])).toEqual(["0", "1", "2", "3"]);
    expect(a.done.display_dropped).toBe(11);
    const b = await rt.request({ type: "execute", code: "display(1)", max_display_entries: 4 });
    expect(displays(b.events)).toHaveLength(1);
    expect(b.done.display_dropped).toBeUndefined();
  });

  test("bad display fields are refused like any bad execute field", async () => {
    const rt = await Runtime.start();
    const a = await rt.request({ type: "execute", code: "1", figure_format: "gif" });
    expect(a.done).toMatchObject({ status: "error", reason: expect.stringContaining("figure_format") });
    const b = await rt.request({ type: "execute", code: "1", max_display_entries: -1 });
    expect(b.done).toMatchObject({ status: "error", reason: expect.stringContaining("max_display_entries") });
    expect((await rt.exec("2")).result).toBe("2");
  });

  test("nothing of matplotlib, IPython or pandas is imported by the runtime itself", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import sys\n[m for m in ('matplotlib', 'IPython', 'pandas', 'numpy') if m in sys.modules]");
    expect(a.result).toBe("[]");
  });
});

// One display payload is bounded in the worker (execute's max_display_payload_bytes, default 32 MiB):
// a payload over it is dropped before it is encoded (no base64 copy, no frame), and the entry's
// `error` names the MIME type, its size and the cap. MIME keys from user code are cut to 100
// characters, with the cut said. Memory is measured where it is spent: the worker's peak RSS
// (VmHWM, reset through /proc/PID/clear_refs) beside the payload's size.
import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { closeAll, type Event, PYTHON, pythonHas, Runtime } from "../harness/mod.ts";

afterEach(closeAll);

const MIB = 1024 * 1024;
const DEFAULT_CAP = 32 * MIB;
const displays = (events: Event[]) => events.filter((e) => e.event === "display");
const data = (e: Event | undefined) => (e?.data ?? {}) as Record<string, unknown>;

function statusKb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/** The worker's peak RSS while `fn` runs, above its RSS before (bytes); the peak is reset first. */
async function peakGrowth<T>(pid: number, fn: () => Promise<T>): Promise<{ growth: number; rss: number; value: T }> {
  const rss = statusKb(pid, "VmRSS");
  writeFileSync(`/proc/${pid}/clear_refs`, "5");
  const value = await fn();
  return { growth: statusKb(pid, "VmHWM") - rss, rss, value };
}

function execute(rt: Runtime, code: string, extra: Record<string, unknown> = {}, timeoutMs = 60_000) {
  return rt.request({ type: "execute", code, ...extra }, timeoutMs);
}

const BIG_PNG = (bytes: number) =>
  `class Big:\n    def _repr_png_(self):\n        return payload\n    def __repr__(self):\n        return 'Big()'\npayload = b'\\x89PNG' + bytes(${bytes} - 4)\nbig = Big()`;

describe("one display payload is bounded", () => {
  test("a 100 MB _repr_png_ over the default cap is dropped before it is encoded: the entry says so, the worker holds no copy", async () => {
    const rt = await Runtime.start();
    const size = 100_000_000;
    expect((await execute(rt, `${BIG_PNG(size)}\nlen(payload)`)).done.status).toBe("ok");
    const { growth, rss, value: shown } = await peakGrowth(rt.pid, () => execute(rt, "display(big)"));
    console.log(`a ${size / 1e6} MB _repr_png_: worker RSS ${(rss / MIB).toFixed(0)} MiB; peak growth while displaying it ${(growth / MIB).toFixed(1)} MiB`);
    expect(shown.done.status).toBe("ok");
    const [d] = displays(shown.events);
    expect(data(d)).toEqual({ "text/plain": "Big()" });
    expect(d!.error).toBe(`_repr_png_() for image/png returned ${size} bytes (95.4 MiB), over the cap of ${DEFAULT_CAP} bytes (32.0 MiB) on one display payload: left out`);
    // Its base64 alone would be 133 MB, and the frame as much again.
    expect(growth).toBeLessThan(size * 0.25);
  }, 120_000);

  test("the cap comes from execute's max_display_payload_bytes; 0 means none; a bad value is refused", async () => {
    const rt = await Runtime.start();
    await rt.exec("import awrepl\nclass P:\n    def __init__(self, n): self.n = n\n    def _repr_png_(self): return b'P' * self.n\n    def __repr__(self): return 'P(%d)' % self.n");
    const a = await execute(rt, "display(P(1000), P(1001))", { max_display_payload_bytes: 1000 });
    const [kept, dropped] = displays(a.events);
    expect(Buffer.from(String(data(kept)["image/png"]), "base64").length).toBe(1000);
    expect(kept!.error).toBeUndefined();
    expect(data(dropped)).toEqual({ "text/plain": "P(1001)" });
    expect(dropped!.error).toBe("_repr_png_() for image/png returned 1001 bytes (1001 B), over the cap of 1000 bytes (1000 B) on one display payload: left out");
    const none = await execute(rt, `display(P(${DEFAULT_CAP + 1}))`, { max_display_payload_bytes: 0 });
    expect(Buffer.from(String(data(displays(none.events)[0])["image/png"]), "base64").length).toBe(DEFAULT_CAP + 1);
    for (const bad of [-1, 1.5, "32"]) {
      const r = await execute(rt, "1", { max_display_payload_bytes: bad });
      expect(r.done).toMatchObject({ status: "error", reason: `execute 'max_display_payload_bytes' must be a whole number, 0 or more, got ${JSON.stringify(bad).replace(/"/g, "'")}` });
    }
    expect((await rt.exec("2")).result).toBe("2");
  });

  test("every way a payload is made is bounded: text, a base64 str, JSON, a raw bundle, awrepl.emit, the trailing value", async () => {
    const rt = await Runtime.start();
    const cap = { max_display_payload_bytes: 1000 };
    const a = await execute(
      rt,
      "import awrepl\n" +
        "class T:\n    def _repr_html_(self): return '<p>' + 'é' * 500 + '</p>'\n    def _repr_svg_(self): return b'<svg>' + b' ' * 2000\n" +
        "    def _repr_jpeg_(self): return 'QUJD' * 300\n    def _repr_json_(self): return {'k': list(range(1000))}\n    def __repr__(self): return 'T()'\n" +
        "display(T())\n" +
        "display({'text/markdown': 'm' * 1001, 'text/plain': 'ok'}, raw=True)\n" +
        "awrepl.emit({'text/html': 'h' * 2000, 'application/json': {'v': 'x' * 2000}, 'text/plain': 'kept'})\n" +
        "class V:\n    def _repr_pdf_(self): return memoryview(b'%' * 5000)\n    def __repr__(self): return 'V()'\nV()",
      cap,
    );
    expect(a.done.status).toBe("ok");
    const [t, raw, emitted, value] = displays(a.events);
    expect(data(t)).toEqual({ "text/plain": "T()" });
    expect(t!.error).toBe(
      [
        "_repr_jpeg_() for image/jpeg returned 1200 bytes (1.2 KiB), over the cap of 1000 bytes (1000 B) on one display payload: left out",
        "_repr_svg_() for image/svg+xml returned 2005 bytes (2.0 KiB), over the cap of 1000 bytes (1000 B) on one display payload: left out",
        "_repr_html_() for text/html returned 1007 bytes (1007 B), over the cap of 1000 bytes (1000 B) on one display payload: left out",
        "_repr_json_() for application/json returned 3897 bytes (3.8 KiB), over the cap of 1000 bytes (1000 B) on one display payload: left out",
      ].join("; "),
    );
    expect(data(raw)).toEqual({ "text/plain": "ok" });
    expect(raw!.error).toContain("display data for text/markdown returned 1001 bytes");
    expect(data(emitted)).toEqual({ "text/plain": "kept" });
    expect(emitted!.error).toBe(
      "emit() for text/html returned 2000 bytes (2.0 KiB), over the cap of 1000 bytes (1000 B) on one display payload: left out; " +
        "emit() for application/json returned 2008 bytes (2.0 KiB), over the cap of 1000 bytes (1000 B) on one display payload: left out",
    );
    expect(value!.source).toBe("value");
    expect(data(value)).toEqual({});
    expect(value!.error).toContain("_repr_pdf_() for application/pdf returned 5000 bytes");
    expect(a.events.find((e) => e.event === "result")?.text).toBe("V()");
  });

  test("awrepl.emit measures each payload: one that is not JSON, or circular, is refused naming its key", async () => {
    const rt = await Runtime.start();
    const a = await rt.exec("import awrepl\nloop = []\nloop.append(loop)\nawrepl.emit({'application/json': {'v': loop}})");
    expect(a.error!.evalue).toBe("emit() data must be JSON-serializable: 'application/json' holds a circular reference");
    const b = await rt.exec("awrepl.emit({'application/json': {'v': object()}})");
    expect(b.error!.evalue).toBe("emit() data must be JSON-serializable: object is not JSON-serializable");
    const c = await rt.exec("awrepl.emit({'text/plain': 'fine', 'application/json': {'nan': float('nan')}})");
    expect(displays(c.events).map((e) => e.data)).toEqual([{ "text/plain": "fine", "application/json": { nan: null } }]);
  });

  test("MIME keys from user code are cut to 100 characters, and the entry says so", async () => {
    const rt = await Runtime.start();
    const long = `text/${"x".repeat(4995)}`;
    const a = await rt.exec(
      `import awrepl\nLONG = ${JSON.stringify(long)}\n` +
        "class M:\n    def _repr_mimebundle_(self, include=None, exclude=None): return {LONG: 'bundle', 'text/plain': 'M()'}\n" +
        "display(M())\nawrepl.emit({LONG: 'emitted'})\ndisplay({LONG: 'raw', LONG + 'y': 'second'}, raw=True)",
    );
    expect(a.done.status).toBe("ok");
    const cut = `${long.slice(0, 100)}...`;
    const note = "a MIME type of 5000 characters was cut to its first 100";
    const [bundle, emitted, raw] = displays(a.events);
    expect(data(bundle)).toEqual({ [cut]: "bundle", "text/plain": "M()" });
    expect(bundle!.error).toBe(note);
    expect(data(emitted)).toEqual({ [cut]: "emitted" });
    expect(emitted!.error).toBe(note);
    // Two keys that are the same once cut: the first is kept, the second said.
    expect(data(raw)).toEqual({ [cut]: "raw" });
    expect(raw!.error).toBe(`${note}; a MIME type of 5001 characters was cut to its first 100, the same as an earlier one: left out`);
    const frames = JSON.stringify(displays(a.events));
    expect(frames.length).toBeLessThan(2000);
  });

  const withMatplotlib = pythonHas("matplotlib") ? test : test.skip;
  withMatplotlib(`a figure whose PNG is over the cap is left out, said, and closed${pythonHas("matplotlib") ? "" : ` [skipped: ${PYTHON} cannot import matplotlib]`}`, async () => {
    const rt = await Runtime.start();
    const a = await execute(rt, "import matplotlib.pyplot as plt\nfig = plt.figure()\nplt.plot([1, 2])\nplt.show()\nplt.get_fignums()", { max_display_payload_bytes: 100 });
    expect(a.done.status).toBe("ok");
    const ds = displays(a.events);
    expect(ds).toHaveLength(1);
    expect(data(ds[0])).toEqual({ "text/plain": "<Figure size 640x480 with 1 Axes>" });
    expect(ds[0]!.error).toMatch(/^savefig\(\) for image\/png returned \d+ bytes \([\d.]+ KiB\), over the cap of 100 bytes \(100 B\) on one display payload: left out$/);
    expect(a.events.find((e) => e.event === "result")?.text).toBe("[]"); // closed all the same
  }, 60_000);
});

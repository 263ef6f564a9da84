import { describe, expect, test } from "bun:test";
import type { ExecResult } from "../protocol/result.ts";
import { formatFailure, LiveEcho, renderJson, renderText, shortTraceback, useColor } from "./render.ts";

function result(fields: Partial<ExecResult>): ExecResult {
  return { stdout: "", stderr: "", value: null, exception: null, traceback: "", duration_ms: 1, truncated: false, truncated_bytes: 0, status: "ok", session: null, display: [], ...fields };
}

const TB = [
  "Traceback (most recent call last):",
  '  File "<cell-3>", line 4, in <module>',
  "    main()",
  '  File "<cell-3>", line 2, in main',
  "    return json.loads(text)",
  '  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads',
  "    return _default_decoder.decode(s)",
  "           ^^^^^^^^^^^^^^^^^^^^^^^^^^",
  '  File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode',
  '    raise JSONDecodeError("Expecting value", s, err.value) from None',
  "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
].join("\n");

describe("renderText", () => {
  test("stdout, then display data, then the value; stderr apart", () => {
    const r = renderText(result({ stdout: "a", stderr: "warn\n", value: "42", display: [{ "text/plain": "<Figure>", "image/png": "/s/display/run-1.png" }] }));
    expect(r.stdout).toBe("a\n[image/png] /s/display/run-1.png\n42\n");
    expect(r.stderr).toBe("warn\n");
  });

  test("display entries: markdown first, a bare default repr gives way, files as [mime] PATH", () => {
    const png = { "image/png": "/s/f.png", metadata: { "image/png": { bytes: 10 } } };
    const r = renderText(
      result({
        display: [
          { "text/plain": "<IPython.core.display.Markdown object>", "text/markdown": "# hi" },
          { "text/plain": "<IPython.core.display.HTML object>", "text/html": "<b>x</b>" },
          { "text/plain": "   a\n0  1", "text/html": "<table/>" },
          { "text/plain": "<Figure size 640x480 with 1 Axes>", ...png },
          { "image/svg+xml": "/s/f.svg", metadata: { "image/svg+xml": { bytes: 3 } } },
        ],
      }),
    );
    expect(r.stdout).toBe("# hi\n<b>x</b>\n   a\n0  1\n[image/png] /s/f.png\n[image/svg+xml] /s/f.svg\n");
  });

  test("an image's `<...>` placeholder text is left out; a text form that says something is kept beside the file", () => {
    const png = { "image/png": "/s/f.png", metadata: { "image/png": { bytes: 10 } } };
    const shown = renderText(result({ display: [{ "text/plain": "<Figure size 640x480 with 1 Axes>", ...png }, { "text/plain": "x**2 + 1", ...png }, { "text/plain": "<Figure size 1x1>" }] }));
    expect(shown.stdout).toBe("[image/png] /s/f.png\nx**2 + 1\n[image/png] /s/f.png\n<Figure size 1x1>\n");
  });

  test("the trailing value's entry adds only its files: a DataFrame's HTML is not printed, its table is the value", () => {
    const table = "   a  b\n0  1  3";
    const r = renderText(result({ value: table, display: [{ "text/html": "<table/>", source: "value" }] }));
    expect(r.stdout).toBe(`${table}\n`);
    const fig = renderText(result({ value: "<Figure size 640x480 with 0 Axes>", display: [{ "image/png": "/s/f.png", metadata: { "image/png": { bytes: 3 } }, source: "value" }] }));
    expect(fig.stdout).toBe("[image/png] /s/f.png\n<Figure size 640x480 with 0 Axes>\n");
    // A value whose repr says nothing is shown by its entry's text form.
    const md = renderText(result({ value: "<IPython.core.display.Markdown object>", display: [{ "text/markdown": "**b**", source: "value" }] }));
    expect(md.stdout).toBe("**b**\n");
  });

  test("an echo that ran past a head cut back to a line boundary: the marker line follows on a line of its own", () => {
    const stdout = "abc\n... [12 bytes truncated] ...\ntail\n";
    for (const echoed of ["abc\ndefg", "abc\n...x", "abc\n"]) {
      const r = renderText(result({ stdout, truncated: true, truncated_bytes: 12 }), { echoed: { stdout: echoed, stderr: "" } });
      expect({ echoed, out: r.stdout }).toEqual({ echoed, out: echoed.endsWith("\n") ? "... [12 bytes truncated] ...\ntail\n" : "\n... [12 bytes truncated] ...\ntail\n" });
    }
  });

  test("display errors and dropped entries are said on stderr", () => {
    const r = renderText(result({ value: "1", display_dropped: 3, display: [{ "text/plain": "B()", error: "_repr_html_() raised ValueError: boom" }] }));
    expect(r.stdout).toBe("B()\n1\n");
    expect(r.stderr).toBe(
      "awrepl: display: _repr_html_() raised ValueError: boom (left out of the entry)\nawrepl: 3 display entries dropped (over the cell's display limits: entries per cell, or --max-output bytes of their text)\n",
    );
  });

  test("the short traceback: the cell's innermost frame, the innermost frame, the error", () => {
    const exception = "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)";
    const r = renderText(result({ status: "error", exception, traceback: TB }));
    expect(r.stderr).toBe(
      [
        '  File "<cell-3>", line 2, in main',
        "    return json.loads(text)",
        "  [2 more frames: --traceback shows them]",
        '  File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode',
        '    raise JSONDecodeError("Expecting value", s, err.value) from None',
        exception,
        "",
      ].join("\n"),
    );
    expect(renderText(result({ status: "error", exception, traceback: TB }), { traceback: true }).stderr).toBe(`${TB}\n`);
    // A caller without the flag (MCP) names where the frames are instead.
    const hinted = renderText(result({ status: "error", exception, traceback: TB }), { omittedFramesHint: "see `traceback`" }).stderr;
    expect(hinted).toContain("  [2 more frames: see `traceback`]\n");
  });

  test("a one-frame traceback keeps the frame and adds no note", () => {
    const tb = 'Traceback (most recent call last):\n  File "<cell-1>", line 1, in <module>\n    1/0\n    ~^~\nZeroDivisionError: division by zero\n';
    expect(shortTraceback(tb)).toBe('  File "<cell-1>", line 1, in <module>\n    1/0\n    ~^~\nZeroDivisionError: division by zero');
  });

  test("a SyntaxError keeps its source and caret lines", () => {
    const tb = '  File "<cell-1>", line 1\n    def f(:\n          ^\nSyntaxError: invalid syntax\n';
    expect(shortTraceback(tb)).toBe(tb.trimEnd());
  });

  test("chained exceptions keep the last one", () => {
    const tb =
      `${TB}\n\nDuring handling of the above exception, another exception occurred:\n\nTraceback (most recent call last):\n  File "<cell-3>", line 9, in <module>\n    raise ValueError("bad config")\nValueError: bad config`;
    expect(shortTraceback(tb)).toBe('  File "<cell-3>", line 9, in <module>\n    raise ValueError("bad config")\nValueError: bad config');
  });

  test("a huge message cut in both the traceback and the exception is said once", () => {
    const tb = 'Traceback (most recent call last):\n  File "<cell-1>", line 1, in <module>\n    raise ValueError(x)\nValueError: eee\n... [900 bytes truncated] ...\neee\n';
    const text = formatFailure(result({ status: "error", exception: "ValueError: eeee\n... [898 bytes truncated] ...\neeee", traceback: tb }), false);
    expect(text).toBe('  File "<cell-1>", line 1, in <module>\n    raise ValueError(x)\nValueError: eee\n... [900 bytes truncated] ...\neee');
  });

  test("no traceback: the exception line, or a word for the status", () => {
    expect(formatFailure(result({ status: "timeout", exception: "TimeoutError: cell exceeded 500 ms" }), false)).toBe("TimeoutError: cell exceeded 500 ms");
    expect(formatFailure(result({ status: "interrupted" }), false)).toBe("KeyboardInterrupt");
  });

  test("notices go to stderr; colour only marks the error line", () => {
    const r = renderText(result({ status: "died", exception: "WorkerDied: exit code 1", notice: "The worker died; its state is gone" }), { color: true });
    expect(r.stderr).toBe("awrepl: The worker died; its state is gone\n\x1b[1;31mWorkerDied: exit code 1\x1b[0m\n");
  });

  test("NO_COLOR and TERM=dumb turn colour off", () => {
    expect(useColor(true, {})).toBe(true);
    expect(useColor(true, { NO_COLOR: "1" })).toBe(false);
    expect(useColor(true, { TERM: "dumb" })).toBe(false);
    expect(useColor(false, {})).toBe(false);
  });

  test("JSON is one line", () => {
    expect(renderJson(result({ stdout: "a\nb" })).split("\n")).toEqual([expect.stringContaining('"stdout":"a\\nb"'), ""]);
  });

  test("JSON never carries a lone surrogate: strict parsers reject those escapes", () => {
    const json = renderJson(result({ stdout: "a\udcffb", value: "\ud800", display: [{ "text/plain": "\udfff!" }] }));
    expect(json).not.toMatch(/\\ud[89a-f]/i);
    const back = JSON.parse(json) as ExecResult;
    expect(back.stdout).toBe("a\ufffdb");
    expect(back.value).toBe("\ufffd");
    expect(back.display[0]?.["text/plain"]).toBe("\ufffd!");
  });
});

describe("LiveEcho", () => {
  test("echoes the head live and the result supplies exactly the rest", () => {
    const written: string[] = [];
    const live = new LiveEcho(10, (stream, text) => written.push(`${stream}:${text}`));
    live.output("stdout", "ab\n");
    live.output("stderr", "d\n");
    live.output("stdout", "fghij");
    live.output("stdout", "klm");
    expect(written).toEqual(["stdout:ab\n", "stderr:d\n"]);
    // The session keeps head (5 bytes: "ab\n" + "d\n") + marker + tail.
    const r = renderText(result({ stdout: "ab\n... [3 bytes truncated] ...\nhijklm", stderr: "d\n", truncated: true, truncated_bytes: 3 }), { echoed: live.echoed });
    expect(r.stdout).toBe("... [3 bytes truncated] ...\nhijklm");
    expect(r.stderr).toBe("");
  });

  test("a partial last line near the head's end waits for the result: the marker (or the rest of the line) follows what was shown", () => {
    const written: string[] = [];
    const live = new LiveEcho(1000, (_s, text) => written.push(text));
    const first = `${"a".repeat(300)}\n`;
    live.output("stdout", first);
    live.output("stdout", "row 1 is short\nrow 2 is cut ");
    expect(written.join("")).toBe(`${first}row 1 is short\n`); // "row 2 is cut " waits
    live.output("stdout", `off here\n${"m".repeat(300)}`); // fills the head: the m's wait, never to be shown live
    expect(written.join("")).toBe(`${first}row 1 is short\nrow 2 is cut off here\n`);
    // The result cut its head back to the end of row 2: the marker follows on its own line.
    const echoed = live.echoed;
    const cut = renderText(result({ stdout: `${echoed.stdout}... [400 bytes truncated] ...\ntail\n`, truncated: true, truncated_bytes: 400 }), { echoed });
    expect(cut.stdout).toBe("... [400 bytes truncated] ...\ntail\n");
    // Not truncated after all: the rest is printed from the result.
    const whole = renderText(result({ stdout: `${echoed.stdout}${"m".repeat(300)}\n` }), { echoed });
    expect(whole.stdout).toBe(`${"m".repeat(300)}\n`);
  });

  test("never cuts a UTF-8 character", () => {
    const written: string[] = [];
    const live = new LiveEcho(6, (_s, text) => written.push(text));
    live.output("stdout", "\néé");
    expect(written).toEqual(["\n"]); // "é" (2 bytes of the head's 3) waits as a partial line
    const big = new LiveEcho(2000, (_s, text) => written.push(text));
    big.output("stdout", `${"é".repeat(600)}`); // a partial line longer than LINE_SNAP_BYTES is shown: no cut goes back that far
    expect(written.at(-1)).toBe("é".repeat(500));
  });

  test("a limit of 0 is none: everything is echoed", () => {
    const written: string[] = [];
    const live = new LiveEcho(0, (_s, text) => written.push(text));
    live.output("stdout", "x".repeat(100_000));
    expect(written.join("").length).toBe(100_000);
    expect(LiveEcho.headBytes(0)).toBe(Number.POSITIVE_INFINITY);
  });
});

describe("a lost worker", () => {
  test("the notice says what became of the state, the exception how the worker was lost, last", () => {
    const fate = "The session's state was lost. The next call starts a fresh worker.";
    const why = "TimeoutError: The cell exceeded the 300 ms timeout and did not stop within the 100 ms grace period; the worker was killed";
    const r = renderText(result({ status: "timeout", stdout: "partial\n", stderr: "warn\n", exception: why, notice: fate }));
    expect(r.stdout).toBe("partial\n");
    expect(r.stderr).toBe(`warn\nawrepl: ${fate}\n${why}\n`);
  });

  test("a restore the notice tells is not said again", () => {
    const source = "/h/snapshots/s.pkl";
    const fate = `The session went back to its snapshot of 2026-01-01 00:00:00 UTC (${source}): 1 name(s) restored.`;
    const restored = { source, restored: ["n"], failed: [] };
    const r = renderText(result({ status: "died", exception: "WorkerDied: The Python worker exited with code 3", notice: fate, restored }));
    expect(r.stderr).toBe(`awrepl: ${fate}\nWorkerDied: The Python worker exited with code 3\n`);
    // A restore at start has no notice: its own line says it.
    const atStart = renderText(result({ restored }));
    expect(atStart.stderr).toBe(`awrepl: restored 1 name(s) from ${source}\n`);
    // An empty snapshot, restored whole: nothing to say.
    expect(renderText(result({ restored: { source, restored: [], failed: [] } })).stderr).toBe("");
    expect(renderText(result({ restored: { source, restored: [], failed: [{ name: "s", reason: "x" }] } })).stderr).toContain("could not restore s");
  });
});

describe("after a live echo", () => {
  test("the value starts on a fresh line when the echoed output ended mid-line", () => {
    const r = renderText(result({ stdout: "no newline", value: "42" }), { echoed: { stdout: "no newline", stderr: "" } });
    expect(r.stdout).toBe("\n42\n");
    const done = renderText(result({ stdout: "line\n", value: "42" }), { echoed: { stdout: "line\n", stderr: "" } });
    expect(done.stdout).toBe("42\n");
  });

  test("the error starts on a fresh line after echoed stderr", () => {
    const r = renderText(result({ status: "error", stderr: "warn", exception: "ValueError: x" }), { echoed: { stdout: "", stderr: "warn" } });
    expect(r.stderr).toBe("\nValueError: x\n");
  });
});

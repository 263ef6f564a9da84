import { describe, expect, test } from "bun:test";
import { CellRecorder, type LiveOutput, lostStateNotice, neverRanResult } from "./cell.ts";
import { durationMs } from "../core/units.ts";
import { DisplayFiles } from "./display.ts";
import { CellDisplays } from "./display_entries.ts";
import { OutputCollector } from "./output.ts";
import type { ErrorEvent } from "../protocol/runtime.ts";
import { RawText } from "../wire/output_frames.ts";

const limits = { timeoutMs: 1000, graceMs: 200 };
const calm = { timedOut: false, userInterrupted: false, killed: false };
const interruptError: ErrorEvent = { event: "error", id: "1", ename: "KeyboardInterrupt", evalue: "", traceback: ["Traceback\n", "KeyboardInterrupt\n"] };

function recorder(limit = 100, live: LiveOutput = {}): CellRecorder {
  const files = new DisplayFiles("/nonexistent-awrepl-display", "t", { maxFiles: 0, maxBytes: 0 });
  return new CellRecorder(new OutputCollector(limit), new CellDisplays(files, 0, limit), live);
}

describe("CellRecorder", () => {
  test("ok with a value and output", () => {
    const r = recorder();
    r.rawOutput("stdout", RawText.fromText("hi\n"));
    r.result("42");
    const res = r.finish({ event: "done", id: "1", status: "ok" }, calm, limits, "s", null);
    expect(res).toMatchObject({ status: "ok", stdout: "hi\n", value: "42", exception: null, traceback: "", session: "s" });
    expect(res.notice).toBeUndefined();
  });

  test("duration_ms is rounded to 0.1 ms, in every result", () => {
    expect(durationMs(12.3456)).toBe(12.3);
    expect(durationMs(0.04)).toBe(0);
    expect(durationMs(1999.96)).toBe(2000);
    const ok = recorder().finish({ event: "done", id: "1", status: "ok" }, calm, limits, "s", null);
    expect(ok.duration_ms).toBe(Math.round(ok.duration_ms * 10) / 10);
    expect(neverRanResult("s", 1234.5678, { why: "withdrawn" }).duration_ms).toBe(1234.6);
  });

  test("a KeyboardInterrupt is interrupted, timeout or error depending on who caused it", () => {
    const done = { event: "done", id: "1", status: "error" } as const;
    const status = (flags: typeof calm) => {
      const r = recorder();
      r.error(interruptError);
      return r.finish(done, flags, limits, "s", null);
    };
    expect(status({ ...calm, userInterrupted: true }).status).toBe("interrupted");
    const timedOut = status({ ...calm, timedOut: true });
    expect(timedOut.status).toBe("timeout");
    expect(timedOut.exception).toContain("state is intact");
    expect(status(calm).status).toBe("error");
  });

  test("display entries: kept ones in the result, the runtime's dropped ones added to the count", () => {
    const r = recorder(1000);
    r.display({ "text/plain": "a" });
    r.display({ "text/html": "<b>v</b>" }, { event: "display", id: "1", data: {}, source: "value" });
    const res = r.finish({ event: "done", id: "1", status: "ok", display_dropped: 5 }, calm, limits, "s", null);
    expect(res.display).toEqual([{ "text/plain": "a" }, { "text/html": "<b>v</b>", source: "value" }]);
    expect(res.display_dropped).toBe(5);
    expect(res.truncated).toBe(true);
    expect(recorder().finish({ event: "done", id: "1", status: "ok" }, calm, limits, "s", null).display_dropped).toBeUndefined();
  });

  test("a failed done without an error event is still an error with a reason", () => {
    const res = recorder().finish({ event: "done", id: "1", status: "error", reason: "bad request" }, calm, limits, "s", null);
    expect(res.status).toBe("error");
    expect(res.exception).toBe("RuntimeError: bad request");
  });

  test("a lost worker: died names the exit, killed is a timeout; the notice alone says the state was lost", () => {
    const r = recorder();
    r.rawOutput("stderr", RawText.fromText("last words\n"));
    const died = r.lost(calm, { code: 3, signal: null }, limits, "s", null);
    expect(died.status).toBe("died");
    expect(died.exception).toBe("WorkerDied: The Python worker exited with code 3");
    expect(died.stderr).toBe("last words\n");
    expect(died.notice).toBe("The session's state was lost. The next call starts a fresh worker.");
    const killed = recorder().lost({ ...calm, timedOut: true, killed: true }, { code: null, signal: "SIGKILL" }, limits, "s", "Earlier.", "the session went back to its snapshot.");
    expect(killed.status).toBe("timeout");
    expect(killed.exception).toBe("TimeoutError: The cell exceeded the 1000 ms timeout and did not stop within the 200 ms grace period; the worker was killed");
    expect(killed.notice).toBe("Earlier. The session went back to its snapshot.");
    expect(lostStateNotice(false, { code: null, signal: "SIGSEGV" })).toContain("killed by signal SIGSEGV");
  });

  test("output read decoded (a \\u escape) and undecoded goes one way: live and into the result, in order", () => {
    const shown: string[] = [];
    const r = recorder(100, { onRawOutput: (_s, raw) => shown.push(raw.text()) });
    r.rawOutput("stdout", RawText.fromText("\x1b[1mA\n"));
    r.rawOutput("stdout", new RawText(Buffer.from("B\\n"), 2));
    expect(shown).toEqual(["\x1b[1mA\n", "B\n"]);
    expect(r.finish({ event: "done", id: "1", status: "ok" }, calm, limits, "s", null).stdout).toBe("\x1b[1mA\nB\n");
  });
});

import { describe, expect, test } from "bun:test";
import { parseFastRun } from "./run.ts";

describe("parseFastRun", () => {
  test("takes the well-formed run commands of the hot path", () => {
    expect(parseFastRun(["run", "1+1"])).toEqual({ session: undefined, run: { code: "1+1" }, sandbox: {} });
    expect(parseFastRun(["-s", "a", "run", "x"])).toEqual({ session: "a", run: { code: "x" }, sandbox: {} });
    expect(parseFastRun(["run", "x", "--session", "a"])).toEqual({ session: "a", run: { code: "x" }, sandbox: {} });
    expect(parseFastRun(["--session=a.b-c_1", "run", "--json", "--traceback", "x"])).toEqual({ session: "a.b-c_1", run: { code: "x", json: true, traceback: true }, sandbox: {} });
    expect(parseFastRun(["run", "--timeout", "5", "--max-output=7", "-f", "c.py"])).toEqual({ session: undefined, run: { file: "c.py", timeoutMs: 5, maxOutputBytes: 7 }, sandbox: {} });
    expect(parseFastRun(["run", "-"])).toEqual({ session: undefined, run: { code: "-" }, sandbox: {} });
    expect(parseFastRun(["run"])).toEqual({ session: undefined, run: {}, sandbox: {} });
    expect(parseFastRun(["--python", "/usr/bin/python3", "run", "x"])).toEqual({ session: undefined, run: { code: "x", python: "/usr/bin/python3" }, sandbox: {} });
    expect(parseFastRun(["run", "--", "-1"])).toEqual({ session: undefined, run: { code: "-1" }, sandbox: {} });
    expect(parseFastRun(["-s", "a", "run", "--autosave", "x"])).toEqual({ session: "a", run: { code: "x", autosave: true }, sandbox: {} });
    expect(parseFastRun(["-s", "a", "run", "--id", "k1", "--detach", "x"])).toEqual({ session: "a", run: { code: "x", id: "k1", detach: true }, sandbox: {} });
    expect(parseFastRun(["-s", "a", "run", "--timeout", "30s", "--max-output", "64K", "x"])).toEqual({ session: "a", run: { code: "x", timeoutMs: 30_000, maxOutputBytes: 65_536 }, sandbox: {} });
    expect(parseFastRun(["-s", "a", "run", "--id", "--json", "x"])).toBeNull(); // commander says what --id lacks
    // The sandbox flags, global like --python, anywhere on the line.
    expect(parseFastRun(["--sandbox", "-s", "a", "run", "--env", "TOKEN", "--sandbox-net", "--sandbox-write=/data", "--env=B", "x"])).toEqual({
      session: "a",
      run: { code: "x" },
      sandbox: { sandbox: true, net: true, env: ["TOKEN", "B"], write: ["/data"] },
    });
    expect(parseFastRun(["run", "--sandbox", "--no-sandbox", "x"])).toEqual({ session: undefined, run: { code: "x" }, sandbox: { sandbox: false } });
    expect(parseFastRun(["run", "--display-dir", "plots", "x"])).toEqual({ session: undefined, run: { code: "x", displayDir: "plots" }, sandbox: {} });
    expect(parseFastRun(["run", "--display-dir=-odd", "x"])).toEqual({ session: undefined, run: { code: "x", displayDir: "-odd" }, sandbox: {} });
  });

  test("leaves everything else to commander (which reports errors)", () => {
    for (
      const argv of [
        [],
        ["--help"],
        ["run", "--help"],
        ["run", "-h"],
        ["--version"],
        ["vars"],
        ["run", "a", "b"],
        ["run", "--jsn", "x"],
        ["--json", "run", "x"], // run's options are not program options
        ["-s", "bad name", "run", "x"],
        ["-s"],
        ["run", "-s"],
        ["run", "--timeout", "soon", "x"],
        ["run", "--timeout"],
        ["run", "--max-output", "-1", "x"],
        ["run", "-1"],
        ["run", "-f"],
        ["run", "-f", "a", "-f", "b"],
        ["run", "--display-dir"],
        ["run", "--display-dir", "--json", "x"],
        ["run", "--display-dir=", "x"],
        ["--", "run", "x"],
        ["run", "--json=yes", "x"],
        ["run", "--env", "-x"],
        ["run", "--env"],
        ["run", "--sandbox=1", "x"],
        ["serve"],
        ["--self-test"],
      ]
    ) {
      expect({ argv, parsed: parseFastRun(argv) }).toEqual({ argv, parsed: null });
    }
  });
});

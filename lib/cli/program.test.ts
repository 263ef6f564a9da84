import { describe, expect, test } from "bun:test";
import { helpFor, parseFastView } from "./program.ts";
import { helpText } from "./help_text.ts";

describe("the fast paths take only their exact forms (tests/e2e/cli_fast_paths.test.ts compares them with commander)", () => {
  test("helpFor: --help, -h, help, help CMD, CMD --help, CMD -h", () => {
    const root = helpText("");
    expect(root).toContain("Usage: awrepl");
    for (const argv of [["--help"], ["-h"], ["help"]]) expect(helpFor(argv)).toBe(root);
    for (const argv of [["run", "--help"], ["run", "-h"], ["help", "run"]]) expect(helpFor(argv)).toBe(helpText("run"));
    expect(helpText("run")).toContain("--max-output");
    for (const argv of [[], ["-s", "x", "--help"], ["help", "nosuch"], ["nosuch", "--help"], ["daemon", "status", "--help"], ["--help", "run"], ["run", "--help", "x"], ["-V", "--help"]]) {
      expect({ argv, help: helpFor(argv) }).toEqual({ argv, help: undefined });
    }
  });

  test("parseFastView: vars and sessions with -s/--session before or after and --json", () => {
    expect(parseFastView(["vars"])).toEqual({ command: "vars", session: undefined, json: false });
    expect(parseFastView(["-s", "a", "vars"])).toEqual({ command: "vars", session: "a", json: false });
    expect(parseFastView(["vars", "--session", "a.b", "--json"])).toEqual({ command: "vars", session: "a.b", json: true });
    expect(parseFastView(["--session=a", "sessions", "--json", "-s", "b"])).toEqual({ command: "sessions", session: "b", json: true });
    for (
      const argv of [
        [],
        ["-s", "a"],
        ["vars", "x"],
        ["vars", "--json", "--json"],
        ["--json", "vars"],
        ["-s", "bad name", "vars"],
        ["vars", "-s"],
        ["--session=", "vars"],
        ["-s=a", "vars"],
        ["--python", "python3", "vars"],
        ["vars", "sessions"],
        ["vars", "--help"],
        ["inspect", "x"],
        ["sessions", "--"],
      ]
    ) {
      expect({ argv, parsed: parseFastView(argv) }).toEqual({ argv, parsed: null });
    }
  });
});

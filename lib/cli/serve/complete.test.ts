import { expect, test } from "bun:test";
import { fitMatches } from "./complete.ts";

test("whole dotted matches (rlcompleter) replace the dotted name before the cursor", () => {
  expect(fitMatches(["os.path", "os.pathsep"], "x = os.pa")).toEqual([["os.path", "os.pathsep"], "os.pa"]);
});

test("attribute-only matches (jedi) replace the last part of the name", () => {
  expect(fitMatches(["path", "pathsep"], "os.pa")).toEqual([["path", "pathsep"], "pa"]);
});

test("a keyword completes at the start of a line; duplicates are dropped", () => {
  expect(fitMatches(["import", "import"], "impo")).toEqual([["import"], "impo"]);
});

test("matches that do not extend the text are dropped rather than inserted as garbage", () => {
  expect(fitMatches(["unrelated", "print("], "pri")).toEqual([["print("], "pri"]);
});

import { expect, test } from "bun:test";
import { dedentAfterExit } from "./tty.ts";

test("after a statement that ends its block, the next line is offered one level less", () => {
  expect(dedentAfterExit("    return x", "    ")).toBe("");
  expect(dedentAfterExit("        break", "        ")).toBe("    ");
  expect(dedentAfterExit("    raise ValueError('no')", "    ")).toBe("");
});

test("names that only start with a keyword, other statements, and a runtime that dedented already are left alone", () => {
  expect(dedentAfterExit("    returned = 1", "    ")).toBe("    ");
  expect(dedentAfterExit("    return_value = 1", "    ")).toBe("    ");
  expect(dedentAfterExit("    x = 1", "    ")).toBe("    ");
  expect(dedentAfterExit("        return x", "    ")).toBe("    ");
  expect(dedentAfterExit("return x", "")).toBe("");
});

import { describe, expect, test } from "bun:test";
import type { ExecStatus } from "../protocol/result.ts";
import { AwreplError, exitCodeForStatus, isErrorCode } from "./errors.ts";

describe("exit codes", () => {
  test("map every cell status", () => {
    const statuses: ExecStatus[] = ["ok", "error", "timeout", "interrupted", "died"];
    expect(statuses.map(exitCodeForStatus)).toEqual([0, 1, 124, 130, 125]);
  });

  test("map every error code; an unknown code is not one", () => {
    expect(new AwreplError("usage", "x").exitCode).toBe(2);
    expect(new AwreplError("timeout", "x").exitCode).toBe(124);
    expect(new AwreplError("supervisor_unreachable", "x").exitCode).toBe(125);
    expect(new AwreplError("name_not_found", "x").exitCode).toBe(1);
    expect(isErrorCode("session_not_found")).toBe(true);
    expect(isErrorCode("toString")).toBe(false);
    expect(isErrorCode("made_up")).toBe(false);
  });
});

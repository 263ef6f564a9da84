// The output schemas must accept every result the server builds: the SDK validates structuredContent
// against them before sending, so a mismatch turns a good result into an error.
import { describe, expect, test } from "bun:test";
import type * as z from "zod";
import type { ExecResult, ExecStatus } from "../protocol/result.ts";
import type { SessionInfo } from "../protocol/supervisor.ts";
import { argumentSchemas, execResult, sessionsResult } from "./schemas.ts";

// Type-level: an ExecResult is a valid `execResult`, and so is every SessionInfo row.
type Fits<A, B> = A extends B ? true : false;
const execFits: Fits<ExecResult, z.infer<typeof execResult>> = true;
const statusFits: Fits<ExecStatus, z.infer<typeof execResult>["status"]> = true;
const rowFits: Fits<SessionInfo, z.infer<typeof sessionsResult>["sessions"][number]> = true;

describe("schemas", () => {
  test("an ExecResult of every status parses, with fields added later kept", () => {
    expect([execFits, statusFits, rowFits]).toEqual([true, true, true]);
    const statuses: ExecStatus[] = ["ok", "error", "timeout", "interrupted", "died"];
    for (const status of statuses) {
      const r: ExecResult & { later?: number } = {
        stdout: "",
        stderr: "",
        value: null,
        exception: null,
        traceback: "",
        duration_ms: 1.5,
        truncated: false,
        truncated_bytes: 0,
        status,
        session: "s",
        display: [{ "image/png": "/tmp/x.png" }],
        notice: "n",
        restored: { source: "/s.pkl", restored: ["a"], failed: [{ name: "b", reason: "r" }] },
        later: 1,
      };
      expect(execResult.parse(r)).toEqual(r);
    }
  });

  test("arguments are strict and bounded", () => {
    const args = argumentSchemas({ waitMs: 50_000, timeoutMs: 30_000, maxOutputBytes: 20_000 });
    expect(args.run.safeParse({ code: "1", timeout: 5 }).success).toBe(false);
    expect(args.run.safeParse({ code: "1", session: "../etc" }).success).toBe(false);
    expect(args.run.safeParse({ code: "1", max_output: 10 }).success).toBe(false);
    expect(args.run.safeParse({ code: "1", wait_ms: -1 }).success).toBe(false);
    expect(args.run.safeParse({ code: "1", session: "a.b_c-1", timeout_ms: 0, wait_ms: 0, max_output: 256 }).success).toBe(true);
    expect(args.none.safeParse({ x: 1 }).success).toBe(false);
  });
});

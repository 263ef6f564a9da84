import { describe, expect, test } from "bun:test";
import { checkMove, NextResultNotices, type SlotState } from "./session_state.ts";
import type { RestoreReport } from "../protocol/result.ts";

const SIGKILL = { killed: false, exit: { code: null, signal: "SIGKILL" } };
const REPORT: RestoreReport = { source: "/s/a.pkl", restored: ["x"], failed: [] };

describe("checkMove", () => {
  test("allows the worker's life: none, starting, ready, lost, recovered; closed from anywhere but itself", () => {
    const legal: [SlotState, SlotState][] = [
      ["none", "starting"],
      ["starting", "ready"],
      ["starting", "none"],
      ["ready", "lost"],
      ["lost", "none"],
    ];
    for (const [from, to] of legal) expect(() => checkMove(from, to)).not.toThrow();
    for (const from of ["none", "starting", "ready", "lost"] as const) expect(() => checkMove(from, "closed")).not.toThrow();
  });

  test("refuses what would hide a loss or revive a closed session, naming both ends", () => {
    expect(() => checkMove("lost", "starting")).toThrow("A session's worker cannot go from lost to starting");
    expect(() => checkMove("lost", "ready")).toThrow();
    expect(() => checkMove("ready", "starting")).toThrow();
    expect(() => checkMove("none", "ready")).toThrow();
    for (const to of ["none", "starting", "ready", "lost", "closed"] as const) expect(() => checkMove("closed", to)).toThrow();
  });
});

describe("NextResultNotices", () => {
  test("says each thing once: the state's news first, then the notes in order", () => {
    const n = new NextResultNotices();
    n.note("first note.");
    n.lost(SIGKILL);
    n.note("second note.");
    expect(n.take()).toEqual({
      notice: "The previous worker was killed by signal SIGKILL; this call ran in a fresh worker and the earlier state is gone. first note. second note.",
      restored: null,
    });
    expect(n.take()).toEqual({ notice: null, restored: null });
  });

  test("a restore at start is reported without a notice; a loss after it replaces it", () => {
    const n = new NextResultNotices();
    n.restoredAtStart(REPORT);
    expect(n.take()).toEqual({ notice: null, restored: REPORT });
    n.restoredAtStart(REPORT);
    n.recovered(SIGKILL, null);
    expect(n.take().restored).toBeNull();
  });

  test("a recovery says which snapshot it went back to, or why it could not", () => {
    const n = new NextResultNotices();
    n.recovered(SIGKILL, { report: REPORT, state: "its snapshot of now (/s/a.pkl)" });
    expect(n.take()).toEqual({
      notice: "The previous worker was killed by signal SIGKILL; this call ran in a fresh worker restored from its snapshot of now (/s/a.pkl).",
      restored: REPORT,
    });
    n.recovered({ killed: true, exit: null }, { error: "corrupt", state: "its snapshot of now (/s/a.pkl)" });
    expect(n.take().notice).toBe(
      "The previous worker was killed after a timeout; this call ran in a fresh worker and the earlier state is gone. (Its snapshot of now (/s/a.pkl) could not be restored: corrupt.)",
    );
  });

  test("a recovery with nothing to go back to keeps a loss not yet told (it says more)", () => {
    const n = new NextResultNotices();
    n.recovered(SIGKILL, { error: "corrupt", state: "its snapshot" });
    n.recovered({ killed: true, exit: null }, null);
    expect(n.take().notice).toContain("could not be restored: corrupt.");
    n.recovered({ killed: true, exit: null }, null);
    expect(n.take().notice).toContain("was killed after a timeout");
  });
});

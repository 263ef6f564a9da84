import { describe, expect, test } from "bun:test";
import { checkMove, closing, ended, ending, readied, readyWaiter, stateOf, type WorkerLife } from "./life.ts";

const exit = { code: 0, signal: null };

describe("a worker's life", () => {
  test("the state its owner sees is read off the life: ending or exited, it is what it was until its end is reported", () => {
    const waiter = readyWaiter();
    const starting: WorkerLife = { phase: "starting", waiter };
    expect(stateOf(starting)).toBe("starting");
    expect(stateOf(ending(starting, { by: "killed" }))).toBe("starting");
    expect(stateOf(ending({ phase: "ready" }, { by: "killed" }))).toBe("ready");
    const gone = ended({ phase: "ready" }, exit);
    expect(stateOf(gone)).toBe("ready");
    expect(stateOf({ ...gone, reported: true })).toBe("dead");
    expect(stateOf(closing({ phase: "ready" }))).toBe("closed");
    expect(stateOf({ ...closing(gone), reported: true })).toBe("closed");
  });

  test("a cause only rises: a kill after a close is a kill, a loss after a kill stays a kill", () => {
    const closed = closing({ phase: "ready" });
    expect(closed.cause).toEqual({ by: "shutdown" });
    const killed = ending(closed, { by: "killed" });
    expect([killed.cause, killed.closed]).toEqual([{ by: "killed" }, true]);
    expect(ending(killed, { by: "lost", reason: "silent" }).cause).toEqual({ by: "killed" });
    expect(ending(ending({ phase: "ready" }, { by: "lost", reason: "silent" }), { by: "killed" }).cause).toEqual({ by: "killed" });
    // Its own exit keeps its end: a close after it changes the state, not the cause.
    expect(closing(ended({ phase: "ready" }, exit)).cause).toBeNull();
  });

  test("a ready is taken while start() waits, also after the exit was seen, and once", () => {
    const waiter = readyWaiter();
    const first = readied({ phase: "starting", waiter });
    expect(first?.next).toEqual({ phase: "ready" });
    expect(first?.waiter).toBe(waiter);
    const late = readied(ended({ phase: "starting", waiter }, exit));
    expect(late?.next.phase).toBe("ended");
    expect(stateOf(late!.next)).toBe("ready");
    expect(readied(late!.next)).toBeNull();
    expect(readied({ phase: "ready" })).toBeNull();
    expect(readied(closing({ phase: "starting", waiter }))).toBeNull();
  });

  test("checkMove lets the moves Worker makes through", () => {
    const waiter = readyWaiter();
    const starting: WorkerLife = { phase: "starting", waiter };
    const moves: [WorkerLife, WorkerLife][] = [];
    const killed = ending({ phase: "ready" }, { by: "killed" });
    const timer = setTimeout(() => {}, 0);
    clearTimeout(timer);
    const graced = { ...killed, transportKill: timer };
    const lost = ended(graced, exit);
    moves.push(
      [starting, { phase: "ready" }],
      [starting, ending(starting, { by: "killed" })],
      [starting, ended(starting, exit)],
      [{ phase: "ready" }, killed],
      [killed, graced],
      [graced, { ...graced, transportKill: null }],
      [graced, lost],
      [lost, { ...lost, reported: true }],
      [{ ...lost, reported: true }, { ...lost, reported: true, transportKill: null }],
      [ended(starting, exit), { ...ended(starting, exit), waiter: null }],
      [ended({ phase: "ready" }, exit), closing(ended({ phase: "ready" }, exit))],
    );
    for (const [from, to] of moves) expect(() => checkMove(from, to)).not.toThrow();
  });

  test("checkMove refuses an impossible worker", () => {
    const waiter = readyWaiter();
    const other = readyWaiter();
    const [timer, another] = [setTimeout(() => {}, 0), setTimeout(() => {}, 0)];
    clearTimeout(timer);
    clearTimeout(another);
    const killed = ending({ phase: "ready" }, { by: "killed" });
    const gone = ended({ phase: "ready" }, exit);
    const reported = { ...gone, reported: true };
    const refused: [WorkerLife, WorkerLife, string][] = [
      [{ phase: "ready" }, { phase: "starting", waiter }, "a life only goes forward"],
      [gone, killed, "a life only goes forward"],
      [{ phase: "ready" }, { ...killed, waiter }, "its waiter for ready is the one it had"],
      [{ phase: "ready" }, { ...killed, transportKill: timer }, "scheduled only while it ends"],
      [{ phase: "ready" }, { ...gone, reported: true }, "an exit is reported after its last frames"],
      [killed, { ...killed, cause: { by: "lost", reason: "x" } }, "the cause of an end only rises"],
      [closing({ phase: "ready" }), { ...closing({ phase: "ready" }), closed: false }, "a closed worker stays closed"],
      [ending({ phase: "starting", waiter }, { by: "killed" }), { ...ending({ phase: "starting", waiter }, { by: "killed" }), waiter: other }, "its waiter for ready only goes"],
      [{ ...killed, transportKill: timer }, { ...killed, transportKill: another }, "scheduled once"],
      [gone, { ...gone, transportKill: timer }, "scheduled only while it ends"],
      [killed, { ...ended(killed, exit), closed: true }, "its exit changes nothing but the phase"],
      [gone, { ...gone, exit: { code: 1, signal: null } }, "one exit and one cause"],
      [reported, { ...reported, reported: false }, "a reported end is final"],
      [gone, { ...ended({ phase: "starting", waiter }, exit), exit: gone.exit, reported: true }, "its waiter for ready only goes"],
    ];
    for (const [from, to, why] of refused) {
      let error: Error | undefined;
      try {
        checkMove(from, to);
      } catch (err) {
        error = err as Error;
      }
      expect(error?.message).toContain(why);
      expect((error as { code?: string } | undefined)?.code).toBe("internal");
    }
  });
});

// A session's state in one place: which worker situation it is in (WorkerSlot, and the moves between
// situations, checked by one function), and what the next execute's result has to say once about the
// session's state (NextResultNotices): restored, lost, and notes left by snapshots.
import { AwreplError } from "../core/errors.ts";
import type { RestoreReport } from "../protocol/result.ts";
import type { Worker, WorkerExit } from "../worker/worker.ts";
import { lostStateNotice, restoredStateNotice } from "./cell.ts";
import type { Recovery } from "./snapshots.ts";

/** How a worker was lost: killed by awrepl (a deadline), or its own exit (null when not seen). */
export type Loss = { killed: boolean; exit: WorkerExit | null };

/**
 * The session's worker, in exactly one situation. A loss stays in `lost` until a call hands it to a
 * recovery (a fresh worker with the latest snapshot restored), which reports it; so no loss goes
 * unsaid and no call runs in a worker that replaced a lost one without going back to the snapshot.
 */
export type WorkerSlot =
  /** No worker: before the first start, after a failed start, or while a recovery takes over a loss. */
  | { state: "none" }
  | { state: "starting"; started: Promise<Worker> }
  | { state: "ready"; worker: Worker }
  /** The worker died or was killed; the next request recovers first. */
  | { state: "lost"; loss: Loss }
  | { state: "closed"; closing: Promise<void> };

export type SlotState = WorkerSlot["state"];

const MOVES: Record<SlotState, readonly SlotState[]> = {
  none: ["starting", "closed"],
  // Back to none: the start failed (the next request tries again).
  starting: ["ready", "none", "closed"],
  ready: ["lost", "closed"],
  // To none: a recovery took the loss over and reports it.
  lost: ["none", "closed"],
  closed: [],
};

/** Throws when a session's worker may not go from `from` to `to` (a bug in the session, not the user's). */
export function checkMove(from: SlotState, to: SlotState): void {
  if (!MOVES[from].includes(to)) throw new AwreplError("internal", `A session's worker cannot go from ${from} to ${to}`);
}

/** What one execute's result says once: `notice` and `restored`. */
export type Told = { notice: string | null; restored: RestoreReport | null };

/** What became of the session's state since the last execute took its news. */
type StateNews = { restored: RestoreReport; notice: string | null } | { lost: string };

/**
 * What the next execute's result says once, whichever call caused it: the session's state went back
 * to a snapshot (at start, or after a worker was lost between calls), or it was lost; and notes (an
 * autosave that failed or skipped names, a snapshot kept aside).
 */
export class NextResultNotices {
  private news: StateNews | null = null;
  private notes: string[] = [];

  /** The first worker got the session's default snapshot: reported, without a notice. */
  restoredAtStart(report: RestoreReport | null): void {
    if (report) this.news = { restored: report, notice: null };
  }

  /** A worker lost between calls (`loss`) was replaced; `back` says whether the latest snapshot came back. */
  recovered(loss: Loss, back: Recovery | null): void {
    if (back && "report" in back) this.news = { restored: back.report, notice: restoredStateNotice(loss.killed, loss.exit, back.state, back.report.failed) };
    else if (back) this.news = { lost: `${lostStateNotice(loss.killed, loss.exit)} (${capitalize(back.state)} could not be restored: ${back.error}.)` };
    // Nothing to go back to: an earlier loss not yet told (often this one's cause, said in more detail) stays.
    else if (!this.news || !("lost" in this.news)) this.lost(loss);
  }

  /** The state went with a lost worker and nothing was restored. */
  lost(loss: Loss): void {
    this.news = { lost: lostStateNotice(loss.killed, loss.exit) };
  }

  note(text: string): void {
    this.notes.push(text);
  }

  take(): Told {
    const news = this.news;
    const parts = news === null ? this.notes : ["lost" in news ? news.lost : news.notice, ...this.notes];
    const notice = parts.filter((p): p is string => Boolean(p)).join(" ");
    this.news = null;
    this.notes = [];
    return { notice: notice || null, restored: news && "restored" in news ? news.restored : null };
  }
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

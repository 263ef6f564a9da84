// Each named session's history, kept by the supervisor because every named session's calls pass
// through it (the CLI, serve, MCP, the TypeScript and Python libraries, the Jupyter kernel): for each
// cell its code, who ran it (hello's `client`), when it started, and the result as the caller got it.
// The result is kept by reference, not copied: it is already bounded by the cell's output limit, and it
// is the object that was sent. Bounded by count and size (config historyMaxCells, historyMaxBytes),
// the oldest cells going first. Written beside the session's snapshot whenever that is written
// (snapshot_files.ts historyPath), read back when the session is next used, removed by `close`; an
// owned session's history stays in memory and goes with the session.
//
// The watchers of a session (`watch`) hear each cell start, its live output and its end, from
// whichever client runs it. What they hear goes through their own connection's outbox, bounded
// (ClientConnection.watchReply): a slow watcher loses replies, never holds up the cell.
import { readFileSync } from "node:fs";
import { byteLimit } from "../core/limits.ts";
import type { ClientKind, HistoryCell, HistoryValue, RequestId } from "../protocol/supervisor.ts";
import type { DisplayItem, ExecResult } from "../protocol/result.ts";
import { writeFileAtomic } from "../core/files.ts";
import { ensureSessionDir, historyPath } from "../session/snapshot_files.ts";
import type { RawText } from "../wire/output_frames.ts";
import type { ClientConnection } from "./client_connection.ts";

export type HistoryBounds = { historyMaxCells: number; historyMaxBytes: number };

/** A cell that has started: what its end needs to be recorded. */
export type StartedCell = { n: number; code: string; client: ClientKind; startedAt: number };

type Watcher = { client: ClientConnection; id: RequestId; cells: number };

type HistoryFile = { version: 1; total: number; dropped: number; cells: HistoryCell[] };

/** One session's cells, oldest first. */
class SessionHistory {
  cells: HistoryCell[] = [];
  /** Their sizes, in the same order (cellSize). */
  sizes: number[] = [];
  bytes = 0;
  /** Cells ever recorded: the next cell's number is total + 1. */
  total = 0;
  /** Cells dropped by the bounds. */
  dropped = 0;
  /** Changed since it was last written. */
  dirty = false;
}

/** Every session's history in one supervisor, and every watcher. */
export class HistoryBook {
  private readonly sessions = new Map<string, SessionHistory>();
  private readonly watchers = new Map<string, Set<Watcher>>();
  /** Names whose history is memory only (owned sessions). */
  private readonly memoryOnly = new Set<string>();
  private readonly saveTimers = new Map<string, ReturnType<typeof setTimeout>>();

  constructor(
    private readonly home: string,
    private readonly bounds: HistoryBounds,
    private readonly log: (line: string) => void = () => {},
  ) {}

  /** A cell of session `name` starts: numbered, and said to its watchers. */
  begin(name: string, code: string, client: ClientKind): StartedCell {
    const history = this.of(name);
    const cell: StartedCell = { n: history.total + 1, code, client, startedAt: Date.now() };
    // Reserved now: a second cell cannot start before this one ends (one FIFO per session), but the
    // number must not be reused if this one never finishes (its worker died, the supervisor stopped).
    history.total = cell.n;
    const watchers = this.watchers.get(name);
    if (watchers) {
      const started_at = new Date(cell.startedAt).toISOString();
      for (const w of watchers) {
        w.cells++;
        w.client.watchReply({ event: "cell", id: w.id, n: cell.n, code, client, started_at });
      }
    }
    return cell;
  }

  /** Live output of session `name`'s running cell, for its watchers (the frame's bytes, not decoded). */
  output(name: string, stream: "stdout" | "stderr", raw: RawText): void {
    const watchers = this.watchers.get(name);
    if (watchers) { for (const w of watchers) w.client.watchOutput(stream, w.id, raw); }
  }

  display(name: string, item: DisplayItem): void {
    const watchers = this.watchers.get(name);
    if (watchers) { for (const w of watchers) w.client.watchReply({ event: "display", id: w.id, item }); }
  }

  /** The cell ended with `result` (as its caller gets it); `memoryOnly`: the session is owned. */
  finish(name: string, cell: StartedCell, result: ExecResult, memoryOnly: boolean): void {
    const history = this.of(name);
    const entry: HistoryCell = { n: cell.n, code: cell.code, client: cell.client, started_at: new Date(cell.startedAt).toISOString(), duration_ms: result.duration_ms, status: result.status, result };
    const size = cellSize(entry);
    history.cells.push(entry);
    history.sizes.push(size);
    history.bytes += size;
    history.dirty = true;
    if (memoryOnly) this.memoryOnly.add(name);
    const maxCells = byteLimit(this.bounds.historyMaxCells);
    const maxBytes = byteLimit(this.bounds.historyMaxBytes);
    // The newest cell stays even when it alone is over the size bound: its result was bounded already.
    while (history.cells.length > 1 && (history.cells.length > maxCells || history.bytes > maxBytes)) {
      history.cells.shift();
      history.bytes -= history.sizes.shift() ?? 0;
      history.dropped++;
    }
    const watchers = this.watchers.get(name);
    if (watchers) {
      for (const w of watchers) {
        w.client.watchReply({ event: "cell_end", id: w.id, n: cell.n, status: result.status, duration_ms: result.duration_ms, value: result.value, exception: result.exception });
      }
    }
  }

  /** The history of `name` (the newest `last` cells, when given); null when nothing is known of it. */
  read(name: string, last?: number): HistoryValue | null {
    const history = this.sessions.get(name) ?? this.load(name);
    if (!history) return null;
    const cells = last === undefined ? history.cells : last === 0 ? [] : history.cells.slice(-last);
    return { session: name, cells, total: history.total, dropped: history.dropped };
  }

  /** Cells the history of `name` holds now (loading it if needed). */
  count(name: string): number {
    return this.of(name).cells.length;
  }

  watch(name: string, client: ClientConnection, id: RequestId): void {
    let set = this.watchers.get(name);
    if (!set) this.watchers.set(name, set = new Set());
    set.add({ client, id, cells: 0 });
  }

  /** Ends `client`'s watch `id`; null when it has none of that id. Resolves how many cells it saw start. */
  unwatch(client: ClientConnection, id: RequestId): { cells: number } | null {
    for (const [name, set] of this.watchers) {
      for (const w of set) {
        if (w.client !== client || w.id !== id) continue;
        set.delete(w);
        if (set.size === 0) this.watchers.delete(name);
        return { cells: w.cells };
      }
    }
    return null;
  }

  /** A connection went away: its watches end. */
  dropClient(client: ClientConnection): void {
    for (const [name, set] of this.watchers) {
      for (const w of set) if (w.client === client) set.delete(w);
      if (set.size === 0) this.watchers.delete(name);
    }
  }

  /**
   * An owned session of this name was just created: whatever an earlier owned session of the name
   * left in memory is not its history.
   */
  startOwned(name: string): void {
    this.sessions.delete(name);
    this.memoryOnly.add(name);
  }

  /** Owned sessions that are gone (their connection closed) take their history with them. */
  sweepOwned(alive: (name: string) => boolean): void {
    for (const name of this.memoryOnly) {
      if (alive(name)) continue;
      this.memoryOnly.delete(name);
      this.sessions.delete(name);
    }
  }

  /** Writes the history of `name` beside its snapshot, if it changed (never for an owned session). */
  save(name: string): void {
    const timer = this.saveTimers.get(name);
    if (timer) clearTimeout(timer);
    this.saveTimers.delete(name);
    const history = this.sessions.get(name);
    if (!history || !history.dirty || this.memoryOnly.has(name)) return;
    const file: HistoryFile = { version: 1, total: history.total, dropped: history.dropped, cells: history.cells };
    try {
      ensureSessionDir(this.home, name);
      writeFileAtomic(historyPath(this.home, name), `${JSON.stringify(file)}\n`);
      history.dirty = false;
    } catch (err) {
      // The snapshot beside it may have been written: the history is kept in memory and written next time.
      this.log(`session ${name}: cannot write its history: ${(err as Error).message}`);
    }
  }

  /** Writes it soon, off the path of the reply (after an autosave: a burst of cells makes one write). */
  saveSoon(name: string, delayMs = 250): void {
    if (this.saveTimers.has(name) || this.memoryOnly.has(name)) return;
    const timer = setTimeout(() => this.save(name), delayMs);
    (timer as { unref?: () => void }).unref?.();
    this.saveTimers.set(name, timer);
  }

  /** `close` forgot the session: its history goes too (the file is removed with the snapshot's). */
  forget(name: string): void {
    const timer = this.saveTimers.get(name);
    if (timer) clearTimeout(timer);
    this.saveTimers.delete(name);
    this.sessions.delete(name);
    this.memoryOnly.delete(name);
  }

  private of(name: string): SessionHistory {
    let history = this.sessions.get(name);
    if (!history) {
      history = (this.memoryOnly.has(name) ? null : this.load(name)) ?? new SessionHistory();
      this.sessions.set(name, history);
    }
    return history;
  }

  /** The history written beside the snapshot of `name`; null when there is none (or it cannot be read: logged). */
  private load(name: string): SessionHistory | null {
    let text: string;
    try {
      text = readFileSync(historyPath(this.home, name), "utf8");
    } catch {
      return null;
    }
    let file: HistoryFile;
    try {
      file = JSON.parse(text) as HistoryFile;
      if (file?.version !== 1 || !Array.isArray(file.cells)) throw new Error(`not a version 1 history`);
    } catch (err) {
      this.log(`session ${name}: its history file is unreadable, starting a new one: ${(err as Error).message}`);
      return null;
    }
    const history = new SessionHistory();
    for (const cell of file.cells) {
      if (typeof cell?.n !== "number" || typeof cell.code !== "string" || typeof cell.result !== "object" || cell.result === null) continue;
      const size = cellSize(cell);
      history.cells.push(cell);
      history.sizes.push(size);
      history.bytes += size;
    }
    const last = history.cells.at(-1)?.n ?? 0;
    history.total = Math.max(typeof file.total === "number" ? file.total : 0, last);
    history.dropped = typeof file.dropped === "number" ? file.dropped : 0;
    this.sessions.set(name, history);
    return history;
  }
}

/** About the bytes a cell takes in the history: the lengths of its text (code, output, value, errors, display data). */
function cellSize(cell: HistoryCell): number {
  const r = cell.result;
  let size = 200 + cell.code.length + r.stdout.length + r.stderr.length + (r.value?.length ?? 0) + (r.exception?.length ?? 0) + r.traceback.length;
  for (const item of r.display ?? []) {
    for (const v of Object.values(item)) if (typeof v === "string") size += v.length;
  }
  return size;
}

const books = new Map<string, HistoryBook>();

/** The supervisor's history book for the state directory `home` (one per process and directory). */
export function historyBook(home: string, bounds: HistoryBounds, log?: (line: string) => void): HistoryBook {
  let book = books.get(home);
  if (!book) books.set(home, book = new HistoryBook(home, bounds, log));
  return book;
}

/** After the default snapshot of `name` was written (a stop, `close --keep`, parking): its history is written too. */
export function saveHistoryWithSnapshot(home: string, name: string): void {
  books.get(home)?.save(name);
}

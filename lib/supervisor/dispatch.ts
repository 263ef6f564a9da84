// What the supervisor does with one request line: hello and stop first (they work across versions),
// then requests that act at once (interrupt, cancel, collect, keep_result, close, list, status, history, watch: never
// queued behind a cell), and everything else in its session's queue (handed over by session_table.ts,
// which keeps who owns which call; how a call waits its turn is lib/session/call_queue.ts's). Every
// request gets exactly one final reply, `result`, `ok` or `error`, with its id; a failure in one
// request never reaches another. Every cell that runs is recorded in its session's history (history.ts),
// which `history` reads and `watch` follows.
import { existsSync } from "node:fs";
import { asAwreplError, AwreplError } from "../core/errors.ts";
import { byteLimit, OUTPUT_SO_FAR_CHARS } from "../core/limits.ts";
import { Tail } from "../core/tail.ts";
import type { RawText } from "../wire/output_frames.ts";
import { AWREPL_VERSION, buildId, SUPERVISOR_PROTOCOL } from "../core/version.ts";
import type { ClientRequest, DaemonStatus, ExecuteCallRequest, HelloRequest, RequestId, SessionCallRequest, StopSnapshot } from "../protocol/supervisor.ts";
import type { HomeLayout } from "../settings/home.ts";
import type { CallOptions, ReplSession } from "../session/session.ts";
import { ageText, defaultSnapshotPath, historyPath, knownSessionNames, readUnsaved, specPath } from "../session/snapshot_files.ts";
import type { ClientConnection } from "./client_connection.ts";
import { type HistoryBook, historyBook, type HistoryBounds, type StartedCell } from "./history.ts";
import { forgetClosedSession, snapshotBeforeStop } from "./persistence.ts";
import { creationToldState, specMismatch, specOf } from "./session_spec.ts";
import { checkRequest, readRequestLine } from "./requests.ts";
import type { Call, SessionTable } from "./session_table.ts";

/** What request handling needs of the supervisor. */
export type RequestHost = {
  readonly layout: HomeLayout;
  readonly sessions: SessionTable;
  readonly log: (line: string) => void;
  /** True once a stop has begun: requests are refused. */
  readonly stopping: boolean;
  /** Other builds of this version that have connected (logged once each). */
  readonly buildsSeen: Set<string>;
  /** The supervisor's config, read once: the history's bounds. */
  readonly config: HistoryBounds;
  /** Begins the stop; resolves with what became of every session's state once their snapshots are done. */
  stop(reason: string): Promise<StopSnapshot[]>;
  status(): DaemonStatus;
};

/** A request that takes its turn in its session's queue. */
type QueuedRequest = Extract<ClientRequest, { type: "open" }> | ExecuteCallRequest | SessionCallRequest;

/** One line from `client` (null: not valid UTF-8). */
export function handleLine(host: RequestHost, client: ClientConnection, line: string | null): void {
  if (line === null) {
    client.error(null, new AwreplError("protocol", "Request is not valid UTF-8"));
    return;
  }
  const read = readRequestLine(line);
  if ("error" in read) {
    client.error(read.id, read.error);
    return;
  }
  // Until a hello of our version, only hello and stop are read any further: a client of another
  // version may spell everything else its own way, and gets version_mismatch for it.
  if (read.type !== "hello" && read.type !== "stop" && client.hello !== "ok") {
    const error = client.hello === "pending"
      ? new AwreplError("protocol", "The first request must be hello")
      : new AwreplError("version_mismatch", `This supervisor is awrepl ${AWREPL_VERSION} (protocol ${SUPERVISOR_PROTOCOL}); stop it and start your own`);
    client.error(read.id, error);
    return;
  }
  let request: ClientRequest;
  try {
    request = checkRequest(read);
  } catch (err) {
    client.error(read.id, asAwreplError(err));
    return;
  }
  if (request.type === "hello") return hello(host, client, request);
  if (request.type === "stop") {
    // Accepted whatever the hello said: a client of another version replaces us this way. The reply
    // comes once every session's snapshot was tried, and says which states were not saved.
    const reason = client.hello === "mismatch" ? "replaced by a client of another awrepl version" : "stop requested";
    void host.stop(reason).then((snapshots) => client.reply({ event: "ok", id: read.id, value: { snapshots } }));
    return;
  }
  if (host.stopping) {
    client.error(request.id, new AwreplError("supervisor_unreachable", "The supervisor is stopping"));
    return;
  }
  try {
    dispatch(host, client, request);
  } catch (err) {
    client.error(request.id, asAwreplError(err));
  }
}

function hello(host: RequestHost, client: ClientConnection, request: HelloRequest): void {
  // Builds of one version are compatible by contract: only the version and protocol decide. (A
  // rebuilt binary replacing the supervisor would end every session whenever a test suite or a
  // developer rebuilds; the build is reported, so `daemon status` shows which code runs.)
  const build = buildId();
  const ok = request.protocol === SUPERVISOR_PROTOCOL && request.version === AWREPL_VERSION;
  const otherBuild = request.build !== undefined && request.build !== build && !host.buildsSeen.has(request.build);
  if (!ok || otherBuild) {
    if (request.build !== undefined) host.buildsSeen.add(request.build);
    host.log(`client of version ${request.version} build ${request.build ?? "?"} (protocol ${request.protocol}) connected; this is ${AWREPL_VERSION} build ${build}`);
  }
  client.hello = ok ? "ok" : "mismatch";
  client.kind = request.client ?? "library";
  // Both spellings, always: the client's version is not known to it until it reads this.
  client.reply({ event: "hello", type: "hello", ok, protocol: SUPERVISOR_PROTOCOL, version: AWREPL_VERSION, build, pid: process.pid });
}

function dispatch(host: RequestHost, client: ClientConnection, request: Exclude<ClientRequest, { type: "hello" | "stop" }>): void {
  const { sessions } = host;
  const ok = (value: unknown) => client.reply({ event: "ok", id: request.id, value });
  const later = (value: Promise<unknown>) => void value.then(ok, (err: unknown) => client.error(request.id, asAwreplError(err)));
  switch (request.type) {
    case "interrupt":
      return later(sessions.interrupt(request.session, client).then((interrupted) => ({ interrupted })));
    case "cancel": {
      // A watch of this connection ends with its own `ok`, then this one's.
      const watched = books(host).unwatch(client, request.target);
      if (watched) client.reply({ event: "ok", id: request.target, value: watched });
      return ok({ cancelled: watched !== null || sessions.cancel(client, request.target) });
    }
    case "collect":
      if (request.key !== undefined) return later(sessions.collectKey(client, request.session, request.key, request.wait_ms ?? 0, request.output === true));
      return later(sessions.collect(client, request.id, request.session, request.wait_ms ?? 0));
    case "keep_result":
      return ok({ kept: sessions.keepResult(client, request.target) });
    case "host_reply":
      return ok({ delivered: sessions.hostReply(client, request.target, request.host_id, request.data) });
    case "close":
      return later(closeSession(host, client, request.session, request.keep === true));
    case "close_all":
      return later(closeAllSessions(host, client, request.keep === true));
    case "list":
      return later(sessions.list());
    case "status":
      return ok(host.status());
    case "history":
      return ok(readHistory(host, client, request.session, request.last));
    case "watch":
      return watch(host, client, request.session, request.id);
    default:
      return queue(host, client, request);
  }
}

/** Hands `request` to its session's queue (session_table.ts); the session is created from the request's spec if needed. */
function queue(host: RequestHost, client: ClientConnection, request: QueuedRequest): void {
  const { id, session: name } = request;
  const owned = (request.type === "open" || request.type === "execute") && request.owned === true;
  if (owned && !host.sessions.has(name)) checkNameFree(host.layout.home, name);
  else if (request.spec?.existing && !host.sessions.visible(name, client)) checkRecoverable(host.layout.home, name);
  // Whether this call created the session. (It is known once submit() returns; a call on a session
  // that exists already is handed to it inside submit(), and then it is false, as it should be.)
  let created = false;
  // The cell's host requests, when its client answers them.
  const hostRequests = request.type === "execute" && request.host_bridge ? new HostRequests(client, id) : null;
  const call: Call = {
    owner: client,
    id,
    abort: new AbortController(),
    detach: request.type === "execute" && request.detach === true,
    key: request.type === "execute" ? request.idempotency_key : undefined,
    fail: (error) => client.error(id, error),
    // Its turn (the call's signal, the table's start hook) goes with it into the session's queue.
    run: async (session, turn) => {
      // A live session asked for another interpreter or sandbox keeps its own: said, never ignored.
      const mismatch = created ? null : specMismatch(name, specOf(session) ?? {}, request.spec);
      if (request.type === "execute") return execute(host, client, session, request, call, turn, created, hostRequests, mismatch);
      const ok = (value: unknown) => client.reply(mismatch ? { event: "ok", id, value, notice: mismatch } : { event: "ok", id, value });
      if (request.type === "open") return ok(await session.inTurn(async () => ({ created, pid: session.pid }), turn));
      if (request.type === "snapshot" && request.path === undefined && host.sessions.ownedBy(name, client)) {
        throw new AwreplError("usage", `Session ${name} is owned by this connection and keeps nothing in the state directory: give snapshot a path`);
      }
      const value = await sessionCall(session, request, turn);
      // The default snapshot was written: what is kept with it is written now too.
      if (request.type === "snapshot" && request.path === undefined) books(host).save(name);
      ok(value);
    },
  };
  if (hostRequests) {
    call.hostReply = (hostId, data) => hostRequests.answer(hostId, data);
    // A detached cell outlives its client: its host requests have nobody to answer them any more.
    call.ownerGone = () => hostRequests.end("its client went away");
  }
  created = host.sessions.submit(name, request.spec, call, owned);
  if (created && owned) {
    const book = books(host);
    book.sweepOwned((n) => host.sessions.has(n));
    book.startOwned(name);
  }
}

/** The history book of this supervisor (history.ts). */
function books(host: RequestHost): HistoryBook {
  return historyBook(host.layout.home, host.config, host.log);
}

/** `history`: from memory, or from the file beside the snapshot of a session that is not running. */
function readHistory(host: RequestHost, client: ClientConnection, name: string, last?: number) {
  checkWatchable(host, client, name);
  return books(host).read(name, last) ?? { session: name, cells: [], total: 0, dropped: 0 };
}

/** `watch`: `watching` now, then the session's cells as they run, until the connection closes or a cancel. */
function watch(host: RequestHost, client: ClientConnection, name: string, id: RequestId): void {
  checkWatchable(host, client, name);
  const book = books(host);
  client.reply({ event: "watching", id, session: name, cells: book.count(name) });
  book.watch(name, client, id);
  // Once per connection, however many watches it sends.
  if (!watching.has(client)) {
    watching.add(client);
    client.onClosed(() => book.dropClient(client));
  }
}

/** Connections that have sent a watch. */
const watching = new WeakSet<ClientConnection>();

/** A session this connection may look at: running (and not another connection's owned one), or known to the state directory. */
function checkWatchable(host: RequestHost, client: ClientConnection, name: string): void {
  if (host.sessions.visible(name, client)) return;
  const missing = new AwreplError("session_not_found", `No session named ${JSON.stringify(name)}`);
  if (host.sessions.has(name)) throw missing;
  const home = host.layout.home;
  if (!existsSync(defaultSnapshotPath(home, name)) && !existsSync(specPath(home, name)) && !existsSync(historyPath(home, name))) throw missing;
}

/**
 * An owned session must not take over a name the state directory knows (a saved snapshot or spec):
 * it would shadow that session, and it could never save under the name anyway.
 */
function checkNameFree(home: string, name: string): void {
  if (existsSync(defaultSnapshotPath(home, name)) || existsSync(specPath(home, name))) {
    throw new AwreplError("usage", `Session ${JSON.stringify(name)} is saved in ${home} (it has a snapshot or a saved spec): an owned session needs a name of its own`);
  }
}

/**
 * For a request that only looks at a session (`existing`): the session must run or have a snapshot
 * to restore. A name nothing is known of is a typo (session_not_found); one whose state was not
 * saved when its supervisor stopped is said to be lost, rather than shown as an empty namespace.
 */
function checkRecoverable(home: string, name: string): void {
  if (existsSync(defaultSnapshotPath(home, name))) return;
  if (!existsSync(specPath(home, name))) throw new AwreplError("session_not_found", `No session named ${JSON.stringify(name)}`);
  const unsaved = readUnsaved(home, name);
  const why = unsaved
    ? `its snapshot failed when its supervisor stopped (${unsaved.stop}) ${ageText(Date.now() - unsaved.at)} ago: ${unsaved.error}`
    : "it was not saved before its supervisor went away";
  throw new AwreplError(
    "session_not_found",
    `Session ${name} is not running and its state is lost: ${why}. \`awrepl -s ${name} run ...\` re-creates it (as it was made, empty); \`awrepl close ${name}\` forgets it.`,
  );
}

async function execute(
  host: RequestHost,
  client: ClientConnection,
  session: ReplSession,
  request: ExecuteCallRequest,
  call: Call,
  turn: Required<CallOptions>,
  created: boolean,
  hostRequests: HostRequests | null,
  mismatch: string | null,
): Promise<void> {
  const { id, session: name } = request;
  const { sessions } = host;
  const book = books(host);
  let ran: StartedCell | null = null;
  const onStart = () => {
    ran = book.begin(name, request.code, client.kind);
    turn.onStart();
    // Asked for by a later caller (`run --autosave`): switched on as its cell starts, never off, by a
    // spec. Not for an owned session, which never writes a snapshot of its own.
    if (request.spec?.autosave === true && !sessions.ownedBy(name, client)) session.autosave = true;
  };
  const stream = request.stream === true;
  // Past the client's live_limit its output is not shown: not forwarding it saves copying (and
  // buffering, for a slow reader) what the result's head and tail carry anyway.
  let liveLeft = byteLimit(request.live_limit ?? 0);
  // A keyed cell's latest output, for `status ID --output` from anyone while it runs (decoded only then).
  const soFar = request.idempotency_key === undefined ? null : new Tail(OUTPUT_SO_FAR_CHARS);
  if (soFar) call.outputSoFar = () => (soFar.trim(), soFar.text);
  const forward = stream
    ? (s: "stdout" | "stderr", raw: RawText) => {
      if (liveLeft <= 0) return;
      liveLeft -= raw.bytes;
      client.output(s, id, raw);
    }
    : null;
  const result = await session.execute(request.code, {
    timeoutMs: request.timeout_ms,
    maxOutputBytes: request.max_output_bytes,
    filename: request.filename,
    id: request.idempotency_key,
    signal: turn.signal,
    onStart,
    // Forwarded as the runtime wrote it: never decoded and re-encoded here.
    onRawOutput: (s, raw) => {
      soFar?.push(raw.text());
      forward?.(s, raw);
      book.output(name, s, raw);
    },
    onDisplay: (item) => {
      if (stream) client.display(id, item);
      book.display(name, item);
    },
    onHostRequest: hostRequests ? (data) => hostRequests.ask(data) : undefined,
  }).finally(() => hostRequests?.end());
  result.session = name;
  // A cell that never ran (its wait ran out, or it was withdrawn) says only that.
  if (ran) {
    // A session re-created from its snapshot says so in `restored`; without one its state is gone
    // (unless its creation already said what became of its state).
    if (created && request.known && !result.restored && !creationToldState(session)) {
      const lost = `Session ${name} was not running (closed, or its supervisor stopped); this call ran in a fresh worker and the earlier state is gone.`;
      result.notice = result.notice ? `${lost} ${result.notice}` : lost;
    }
    if (mismatch) result.notice = result.notice ? `${mismatch} ${result.notice}` : mismatch;
    // As the caller gets it (the object sent, not a copy). An owned session's stays in memory; an
    // autosaved session's is written beside the snapshot it just wrote, soon and off this path.
    const memoryOnly = sessions.ownedBy(name, client);
    book.finish(name, ran, result, memoryOnly);
    if (session.autosave && !memoryOnly) book.saveSoon(name);
  }
  // A detached call's result may be kept for `collect`, and has nobody to go to once its client left.
  if (call.detach && !sessions.finishDetached(name, call, result)) return;
  client.reply({ event: "result", id, result });
}

/**
 * The host requests of one execute whose client answers them (`host_bridge`): each goes to the client
 * as a `host_request` reply with an id of its own, and its `host_reply` request resolves it. Those
 * still unanswered when the cell ends get an error (the runtime drops a reply for a finished cell).
 */
class HostRequests {
  private next = 0;
  private readonly waiting = new Map<string, (data: Record<string, unknown>) => void>();
  /** Why nobody answers any more (the cell ended, or its client went away): later requests get it at once. */
  private over: string | null = null;

  constructor(
    private readonly client: ClientConnection,
    private readonly id: RequestId,
  ) {}

  ask(data: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.over !== null) return Promise.resolve({ error: this.over });
    const hostId = String(++this.next);
    return new Promise((resolve) => {
      this.waiting.set(hostId, resolve);
      this.client.reply({ event: "host_request", id: this.id, host_id: hostId, data });
    });
  }

  /** False when nothing waits for `hostId` (answered already, or the cell ended). */
  answer(hostId: string, data: Record<string, unknown>): boolean {
    const resolve = this.waiting.get(hostId);
    if (!resolve) return false;
    this.waiting.delete(hostId);
    resolve(data);
    return true;
  }

  /** Answers every request still waiting with an error saying `why` nobody will. */
  end(why = "the cell ended before its host answered"): void {
    this.over = why;
    for (const resolve of this.waiting.values()) resolve({ error: why });
    this.waiting.clear();
  }
}

/** The answer to a session request other than execute and open, in its turn. */
async function sessionCall(session: ReplSession, request: SessionCallRequest, turn: CallOptions): Promise<unknown> {
  switch (request.type) {
    case "variables":
      return session.variables(turn);
    case "inspect":
      return session.inspect(request.name, { ...turn, full: request.full === true });
    case "reset":
      await session.reset(turn);
      return null;
    case "complete":
      return session.complete(request.code, request.cursor, turn);
    case "is_complete":
      return session.isComplete(request.code, turn);
    case "snapshot":
      return session.snapshot(request.path, { ...turn, timeoutMs: request.timeout_ms });
    case "restore":
      return session.restore(request.path, { ...turn, timeoutMs: request.timeout_ms });
  }
}

/**
 * Ends a session (if it runs) and forgets its snapshot (also when it does not run). With `keep`, a
 * running session is snapshotted first instead, so its next use restores it as it was; if that
 * snapshot fails the session is NOT closed (closing would lose its state): the reply says why.
 */
async function closeSession(host: RequestHost, client: ClientConnection, name: string, keep: boolean): Promise<{ closed: boolean; forgot: boolean; snapshot?: StopSnapshot }> {
  // Another connection's owned session is not there for this one; its own is ended, with nothing to forget.
  if (host.sessions.has(name) && !host.sessions.visible(name, client)) throw new AwreplError("session_not_found", `No session named ${JSON.stringify(name)}`);
  if (host.sessions.ownedBy(name, client)) {
    if (keep) throw new AwreplError("usage", `Session ${name} is owned by this connection and keeps nothing: close it without keep`);
    return { closed: await host.sessions.close(name), forgot: false };
  }
  if (keep) {
    const [snapshot] = await snapshotBeforeStop(host.sessions.live().filter(([n]) => n === name), host.log, { home: host.layout.home, stop: "close --keep", record: false });
    if (snapshot && snapshot.status !== "saved") return { closed: false, forgot: false, snapshot };
    const closed = await host.sessions.close(name, { keepFiles: true });
    return snapshot ? { closed, forgot: false, snapshot } : { closed, forgot: false };
  }
  const closed = await host.sessions.close(name);
  books(host).forget(name);
  const forgot = forgetClosedSession(host.layout.home, name);
  if (forgot) host.log(`session ${name}: snapshot forgotten`);
  return { closed, forgot };
}

async function closeAllSessions(host: RequestHost, client: ClientConnection, keep: boolean): Promise<{ closed: string[]; forgot: string[]; snapshots?: StopSnapshot[] }> {
  if (keep) {
    const snapshots = await snapshotBeforeStop(host.sessions.live(), host.log, { home: host.layout.home, stop: "close --all --keep", record: false });
    const unsaved = new Set(snapshots.filter((s) => s.status !== "saved").map((s) => s.session));
    const closed: string[] = [];
    for (const name of host.sessions.visibleNames(client).filter((n) => !unsaved.has(n))) if (await host.sessions.close(name, { keepFiles: true })) closed.push(name);
    return { closed, forgot: [], snapshots };
  }
  const closed = await host.sessions.closeAll({}, client);
  const forgot = knownSessionNames(host.layout.home).filter((name) => forgetClosedSession(host.layout.home, name));
  for (const name of [...closed, ...forgot]) books(host).forget(name);
  if (forgot.length) host.log(`snapshots forgotten: ${forgot.join(", ")}`);
  return { closed, forgot };
}

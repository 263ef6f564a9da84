// Named sessions in one process, as the original awrepl's SessionPool: each has its own worker and
// namespace; the pool's options are every session's defaults. The API is the original's: sessions are
// named by id (createSession returns the id, as `create_session` does; getSession takes it).
import { randomBytes } from "node:crypto";
import { AwreplError } from "../core/errors.ts";
import { ReplSession, type ReplSessionOptions } from "./session.ts";

export class SessionPool implements AsyncDisposable {
  readonly options: ReplSessionOptions;
  private readonly sessions = new Map<string, ReplSession>();
  /** Ids being created: reserved so two concurrent createSession(id) calls cannot both succeed. */
  private readonly creating = new Set<string>();

  constructor(options: ReplSessionOptions = {}) {
    this.options = options;
  }

  /**
   * Starts a session under `id` (generated when omitted) and resolves its id, as the original's
   * `create_session` returns it; getSession(id) gives the session. A taken id throws "session_exists".
   */
  async createSession(id?: string, options: ReplSessionOptions = {}): Promise<string> {
    const name = id ?? this.freshId();
    if (this.sessions.has(name) || this.creating.has(name)) {
      throw new AwreplError("session_exists", `Session ${JSON.stringify(name)} already exists in this pool`);
    }
    this.creating.add(name);
    try {
      const session = await ReplSession.start(name, { ...this.options, ...options });
      this.sessions.set(name, session);
      return name;
    } finally {
      this.creating.delete(name);
    }
  }

  /** The session named `id`; a missing one throws "session_not_found". */
  getSession(id: string): ReplSession {
    const session = this.sessions.get(id);
    if (!session) throw new AwreplError("session_not_found", `No session ${JSON.stringify(id)} in this pool`);
    return session;
  }

  hasSession(id: string): boolean {
    return this.sessions.has(id);
  }

  listSessions(): string[] {
    return [...this.sessions.keys()];
  }

  /** Closes the session and forgets it; a missing one throws "session_not_found". */
  async deleteSession(id: string): Promise<void> {
    const session = this.getSession(id);
    this.sessions.delete(id);
    await session.close();
  }

  async closeAll(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    await Promise.all(all.map((s) => s.close()));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.closeAll();
  }

  private freshId(): string {
    for (;;) {
      const id = `session-${randomBytes(4).toString("hex")}`;
      if (!this.sessions.has(id) && !this.creating.has(id)) return id;
    }
  }
}

// A named session for a long-lived `serve`: when the supervisor goes away underneath it (`daemon stop`,
// an upgrade, a crash), the next call attaches again, which starts a supervisor and restores the
// session's snapshot. Calls that only read (completion, is_complete, variables, inspect) are retried at
// once; a cell is never re-sent, since it may have run before the connection broke.
import { AwreplError } from "../../core/errors.ts";
import type { ExecResult, RestoreReport } from "../../protocol/result.ts";
import type { InspectInfo } from "../../protocol/runtime.ts";
import type { CompletenessStatus, ExecuteOptions, Session, SnapshotReport } from "../../protocol/api.ts";

export class ReattachingSession implements Session {
  readonly id: string;
  #current: Session;
  #stale = false;
  readonly #open: () => Promise<Session>;

  constructor(first: Session, open: () => Promise<Session>) {
    this.id = first.id;
    this.#current = first;
    this.#open = open;
  }

  execute(code: string, options?: ExecuteOptions): Promise<ExecResult> {
    return this.#call((s) => s.execute(code, options), false);
  }

  variables(): Promise<Record<string, string>> {
    return this.#call((s) => s.variables(), true);
  }

  inspect(name: string): Promise<InspectInfo> {
    return this.#call((s) => s.inspect(name), true);
  }

  reset(): Promise<void> {
    return this.#call((s) => s.reset(), true);
  }

  /** Only the connection a cell runs on can interrupt it; a new one has nothing to interrupt. */
  interrupt(): Promise<void> {
    return this.#current.interrupt();
  }

  complete(code: string, cursor?: number): Promise<string[]> {
    return this.#call((s) => s.complete(code, cursor), true);
  }

  isComplete(code: string): Promise<{ status: CompletenessStatus; indent: string }> {
    return this.#call((s) => s.isComplete(code), true);
  }

  snapshot(path?: string): Promise<SnapshotReport> {
    return this.#call((s) => s.snapshot(path), false);
  }

  restore(path?: string): Promise<RestoreReport> {
    return this.#call((s) => s.restore(path), false);
  }

  close(): Promise<void> {
    return this.#current.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #session(): Promise<Session> {
    if (this.#stale) {
      await this.#current.close().catch(() => {});
      this.#current = await this.#open();
      this.#stale = false;
    }
    return this.#current;
  }

  async #call<T>(fn: (session: Session) => Promise<T>, retry: boolean): Promise<T> {
    const session = await this.#session();
    try {
      return await fn(session);
    } catch (err) {
      if (!(err instanceof AwreplError) || err.code !== "supervisor_unreachable") throw err;
      this.#stale = true;
      if (!retry) throw err;
      return fn(await this.#session());
    }
  }
}

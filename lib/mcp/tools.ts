// The nine tools `awrepl mcp` serves, each a client call on the supervisor's named sessions exactly as
// the CLI's commands are: their names, descriptions, schemas and annotations (what `tools/list`
// advertises), and the handlers of the ones that are not about a cell's life (cell_tools.ts has those).
// Every handler catches its own failures: a thrown error would reach the host as a bare message, and
// awrepl's stable error code would be lost.
import type { McpServer } from "@modelcontextprotocol/server";
import { attach, type AttachOptions, type RemoteSession } from "../client/attach.ts";
import { closeSession, interruptSession, listSessions } from "../client/daemon.ts";
import type { CallLimits } from "../core/limits.ts";
import { savedSessionNames } from "../session/snapshot_files.ts";
import type { HomeLayout } from "../settings/home.ts";
import { CellTools } from "./cell_tools.ts";
import { errorContent, type Format, type ToolResult } from "./content.ts";
import type { ToolContext } from "./context.ts";
import * as S from "./schemas.ts";

export type ToolsOptions = {
  defaultSession: string;
  /** How a session is created when a call finds none (interpreter, directory, environment, config defaults). */
  attach: AttachOptions & { layout: HomeLayout; clientEnv: NodeJS.ProcessEnv };
  /** What a cell runs under unless its call asks otherwise (`timeout_ms`, `max_output`). */
  cell: CallLimits;
  waitMs: number;
  maxImageBytes: number;
  heartbeatMs?: number;
  format: Format;
};

/** What the server tells the host about itself (`instructions` of the initialize reply). */
export function instructions(o: Pick<ToolsOptions, "cell" | "waitMs">): string {
  const s = (ms: number) => `${ms / 1000} s`;
  const { timeoutMs } = o.cell;
  return `awrepl runs Python in persistent sessions: variables, imports and open files survive between calls.
Use \`run\` for code; the trailing expression's repr comes back as \`value\`. A cell still running after wait_ms
(default ${s(o.waitMs)}) returns status "running" and keeps going: call \`wait\` to collect it or \`interrupt\` to stop it.
Nothing is lost if this server restarts meanwhile. Cells time out after timeout_ms (default ${timeoutMs ? s(timeoutMs) : "none"}):
pass a larger value, or 0, for long work. Sessions are shared with people and other tools (\`awrepl -s NAME serve\`).`;
}

type Annotations = { readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
const annotations = (readOnlyHint: boolean, destructiveHint: boolean, idempotentHint: boolean, openWorldHint: boolean): Annotations => ({
  readOnlyHint,
  destructiveHint,
  idempotentHint,
  openWorldHint,
});

/** The tools' state: one per process (the stdio entry pins one McpServer per connection). */
export class Tools {
  /** One RemoteSession (one supervisor connection) per session and mode, kept for the process's life. */
  private readonly remotes = new Map<string, Promise<RemoteSession>>();
  private readonly cellTools: CellTools;
  private readonly args: S.Arguments;

  constructor(private readonly o: ToolsOptions) {
    this.cellTools = new CellTools({
      ...o,
      sessionName: (s) => this.name(s),
      remote: (name) => this.remote(name, false),
      interruptSession: (name) => interruptSession(name, this.client()),
    });
    this.args = S.argumentSchemas({ waitMs: o.waitMs, ...o.cell });
  }

  get defaultSession(): string {
    return this.o.defaultSession;
  }

  register(server: McpServer): void {
    const guard = <A>(fn: (args: A, ctx: ToolContext) => Promise<ToolResult>) => async (args: A, ctx: ToolContext): Promise<ToolResult> => {
      try {
        return await fn(args, ctx);
      } catch (err) {
        return errorContent(err);
      }
    };
    const a = this.args;
    server.registerTool(
      "run",
      {
        title: "Run Python",
        description: "Run Python code in a persistent session (state survives between calls). Returns stdout, stderr, the trailing expression's repr " +
          '(`value`), the exception and display data (images come back as image content). A Python exception is a normal result (status "error"). ' +
          'If the cell is still running after wait_ms it returns status "running" and keeps running: call `wait`.',
        inputSchema: a.run,
        outputSchema: S.execResult,
        annotations: annotations(false, true, false, true),
      },
      guard((args: S.RunArgs, ctx) => this.cellTools.run(args, ctx)),
    );
    server.registerTool(
      "wait",
      {
        title: "Wait for a running cell",
        description: 'Wait for the cell a previous `run` left running (status "running") and return its result, also after this server restarted; ' +
          'returns "running" again if it is still not done after wait_ms. Status "idle": nothing to wait for.',
        inputSchema: a.wait,
        outputSchema: S.execResult,
        annotations: annotations(true, false, false, false),
      },
      guard((args: S.WaitArgs, ctx) => this.cellTools.wait(args, ctx)),
    );
    server.registerTool(
      "interrupt",
      {
        title: "Interrupt the running cell",
        description: "Interrupt the session's running cell (KeyboardInterrupt), whoever started it. The session keeps its variables.",
        inputSchema: a.session,
        outputSchema: S.interruptResult,
        annotations: annotations(false, false, true, false),
      },
      guard((args: S.SessionArgs) => this.cellTools.interrupt(args)),
    );
    server.registerTool(
      "variables",
      {
        title: "List variables",
        description: "The session's variables: name -> one line saying what it is (type, size, short repr).",
        inputSchema: a.session,
        outputSchema: S.variablesResult,
        annotations: annotations(true, false, true, false),
      },
      guard((args: S.SessionArgs) => this.variables(args)),
    );
    server.registerTool(
      "inspect",
      {
        title: "Inspect a variable",
        description: "Describe one name in the session: type, size (shape, columns, len), repr, signature, docstring (first paragraph; full for all), keys, ...",
        inputSchema: a.inspect,
        outputSchema: S.inspectResult,
        annotations: annotations(true, false, true, false),
      },
      guard((args: S.InspectArgs) => this.inspect(args)),
    );
    server.registerTool(
      "sessions",
      {
        title: "List sessions",
        description: "The supervisor's sessions (name, pid, state, cells run, cwd, ...), the snapshots waiting to be restored, and this server's default session.",
        inputSchema: a.none,
        outputSchema: S.sessionsResult,
        annotations: annotations(true, false, true, false),
      },
      guard(() => this.sessions()),
    );
    server.registerTool(
      "reset",
      {
        title: "Reset a session",
        description: "Clear the session's namespace (all variables and imports); the interpreter keeps running.",
        inputSchema: a.session,
        outputSchema: S.resetResult,
        annotations: annotations(false, true, true, false),
      },
      guard((args: S.SessionArgs) => this.reset(args)),
    );
    server.registerTool(
      "history",
      {
        title: "Session history",
        description: "The cells the session ran, oldest first, whoever ran them (this server, a person's shell or serve, a library, a Jupyter kernel): " +
          "each cell's number, code, client, start time and result. Use it to see what a person did in the session.",
        inputSchema: a.history,
        outputSchema: S.historyResult,
        annotations: annotations(true, false, true, false),
      },
      guard((args: S.HistoryArgs) => this.history(args)),
    );
    server.registerTool(
      "close",
      {
        title: "Close a session",
        description: "End the session's interpreter and forget its variables and snapshot (unless keep_snapshot). The next use of the name starts fresh.",
        inputSchema: a.close,
        outputSchema: S.closeResult,
        annotations: annotations(false, true, true, false),
      },
      guard((args: S.CloseArgs) => this.close(args)),
    );
  }

  private async variables(a: S.SessionArgs): Promise<ToolResult> {
    const name = this.name(a.session);
    const vars = await (await this.remote(name, true)).variables();
    const names = Object.keys(vars);
    const width = Math.min(24, Math.max(0, ...names.map((n) => n.length)));
    const text = names.length ? names.map((n) => `${n.padEnd(width)}  ${vars[n]}`).join("\n") : "(no variables)";
    return { content: [{ type: "text", text }], structuredContent: { session: name, variables: vars } };
  }

  private async inspect(a: S.InspectArgs): Promise<ToolResult> {
    const info = await (await this.remote(this.name(a.session), true)).inspect(a.name, { full: a.full === true });
    const text = Object.entries(info)
      .filter(([, v]) => v !== null && v !== undefined)
      .map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`)
      .join("\n");
    return { content: [{ type: "text", text }], structuredContent: info as Record<string, unknown> };
  }

  private async sessions(): Promise<ToolResult> {
    const rows = await listSessions(this.client());
    const running = new Set(rows.map((r) => r.name));
    const saved = savedSessionNames(this.o.attach.layout.home).filter((n) => !running.has(n));
    const lines = [rows.length === 0 && saved.length > 0 ? "No sessions running" : this.o.format.sessions(rows)];
    if (saved.length) lines.push(`Saved, restored on next use: ${saved.join(", ")}`);
    lines.push(`Default session of this server: ${this.defaultSession}`);
    return { content: [{ type: "text", text: lines.join("\n") }], structuredContent: { sessions: rows, saved, default_session: this.defaultSession } };
  }

  private async history(a: S.HistoryArgs): Promise<ToolResult> {
    const name = this.name(a.session);
    const h = await (await this.remote(name, true)).history({ last: a.last ?? S.HISTORY_TOOL_DEFAULT_CELLS });
    const older = h.total - h.dropped - h.cells.length;
    const lines = h.cells.map((c) => {
      const r = c.result;
      const outcome = r.exception ?? (r.value !== null ? `-> ${oneLine(r.value)}` : "");
      return `[${c.n}] ${c.client} ${c.started_at} ${c.status}${outcome ? ` ${outcome}` : ""}\n${c.code.replace(/\n$/, "")}`;
    });
    if (older > 0) lines.unshift(`(${older} older cell(s) not shown: ask with last)`);
    if (h.cells.length === 0) lines.push(`Session ${name} has no history yet`);
    return { content: [{ type: "text", text: lines.join("\n\n") }], structuredContent: h as unknown as Record<string, unknown> };
  }

  private async reset(a: S.SessionArgs): Promise<ToolResult> {
    const name = this.name(a.session);
    await (await this.remote(name, true)).reset();
    return { content: [{ type: "text", text: `Session ${name}: namespace cleared` }], structuredContent: { session: name, reset: true } };
  }

  private async close(a: S.CloseArgs): Promise<ToolResult> {
    const name = this.name(a.session);
    const closed = await closeSession(name, { ...this.client(), keep: a.keep_snapshot === true });
    this.cellTools.forgetSession(name);
    this.dropRemotes(name);
    const text = closed ? `Session ${name} closed` : `No session or snapshot named ${name}`;
    return { content: [{ type: "text", text }], structuredContent: { session: name, closed } };
  }

  private name(session: string | undefined): string {
    return session ?? this.o.defaultSession;
  }

  private client(): { env: NodeJS.ProcessEnv; layout: HomeLayout } {
    return { env: this.o.attach.clientEnv, layout: this.o.attach.layout };
  }

  /**
   * `existing`: for variables, inspect and reset, as the CLI does: a name with neither a session nor
   * a snapshot is session_not_found, never created empty.
   */
  private remote(name: string, existing: boolean): Promise<RemoteSession> {
    const key = `${name}\0${existing}`;
    let p = this.remotes.get(key);
    if (!p) {
      p = attach(name, { ...this.o.attach, existing });
      p.catch(() => this.remotes.delete(key));
      this.remotes.set(key, p);
    }
    return p;
  }

  private dropRemotes(name: string): void {
    for (const existing of [false, true]) {
      const key = `${name}\0${existing}`;
      const p = this.remotes.get(key);
      this.remotes.delete(key);
      void p?.then((r) => r.close(), () => {});
    }
  }

  /** Closes every supervisor connection. Detached cells run on; their results are kept for the next server. */
  async closeAll(): Promise<void> {
    const all = [...this.remotes.values()];
    this.remotes.clear();
    await Promise.all(all.map((p) => p.then((r) => r.close(), () => {})));
  }
}

/** The first line of `text`, at most 200 characters: a value in the history's summary. */
function oneLine(text: string): string {
  const line = text.split("\n", 1)[0] ?? "";
  return line.length > 200 || text.includes("\n") ? `${line.slice(0, 200)}...` : line;
}

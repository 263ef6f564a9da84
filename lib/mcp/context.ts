// What a tool handler gets from the SDK, as far as awrepl uses it (structural: no SDK import here), and
// the progress callback built from it.
import type { Notify } from "./cells.ts";

export type ToolContext = {
  mcpReq: {
    _meta?: { progressToken?: string | number; [k: string]: unknown };
    /** Aborted on notifications/cancelled and when the transport closes; nothing is sent after it. */
    signal: AbortSignal;
    notify: (n: { method: "notifications/progress"; params: Record<string, unknown> }) => Promise<void>;
  };
};

/** Progress notifications for this call, or undefined when the client sent no progress token. */
export function progressNotifier(ctx: ToolContext): Notify | undefined {
  const token = ctx.mcpReq._meta?.progressToken;
  if (token === undefined) return undefined;
  return (progress, message) => ctx.mcpReq.notify({ method: "notifications/progress", params: { progressToken: token, progress, message } });
}

// What a tool handler gets from the SDK, as far as awrepl uses it, the progress callback built from
// it, and what its abort signal means.
import { SdkError, SdkErrorCode } from "@modelcontextprotocol/server";
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

/**
 * The call's signal aborted because the connection to the host closed (stdin EOF: the host is ending
 * or restarting this server), not because the host cancelled the call. The SDK aborts every call in
 * flight then; the cell must run on (it is detached, and its result kept for the next server).
 */
export function disconnected(signal: AbortSignal): boolean {
  return signal.reason instanceof SdkError && signal.reason.code === SdkErrorCode.ConnectionClosed;
}

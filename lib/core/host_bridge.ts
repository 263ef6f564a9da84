// The host bridge's rules, for every host that answers a cell's `await awrepl.host_request(data)`
// (docs/protocol.md, "Display and host bridges"): a library session answers with its caller's
// onHostRequest, a supervisor forwards the request to its client, and without a handler the answer is
// one clear error, so that the awaiting cell never hangs.
import type { HostRequestHandler } from "../protocol/api.ts";

export type HostReplyData = Record<string, unknown>;

/** The reply when nobody answers host requests: the cell gets it as the request's result. */
export const NO_HOST_BRIDGE: HostReplyData = { error: "no host bridge in this awrepl host" };

/**
 * The reply to one host request from `handler`: what it returns or resolves, as an object (anything
 * else is `{value}`, as the runtime reads it); a handler that throws, or a value JSON cannot carry, is
 * an `{error}` reply naming why. Never rejects.
 */
export async function answerHostRequest(handler: HostRequestHandler | undefined, data: HostReplyData): Promise<HostReplyData> {
  if (!handler) return NO_HOST_BRIDGE;
  let value: unknown;
  try {
    value = await handler(data);
  } catch (err) {
    return { error: `the host's handler failed: ${(err as Error)?.message ?? String(err)}` };
  }
  const reply = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as HostReplyData) : { value: value ?? null };
  try {
    JSON.stringify(reply);
  } catch (err) {
    return { error: `the host's reply is not JSON: ${(err as Error).message}` };
  }
  return reply;
}

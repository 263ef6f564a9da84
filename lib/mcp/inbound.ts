// One line off stdin, judged as JSON-RPC 2.0 says (https://www.jsonrpc.org/specification, "Response
// object" and "Error object"), before the SDK sees it: a line that is not UTF-8 or not JSON is a parse
// error (-32700, id null); JSON that is not a valid request, a batch included (MCP has none since
// 2025-06-18), is an invalid request (-32600) with the request's id when that id is valid, null when
// not. The SDK's own reader drops the first silently and only logs the second, leaving the caller
// waiting. A malformed response is not answered (answering a response could loop between two peers).
import { type JSONRPCMessage, parseJSONRPCMessage, ProtocolErrorCode, type RequestId } from "@modelcontextprotocol/server";

/** The error reply to a line (the transport writes it as-is: `id` may be null, which JSONRPCMessage does not allow). */
export type Rejection = { id: RequestId | null; code: ProtocolErrorCode; message: string };

export type Inbound =
  | { kind: "message"; message: JSONRPCMessage }
  | { kind: "reject"; rejection: Rejection }
  /** Not answered; `why` goes to the log. */
  | { kind: "ignore"; why: string }
  /** A blank line: nothing at all. */
  | { kind: "blank" };

const MEMBERS = new Set(["jsonrpc", "id", "method", "params", "result", "error"]);
const PREVIEW_CHARS = 60;

/** Judges one line (its bytes, without the newline). */
export function readLine(bytes: Uint8Array): Inbound {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    const at = invalidUtf8At(bytes);
    const where = at < 0 ? "" : ` at byte ${at} (0x${(bytes[at] as number).toString(16).padStart(2, "0")})`;
    return parseError(`the message (${bytes.length} bytes) is not valid UTF-8${where}`);
  }
  if (text.trim() === "") return { kind: "blank" };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return parseError(`the message is not valid JSON (${(e as Error).message}): ${quoted(text)}`);
  }
  if (Array.isArray(value)) {
    const what = value.length === 0 ? "an empty batch ([])" : `a batch (a JSON array of ${value.length})`;
    return invalid(null, `${what} is not supported: send one JSON-RPC object per line`);
  }
  if (value === null || typeof value !== "object") return invalid(null, `expected a JSON-RPC object, got ${describe(value)}`);
  try {
    return { kind: "message", message: parseJSONRPCMessage(value) };
  } catch {
    return whyInvalid(value as Record<string, unknown>);
  }
}

/** What is wrong with an object the SDK's schema refused, in the order a reader would fix it. */
function whyInvalid(m: Record<string, unknown>): Inbound {
  if (!("method" in m) && ("result" in m || "error" in m)) return { kind: "ignore", why: `discarded a malformed JSON-RPC response: ${preview(JSON.stringify(m))}` };
  if ("id" in m && !isRequestId(m.id)) return invalid(null, `id must be a string or an integer, not ${describe(m.id)}`);
  const id = "id" in m ? (m.id as RequestId) : null;
  if (m.jsonrpc !== "2.0") {
    return invalid(id, `jsonrpc must be "2.0"${m.jsonrpc === undefined ? " (it is missing)" : `, not ${typeof m.jsonrpc === "string" ? preview(JSON.stringify(m.jsonrpc)) : describe(m.jsonrpc)}`}`);
  }
  if (!("method" in m)) return invalid(id, "no method: a request (or a notification) needs a string method");
  if (typeof m.method !== "string") return invalid(id, `method must be a string, not ${describe(m.method)}`);
  if ("params" in m && (m.params === null || typeof m.params !== "object" || Array.isArray(m.params))) return invalid(id, `params must be an object, not ${describe(m.params)}`);
  const unknown = Object.keys(m).find((k) => !MEMBERS.has(k));
  if (unknown !== undefined) return invalid(id, `unknown member ${JSON.stringify(unknown)}: a request has jsonrpc, id, method and params`);
  return invalid(id, `not a valid JSON-RPC ${id === null ? "notification" : "request"} for MCP: ${preview(JSON.stringify(m))}`);
}

/** MCP's ids: a string or an integer (JSON-RPC's null is not allowed). */
function isRequestId(id: unknown): id is RequestId {
  return typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id));
}

function parseError(detail: string): Inbound {
  return { kind: "reject", rejection: { id: null, code: ProtocolErrorCode.ParseError, message: `Parse error: ${detail}` } };
}

function invalid(id: RequestId | null, detail: string): Inbound {
  return { kind: "reject", rejection: { id, code: ProtocolErrorCode.InvalidRequest, message: `Invalid Request: ${detail}` } };
}

/** A value named for a message: its kind and (the start of) its JSON. */
function describe(v: unknown): string {
  if (v === null) return "null";
  const kind = Array.isArray(v) ? "an array" : typeof v === "object" ? "an object" : `a ${typeof v}`;
  return `${kind} (${preview(JSON.stringify(v))})`;
}

/** The start of some JSON text. */
function preview(text: string): string {
  return text.length <= PREVIEW_CHARS ? text : `${text.slice(0, PREVIEW_CHARS)}… (${text.length} characters)`;
}

/** The start of a line that is not JSON, quoted (control characters shown as escapes). */
function quoted(text: string): string {
  return text.length <= PREVIEW_CHARS ? JSON.stringify(text) : `${JSON.stringify(text.slice(0, PREVIEW_CHARS))}… (${text.length} characters)`;
}

/** Where the first sequence that breaks UTF-8 starts (the decoder says only that one does), or -1. */
function invalidUtf8At(b: Uint8Array): number {
  for (let i = 0; i < b.length;) {
    const c = b[i] as number;
    if (c < 0x80) {
      i++;
      continue;
    }
    // The sequence's length, and its second byte's range (which rules out overlong forms, surrogates and code points past U+10FFFF).
    const [n, lo, hi] = c >= 0xc2 && c <= 0xdf
      ? [1, 0x80, 0xbf]
      : c === 0xe0
      ? [2, 0xa0, 0xbf]
      : c === 0xed
      ? [2, 0x80, 0x9f]
      : c >= 0xe1 && c <= 0xef
      ? [2, 0x80, 0xbf]
      : c === 0xf0
      ? [3, 0x90, 0xbf]
      : c === 0xf4
      ? [3, 0x80, 0x8f]
      : c >= 0xf1 && c <= 0xf3
      ? [3, 0x80, 0xbf]
      : [0, 0, 0];
    if (n === 0) return i;
    for (let k = 1; k <= n; k++) {
      const next = b[i + k];
      if (next === undefined) return i;
      if (k === 1 ? next < lo || next > hi : (next & 0xc0) !== 0x80) return i;
    }
    i += n + 1;
  }
  return -1;
}

// Reading one request line from a client, in two steps, because a connection whose hello did not
// match answers everything but hello and stop with version_mismatch, whatever else is wrong with it:
// readRequestLine finds the envelope (a JSON object, its type, its id), checkRequest the fields.
// Anything wrong is an AwreplError whose message names the offending field; the supervisor replies with
// it and keeps serving. The request's id is recovered when it can be, so the error reaches the caller's
// pending request.
//
// The requests are declared once, as a union (lib/protocol/supervisor.ts); REQUESTS below is typed
// against it, so a request added there and not here (or the other way round), or one whose `session`
// or `id` flag disagrees with its declaration, fails to compile.
import { AwreplError } from "../core/errors.ts";
import { IDEMPOTENCY, MAX_DELAY_MS } from "../core/limits.ts";
import { checkSessionName, ENV_VAR_NAME } from "../core/names.ts";
import type { ClientKind, ClientRequest, RequestId, RequestOf, RequestType, SessionSpec } from "../protocol/supervisor.ts";

/** hello's `client` values (docs/supervisor-protocol.md): who ran a cell, in a session's history. */
export const CLIENT_KINDS: readonly ClientKind[] = ["cli", "serve", "mcp", "library", "python", "kernel"];

export type RequestLine = {
  /** `type`, or for hello and stop also protocol 1's `op`; null when neither names one. */
  type: string | null;
  id: RequestId | null;
  fields: Record<string, unknown>;
};
/** A line that is not a request at all: `id` is null unless the line was an object with one. */
export type RejectedLine = { error: AwreplError; id: RequestId | null };

type Rule<T extends RequestType> = {
  /** It names a session (checked), and may carry the spec to create that session with. */
  session: RequestOf<T> extends { session: string } ? true : false;
  /** It needs an id, which every reply to it repeats. */
  id: RequestOf<T> extends { id: RequestId } ? true : false;
  /** Its own fields. */
  check?: (fields: Record<string, unknown>) => void;
};

/** Longest `filename` of an execute (a path; PATH_MAX on Linux). */
const MAX_FILENAME = 4096;
/** Longest string id. */
const MAX_ID = 128;

const REQUESTS: { readonly [T in RequestType]: Rule<T> } = {
  hello: {
    session: false,
    id: false,
    check(f) {
      if (typeof f.protocol !== "number") throw protocolError("hello needs a numeric protocol");
      if (typeof f.version !== "string") throw protocolError("hello needs a version string");
      if (f.build !== undefined && typeof f.build !== "string") throw protocolError("hello's build must be a string");
      if (f.client !== undefined && !CLIENT_KINDS.includes(f.client as ClientKind)) {
        throw usage(`client must be one of ${CLIENT_KINDS.join(", ")}, not ${preview(JSON.stringify(f.client))}`);
      }
    },
  },
  stop: { session: false, id: false },
  open: { session: true, id: true, check: (f) => checkFlag(f, "owned") },
  execute: {
    session: true,
    id: true,
    check(f) {
      checkString(f, "code");
      for (const key of ["timeout_ms", "max_output_bytes", "live_limit"]) checkCount(f, key);
      for (const key of ["stream", "known", "detach", "host_bridge", "owned"]) checkFlag(f, key);
      checkKeyField(f, "idempotency_key");
      if (f.filename !== undefined && (typeof f.filename !== "string" || f.filename.length > MAX_FILENAME)) {
        throw usage(`filename must be a string of at most ${MAX_FILENAME} characters`);
      }
    },
  },
  host_reply: {
    session: false,
    id: true,
    check(f) {
      if (typeof f.target !== "number" && typeof f.target !== "string") throw protocolError("host_reply needs a target id");
      checkString(f, "host_id");
      if (typeof f.data !== "object" || f.data === null || Array.isArray(f.data)) throw usage("data must be an object");
    },
  },
  variables: { session: true, id: true },
  inspect: {
    session: true,
    id: true,
    check(f) {
      checkString(f, "name");
      checkFlag(f, "full");
    },
  },
  reset: { session: true, id: true },
  complete: {
    session: true,
    id: true,
    check(f) {
      checkString(f, "code");
      checkCount(f, "cursor");
    },
  },
  is_complete: { session: true, id: true, check: (f) => checkString(f, "code") },
  snapshot: { session: true, id: true, check: checkSnapshotCall },
  restore: { session: true, id: true, check: checkSnapshotCall },
  interrupt: { session: true, id: true },
  cancel: { session: false, id: true, check: (f) => checkTarget(f, "cancel") },
  collect: {
    session: true,
    id: true,
    check(f) {
      checkCount(f, "wait_ms");
      if (typeof f.wait_ms === "number" && f.wait_ms > MAX_DELAY_MS) throw usage(`wait_ms must be at most ${MAX_DELAY_MS}, not ${f.wait_ms}`);
      checkKeyField(f, "key");
      checkFlag(f, "output");
    },
  },
  keep_result: { session: false, id: true, check: (f) => checkTarget(f, "keep_result") },
  close: { session: true, id: true, check: (f) => checkFlag(f, "keep") },
  close_all: { session: false, id: true, check: (f) => checkFlag(f, "keep") },
  list: { session: false, id: true },
  status: { session: false, id: true },
  history: {
    session: true,
    id: true,
    check(f) {
      checkCount(f, "last");
      if (f.last !== undefined && !Number.isInteger(f.last)) throw usage(`last must be a whole number of cells, not ${preview(JSON.stringify(f.last))}`);
    },
  },
  watch: { session: true, id: true },
};

/** Every request type, in the order of the table. */
export const REQUEST_TYPES = Object.keys(REQUESTS) as RequestType[];

/** True for the requests that name a session. */
export function namesSession(type: RequestType): boolean {
  return REQUESTS[type].session;
}

/** The envelope of a request line; the fields are checked by checkRequest. */
export function readRequestLine(line: string): RequestLine | RejectedLine {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { error: protocolError(`Request is not JSON: ${preview(line)}`), id: null };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { error: protocolError(`Request must be a JSON object, not ${preview(line)}`), id: null };
  }
  const fields = value as Record<string, unknown>;
  const id = typeof fields.id === "number" || typeof fields.id === "string" ? fields.id : null;
  const type = typeof fields.type === "string" ? fields.type : fields.op === "hello" || fields.op === "stop" ? fields.op : null;
  return { type, id, fields };
}

/** The request, its fields checked (and `type` set, for a hello or stop spelled the protocol 1 way). */
export function checkRequest({ type, fields }: RequestLine): ClientRequest {
  if (type === null || !Object.hasOwn(REQUESTS, type)) {
    throw protocolError(`Unknown request type ${preview(JSON.stringify(fields.type ?? fields.op ?? null))}`);
  }
  const rule: { session: boolean; id: boolean; check?: (fields: Record<string, unknown>) => void } = REQUESTS[type as RequestType];
  if (rule.id && !(typeof fields.id === "number" || (typeof fields.id === "string" && fields.id.length <= MAX_ID))) {
    throw protocolError(`Request ${type} needs an id (a number or a string of at most ${MAX_ID} characters)`);
  }
  if (rule.session) {
    checkSessionName(fields.session);
    if (fields.spec !== undefined) checkSpec(fields.spec);
  }
  rule.check?.(fields);
  fields.type = type;
  return fields as ClientRequest;
}

function checkSpec(spec: unknown): asserts spec is SessionSpec {
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) throw usage("spec must be an object");
  const s = spec as Record<string, unknown>;
  for (const key of ["python", "cwd"]) {
    if (s[key] !== undefined && (typeof s[key] !== "string" || s[key] === "")) throw usage(`spec.${key} must be a non-empty string`);
  }
  if (s.venv !== undefined && (typeof s.venv !== "string" || !s.venv.startsWith("/") || s.venv.includes("\0"))) {
    throw usage(`spec.venv must be an absolute path, not ${preview(JSON.stringify(s.venv))}`);
  }
  for (const key of ["timeout_ms", "max_output_bytes", "grace_ms"]) checkCount(s, key, "spec.");
  for (const key of ["autosave", "python_given", "existing"]) checkFlag(s, key, "spec.");
  if (s.env !== undefined) {
    if (typeof s.env !== "object" || s.env === null || Array.isArray(s.env)) throw usage("spec.env must be an object of strings");
    for (const [k, v] of Object.entries(s.env)) {
      if (typeof v !== "string") throw usage(`spec.env.${k} must be a string`);
    }
  }
  if (s.sandbox !== undefined) checkSandbox(s.sandbox);
  // Each limit is checked where the worker is planned (lib/worker/limits/plan.ts checkLimits), which names it and its flag.
  if (s.limits !== undefined && (typeof s.limits !== "object" || s.limits === null || Array.isArray(s.limits))) throw usage("spec.limits must be an object");
}

/** An idempotency key: a non-empty string of at most IDEMPOTENCY.maxKeyLength characters. */
function checkKeyField(fields: Record<string, unknown>, field: string): void {
  const key = fields[field];
  if (key !== undefined && (typeof key !== "string" || key === "" || key.length > IDEMPOTENCY.maxKeyLength)) {
    throw usage(`${field} must be a non-empty string of at most ${IDEMPOTENCY.maxKeyLength} characters, not ${preview(JSON.stringify(key))}`);
  }
}

function checkTarget(fields: Record<string, unknown>, type: string): void {
  if (typeof fields.target !== "number" && typeof fields.target !== "string") throw protocolError(`${type} needs a target id`);
}

/** Most names or paths one sandbox field takes. */
const MAX_SANDBOX_ITEMS = 256;

/** spec.sandbox: false, or {network?, git?, home?: bool, env?: [names], writable?: [absolute paths], allow?: [host[:port]]}. */
function checkSandbox(sandbox: unknown): void {
  if (sandbox === false) return;
  if (typeof sandbox !== "object" || sandbox === null || Array.isArray(sandbox)) throw usage("spec.sandbox must be false or an object");
  for (const [key, value] of Object.entries(sandbox)) {
    if (key === "network" || key === "git" || key === "home") {
      checkFlag(sandbox as Record<string, unknown>, key, "spec.sandbox.");
      continue;
    }
    if (key === "allow") {
      // The entries themselves are checked where the sandbox is built (lib/worker/net_allow.ts), which names a bad one.
      if (!Array.isArray(value) || value.length > MAX_SANDBOX_ITEMS || value.some((h) => typeof h !== "string" || h === "" || h.length > 300)) {
        throw usage(`spec.sandbox.allow must be a list of at most ${MAX_SANDBOX_ITEMS} host[:port] strings`);
      }
      continue;
    }
    if (key !== "env" && key !== "writable") throw usage(`spec.sandbox.${key} is not a sandbox field (network, env, writable, git, home, allow)`);
    if (!Array.isArray(value) || value.length > MAX_SANDBOX_ITEMS) throw usage(`spec.sandbox.${key} must be a list of at most ${MAX_SANDBOX_ITEMS} strings`);
    for (const item of value) {
      const ok = typeof item === "string" && (key === "env" ? ENV_VAR_NAME.test(item) : item.startsWith("/") && item.length <= 4096 && !item.includes("\0"));
      if (!ok) throw usage(`spec.sandbox.${key} has ${preview(JSON.stringify(item))}: ${key === "env" ? "not an environment variable name" : "not an absolute path"}`);
    }
  }
}

function checkSnapshotCall(fields: Record<string, unknown>): void {
  if (fields.path !== undefined) checkString(fields, "path");
  checkCount(fields, "timeout_ms");
}

function checkFlag(obj: Record<string, unknown>, key: string, prefix = ""): void {
  if (obj[key] !== undefined && typeof obj[key] !== "boolean") throw usage(`${prefix}${key} must be true or false`);
}

function checkString(obj: Record<string, unknown>, key: string): void {
  if (typeof obj[key] !== "string") throw usage(`${key} must be a string`);
}

function checkCount(obj: Record<string, unknown>, key: string, prefix = ""): void {
  const v = obj[key];
  if (v === undefined || v === null) return;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) throw usage(`${prefix}${key} must be a non-negative number, not ${preview(JSON.stringify(v))}`);
}

function usage(message: string): AwreplError {
  return new AwreplError("usage", `Field ${message}`);
}

function protocolError(message: string): AwreplError {
  return new AwreplError("protocol", message);
}

function preview(text: string): string {
  const clean = text.replace(/[^\x20-\x7e]/g, "?");
  return clean.length > 60 ? `${clean.slice(0, 60)}... (${text.length} characters)` : clean;
}

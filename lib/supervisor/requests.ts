// Reading one request line from a client: JSON, an object, a known op, fields of the right types.
// Anything else is an AwreplError whose message names the offending field; the supervisor replies
// with it and keeps serving. The request's id is recovered when it can be, so the error reaches
// the caller's pending request.
import { AwreplError } from "../core/errors.ts";
import { checkSessionName } from "../core/names.ts";
import type { ClientRequest, RequestId, SessionSpec } from "../protocol/supervisor.ts";

export type ParsedLine = { request: ClientRequest } | { error: AwreplError; id: RequestId | null };

const SESSION_OPS = new Set(["open", "execute", "variables", "inspect", "reset", "complete", "is_complete", "snapshot", "restore", "interrupt", "close"]);
const KNOWN_OPS = new Set([...SESSION_OPS, "hello", "cancel", "close_all", "list", "status", "stop"]);

export function parseRequestLine(line: string): ParsedLine {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { error: protocolError(`Request is not JSON: ${preview(line)}`), id: null };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { error: protocolError(`Request must be a JSON object, not ${preview(line)}`), id: null };
  }
  const obj = value as Record<string, unknown>;
  const id = typeof obj.id === "number" || typeof obj.id === "string" ? obj.id : null;
  try {
    return { request: checkRequest(obj) };
  } catch (err) {
    return { error: err as AwreplError, id };
  }
}

/** Longest `filename` of an execute (a path; PATH_MAX on Linux). */
const MAX_FILENAME = 4096;

function checkRequest(obj: Record<string, unknown>): ClientRequest {
  const op = obj.op;
  if (typeof op !== "string" || !KNOWN_OPS.has(op)) throw protocolError(`Unknown op ${preview(JSON.stringify(op ?? null))}`);
  if (op === "hello") {
    if (typeof obj.protocol !== "number") throw protocolError("hello needs a numeric protocol");
    if (typeof obj.version !== "string") throw protocolError("hello needs a version string");
    if (obj.build !== undefined && typeof obj.build !== "string") throw protocolError("hello's build must be a string");
    return obj as ClientRequest;
  }
  if (op !== "stop" && !(typeof obj.id === "number" || (typeof obj.id === "string" && obj.id.length <= 128))) {
    throw protocolError(`Request ${op} needs an id (a number or a short string)`);
  }
  if (SESSION_OPS.has(op)) {
    checkSessionName(obj.session);
    if (obj.spec !== undefined) checkSpec(obj.spec);
  }
  switch (op) {
    case "execute":
      checkString(obj, "code");
      checkCount(obj, "timeoutMs");
      checkCount(obj, "maxOutputBytes");
      checkCount(obj, "liveLimit");
      for (const flag of ["stream", "known"]) checkFlag(obj, flag);
      if (obj.filename !== undefined && (typeof obj.filename !== "string" || obj.filename.length > MAX_FILENAME)) {
        throw usage(`filename must be a string of at most ${MAX_FILENAME} characters`);
      }
      break;
    case "inspect":
      checkString(obj, "name");
      break;
    case "complete":
      checkString(obj, "code");
      checkCount(obj, "cursor");
      break;
    case "is_complete":
      checkString(obj, "code");
      break;
    case "snapshot":
    case "restore":
      if (obj.path !== undefined) checkString(obj, "path");
      break;
    case "close":
    case "close_all":
      checkFlag(obj, "keep");
      break;
    case "cancel":
      if (typeof obj.target !== "number" && typeof obj.target !== "string") throw protocolError("cancel needs a target id");
      break;
  }
  return obj as ClientRequest;
}

function checkSpec(spec: unknown): asserts spec is SessionSpec {
  if (typeof spec !== "object" || spec === null || Array.isArray(spec)) throw usage("spec must be an object");
  const s = spec as Record<string, unknown>;
  for (const key of ["python", "cwd"]) {
    if (s[key] !== undefined && (typeof s[key] !== "string" || s[key] === "")) throw usage(`spec.${key} must be a non-empty string`);
  }
  for (const key of ["timeoutMs", "maxOutputBytes", "graceMs"]) checkCount(s, key, "spec.");
  checkFlag(s, "autosave", "spec.");
  checkFlag(s, "pythonGiven", "spec.");
  checkFlag(s, "existing", "spec.");
  if (s.env !== undefined) {
    if (typeof s.env !== "object" || s.env === null || Array.isArray(s.env)) throw usage("spec.env must be an object of strings");
    for (const [k, v] of Object.entries(s.env)) {
      if (typeof v !== "string") throw usage(`spec.env.${k} must be a string`);
    }
  }
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

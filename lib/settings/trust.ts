// Which project config files may choose the interpreter. A ./awrepl.jsonc that sets `python` names a
// command line awrepl will run, so in a checkout you did not write, a plain `awrepl run` would run a
// command someone planted there. As with direnv and mise, such a file is used only after
// `awrepl trust` recorded it: its absolute path and the SHA-256 of its content, in the user's state
// directory (trusted.json, 0600). An edit after that is a new file and needs trusting again.
// Plain settings (limits, timeouts) need no trust.
import { readFileSync } from "node:fs";
import { writeFileAtomic } from "../core/files.ts";
import { join } from "node:path";
import { AwreplError } from "../core/errors.ts";

type TrustRecord = Record<string, string>;

export function trustFile(home: string): string {
  return join(home, "trusted.json");
}

/** SHA-256 in hex, without loading node:crypto at start-up (this module is on the CLI's hot path). */
export function contentHash(text: string): string {
  if (typeof Bun !== "undefined") return new Bun.CryptoHasher("sha256").update(text).digest("hex");
  const crypto = process.getBuiltinModule("node:crypto") as typeof import("node:crypto");
  return crypto.createHash("sha256").update(text).digest("hex");
}

function readRecords(home: string): TrustRecord {
  try {
    const value: unknown = JSON.parse(readFileSync(trustFile(home), "utf8"));
    if (typeof value !== "object" || value === null || Array.isArray(value)) return {};
    return Object.fromEntries(Object.entries(value).filter(([, v]) => typeof v === "string")) as TrustRecord;
  } catch {
    return {};
  }
}

function writeRecords(home: string, records: TrustRecord): void {
  writeFileAtomic(trustFile(home), `${JSON.stringify(records, null, 2)}\n`);
}

/** "trusted", "untrusted" (never recorded) or "changed" (recorded with other content). */
export function trustState(home: string, file: string, text: string): "trusted" | "untrusted" | "changed" {
  const recorded = readRecords(home)[file];
  if (recorded === undefined) return "untrusted";
  return recorded === contentHash(text) ? "trusted" : "changed";
}

/** Records `file` (absolute) with its current content as trusted. */
export function trust(home: string, file: string): { file: string; sha256: string } {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new AwreplError("usage", `Cannot trust ${file}: ${(err as Error).message}`);
  }
  const sha256 = contentHash(text);
  writeRecords(home, { ...readRecords(home), [file]: sha256 });
  return { file, sha256 };
}

/** Forgets `file`; false when it was not recorded. */
export function revoke(home: string, file: string): boolean {
  const records = readRecords(home);
  if (!(file in records)) return false;
  delete records[file];
  writeRecords(home, records);
  return true;
}

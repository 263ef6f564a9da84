// The session an `awrepl mcp` server uses when neither a tool call, --session nor AWREPL_SESSION names
// one: a name derived from the working directory — its base name plus a short hash of its full path,
// so that two checkouts both called `app` do not share a namespace (and a working directory).
import { createHash } from "node:crypto";
import { basename, resolve } from "node:path";

/** `<base name>-<6 hex of sha256(full path)>`; `mcp-<hash>` for `/` (where Claude Desktop starts servers). */
export function sessionNameForDir(dir: string): string {
  const full = resolve(dir);
  const base = basename(full)
    .replace(/[^A-Za-z0-9._-]+/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(0, 57);
  const hash = createHash("sha256").update(full).digest("hex").slice(0, 6);
  return `${base || "mcp"}-${hash}`;
}

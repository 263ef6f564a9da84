// File-system and path helpers for the CLI's hot path, without node:fs, node:path or node:os. The one
// module that uses Bun-only APIs for speed (docs/architecture.md, "Performance rules"); everywhere else, and for the rare
// cases (Windows paths), node: modules are the fallback, loaded on first use.
//
// Why: in the compiled executable merely importing node:fs costs ~1.1–1.4 ms of CPU per start (measured
// on an empty program built with scripts/build.ts's flags), node:path ~0.3 ms, node:os ~0.3 ms, on a
// warm `awrepl -s s run "1+1"` of ~4.5 ms over the empty program's own start. Bun's native calls cost
// ~0.1–0.2 ms. (BENCHMARKS.md, "Where the time goes".)
const bun = typeof Bun !== "undefined" ? Bun : undefined;
const posix = process.platform !== "win32";

/**
 * A node: built-in, loaded synchronously on first use (process.getBuiltinModule: Bun, Node >= 20.16,
 * Deno 2). For code off the hot path that cannot await. (Under Bun this costs more than a static
 * import, ~2.5 ms for node:fs: an async path should use `await import("node:fs")` instead.)
 */
export function builtin<K extends "node:fs" | "node:path" | "node:os">(name: K): ReturnType<typeof process.getBuiltinModule<K>> {
  return process.getBuiltinModule(name);
}

/** What Bun reports as the mtime of a file it could not stat (Bun 1.4: 2^52 - 1); lib/core/fastio.test.ts pins it. */
const NO_FILE_MTIME = 2 ** 52 - 1;

/**
 * Size and mtime of a file (symbolic links followed), or null when there is none. Under Bun, a path
 * that cannot be stat'ed for any reason (ENOENT, and also ENOTDIR, EACCES on a directory above it,
 * ELOOP) is null: Bun does not say which; a file that exists but cannot be read is still found.
 */
export function statFile(path: string): { size: number; mtimeMs: number } | null {
  if (bun) {
    const file = bun.file(path);
    const mtimeMs = file.lastModified;
    if (mtimeMs >= NO_FILE_MTIME) return null;
    return { size: file.size, mtimeMs };
  }
  const st = builtin("node:fs").statSync(path, { throwIfNoEntry: false });
  return st ? { size: st.size, mtimeMs: st.mtimeMs } : null;
}

/** fs.existsSync (a directory exists too). */
export function fileExists(path: string): boolean {
  return statFile(path) !== null;
}

/** The user's home directory: $HOME where it is set (POSIX), else os.homedir(). */
export function homeDir(): string {
  const home = posix ? process.env.HOME : undefined;
  return home ? home : builtin("node:os").homedir();
}

/** node:path's posix normalisation of an already joined path. */
function normalize(path: string, keepTrailingSlash: boolean): string {
  const absolute = path.startsWith("/");
  const out: string[] = [];
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue;
    if (segment === ".." && out.length > 0 && out[out.length - 1] !== "..") out.pop();
    else if (segment !== ".." || !absolute) out.push(segment);
  }
  let body = out.join("/");
  if (keepTrailingSlash && body !== "" && path.endsWith("/")) body += "/";
  if (absolute) return `/${body}`;
  return body || (keepTrailingSlash && path.endsWith("/") ? "./" : ".");
}

/** path.join */
export function joinPath(...parts: string[]): string {
  if (!posix) return builtin("node:path").join(...parts);
  return normalize(parts.filter((p) => p !== "").join("/") || ".", true);
}

/** path.resolve (relative to process.cwd()) */
export function resolvePath(...parts: string[]): string {
  if (!posix) return builtin("node:path").resolve(...parts);
  let path = "";
  for (let i = parts.length - 1; i >= 0 && !path.startsWith("/"); i--) {
    const part = parts[i] as string;
    if (part !== "") path = path === "" ? part : `${part}/${path}`;
  }
  if (!path.startsWith("/")) path = `${process.cwd()}/${path}`;
  return normalize(path, false);
}

/** fs.readdirSync(dir): the names in a directory (dot files too); throws as it does (ENOENT, ENOTDIR, ...). */
export function listDir(dir: string): string[] {
  if (bun) return [...new bun.Glob("*").scanSync({ cwd: dir, onlyFiles: false, dot: true })];
  return builtin("node:fs").readdirSync(dir);
}

// Where `awrepl run` gets its cell: CODE, `-` (stdin), `-f FILE`, or stdin when no CODE is given and
// stdin is not a terminal (heredocs and pipes are how agents avoid shell-quoting trouble).
// node: modules are imported lazily: the hot path (`run "1+1"`) must not pay for fs or tty.
import { usageError } from "../core/errors.ts";

export type CellSource = {
  /** The CODE argument; "-" means stdin. */
  code?: string;
  /** -f FILE; "-" means stdin. */
  file?: string;
};

export type InputStreams = {
  /** True when stdin is a terminal (then a missing CODE is a usage error, not a wait for input). */
  stdinIsTTY: () => boolean | Promise<boolean>;
  readStdin: () => Promise<Uint8Array>;
};

export async function readCell(source: CellSource, io: InputStreams = processStdin): Promise<string> {
  if (source.code !== undefined && source.file !== undefined) {
    throw usageError("Give the cell as CODE or as -f FILE, not both");
  }
  if (source.file !== undefined && source.file !== "-") return readCellFile(source.file);
  if (source.code !== undefined && source.code !== "-") return source.code;
  if (source.code === undefined && source.file === undefined && (await io.stdinIsTTY())) {
    throw usageError("No code given: pass CODE, - (stdin), -f FILE, or pipe the cell on stdin");
  }
  return decodeCell(await io.readStdin(), "stdin");
}

async function readCellFile(path: string): Promise<string> {
  const { readFileSync } = await import("node:fs");
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "it is a directory" : code === "EACCES" ? "permission denied" : (err as Error).message;
    throw usageError(`Cannot read cell file ${JSON.stringify(path)}: ${why}`);
  }
  return decodeCell(bytes, `cell file ${JSON.stringify(path)}`);
}

/** Strict UTF-8 (a cell with invalid bytes is refused, not silently altered); a leading BOM is dropped. */
export function decodeCell(bytes: Uint8Array, where: string): string {
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  } catch {
    throw usageError(`The cell from ${where} is not valid UTF-8`);
  }
}

const processStdin: InputStreams = {
  async stdinIsTTY() {
    const { isatty } = await import("node:tty");
    return isatty(0);
  },
  async readStdin() {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : (chunk as Buffer));
    return Buffer.concat(chunks);
  },
};

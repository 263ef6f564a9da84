// How a worker process is started for an interpreter: a local one runs the runtime's cached bytecode
// (or its source file); any other command line gets the one-line bootstrap and the source on stdin.
import { bootstrapLine, runtimeBytecode, runtimeFile, runtimeSource } from "../runtime/source.ts";
import { type Interpreter, shellQuote } from "./interpreter.ts";

export type Launch = {
  argv: string[];
  stdinPreamble?: Buffer;
  /** The cached bytecode this launch runs, if any (a caller can drop it when it fails to start). */
  bytecode?: string;
};

/**
 * How to start a worker for `interpreter`: a local one runs the cached bytecode (or the source);
 * a remote command gets `-c BOOTSTRAP` and the source over stdin.
 */
export async function runtimeLaunch(home: string, interpreter: Interpreter, options: { bytecode?: boolean } = {}): Promise<Launch> {
  if (interpreter.local) {
    const pyc = options.bytecode === false ? null : await runtimeBytecode(home, interpreter);
    if (pyc) return { argv: [...interpreter.argv, pyc], bytecode: pyc };
    return { argv: [...interpreter.argv, await runtimeFile(home)] };
  }
  const src = await runtimeSource();
  const bootstrap = bootstrapLine(src.text);
  // ssh joins its arguments into one remote shell command line: quote the bootstrap for that shell.
  const joinsArgs = /^(ssh|slogin)$/.test((interpreter.argv[0] ?? "").split("/").pop() ?? "");
  const code = joinsArgs ? shellQuote(bootstrap) : bootstrap;
  return {
    argv: [...interpreter.argv, "-u", "-c", code],
    stdinPreamble: Buffer.concat([Buffer.from(`${src.bytes.length}\n`, "ascii"), src.bytes]),
  };
}


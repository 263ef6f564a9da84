// A RemoteSession (attach()'s) that was closed refuses every call at once with session_closed naming
// it, on every runtime the library runs on (issue 21 item 10): Bun runs the TypeScript sources, Node
// and Deno the library bundled as the npm package bundles it (scripts/build-lib.ts), here into a
// private directory. Before, `executeDetached` after close() reconnected on Bun and kept the process
// alive; on Node and Deno it failed with "write after end". Real supervisor (the compiled binary),
// real worker; each runtime gets its own state directory.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { awreplBinary, ROOT, run, testEnv, withHome } from "../harness/mod.ts";

const BUN = join(ROOT, "node_modules", ".bin", "bun");
const DENO = join(ROOT, "node_modules", ".bin", "deno");
const FIXTURE = join(ROOT, "tests", "e2e", "closed_remote_session.mjs");
/** The script attaches (starting a supervisor), closes and makes a dozen calls: seconds, on a loaded machine. */
const SCRIPT_TIMEOUT_MS = 30_000;

let bundle: string;

beforeAll(() => {
  bundle = mkdtempSync(join(tmpdir(), "awrepl-lib-bundle-"));
  // The flags of scripts/build-lib.ts (why each: there); runtime.py beside the module, as it ships.
  const built = Bun.spawnSync([BUN, "build", "lib/mod.ts", "--target=node", "--conditions=bun", "--format=esm", "--outdir", bundle], { cwd: ROOT });
  if (built.exitCode !== 0) throw new Error(`bun build lib/mod.ts failed: ${built.stderr.toString()}`);
  copyFileSync(join(ROOT, "runtime.py"), join(bundle, "runtime.py"));
}, 120_000);

afterAll(() => {
  if (bundle) rmSync(bundle, { recursive: true, force: true });
});

type Outcome = { code: string | null; message?: string; ms: number };
type ScriptRun = { code: number | null; signal: string | null; stdout: string; stderr: string; timedOut: boolean };

/** Runs the fixture with `command` until it ends by itself, or kills it after SCRIPT_TIMEOUT_MS. */
function runScript(command: string[], env: NodeJS.ProcessEnv, cwd: string): Promise<ScriptRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0] as string, command.slice(1), { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, SCRIPT_TIMEOUT_MS);
    child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

const RUNTIMES = {
  bun: { command: [BUN, FIXTURE], library: () => join(ROOT, "lib", "mod.ts") },
  node: { command: ["node", FIXTURE], library: () => join(bundle, "mod.js") },
  deno: { command: [DENO, "run", "-A", FIXTURE], library: () => join(bundle, "mod.js") },
} as const;

describe("a closed RemoteSession", () => {
  for (const [runtime, { command, library }] of Object.entries(RUNTIMES)) {
    test(`under ${runtime}: every call rejects at once with session_closed, nothing is sent, and the process ends by itself`, () =>
      withHome(async (home) => {
        const env = testEnv(home, {
          AWREPL_BIN: await awreplBinary(),
          AWREPL_LIBRARY: library(),
          DENO_DIR: join(home, "deno-dir"),
          DENO_NO_UPDATE_CHECK: "1",
          DENO_NO_PROMPT: "1",
        });
        const r = await runScript([...command], env, home);
        expect(r.stderr).toBe("");
        const outcomes = JSON.parse(r.stdout.trim().split("\n").at(-1) || "{}") as Record<string, Outcome>;
        expect(Object.keys(outcomes).length).toBe(12);
        for (const [call, o] of Object.entries(outcomes)) {
          expect([call, o.code]).toEqual([call, "session_closed"]);
          expect([call, o.message]).toEqual([call, expect.stringContaining('RemoteSession "closed" is closed')]);
          expect([call, o.ms < 100]).toEqual([call, true]);
        }
        // Nothing keeps the process alive: a call that had reconnected would.
        expect([r.timedOut, r.code]).toEqual([false, 0]);
        // The session lives on in the supervisor, and nothing of the closed one's calls ran in it.
        const back = await run(["-s", "closed", "run", "x, 'ran' in globals()"], { home });
        expect(back.stdout).toBe("(1, False)\n");
      }), 60_000);
  }
});

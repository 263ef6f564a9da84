// `awrepl --self-test`: proves the contract on this machine with no network and no npm. The original
// six checks, plus a runaway C loop stopped by its timeout, fd-level output captured (os.write and a
// subprocess), and state surviving between two separate awrepl processes (through the supervisor).
// Everything runs under a private temporary state directory that is removed at the end, and every
// process it starts is ended (the supervisor included). Text mode prints a line per check as it
// ends; `--json` prints one object at the end instead (SelfTestReport), with the same exit status.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SessionPool } from "../session/pool.ts";
import type { ExecResult } from "../protocol/result.ts";
import { ReplSession } from "../session/session.ts";
import type { SessionOptions } from "../protocol/api.ts";
import { version } from "../../package.json";
import { durationMs } from "../core/units.ts";
import { useColor } from "./render.ts";
import { writeStream } from "./stdio.ts";

export type SelfTestOptions = { python?: string; env: NodeJS.ProcessEnv; json?: boolean };

/** One check's outcome; `detail` says why a check failed. */
export type CheckReport = { name: string; ok: boolean; ms: number; detail?: string };
/** What `--self-test --json` prints: `python` is null when the interpreter could not be started. */
export type SelfTestReport = { ok: boolean; version: string; python: { version: string | null; executable: string } | null; passed: number; total: number; checks: CheckReport[] };

type Check = { name: string; run: (ctx: CheckContext) => Promise<void> };
type CheckContext = { options: SessionOptions; session: () => Promise<ReplSession>; home: string; env: NodeJS.ProcessEnv };

class CheckFailed extends Error {}

/** Prints a line of the report (a reader that goes away, as with `| head`, is not an error). */
const say = (text: string) => writeStream("stdout", text);

function expect(condition: boolean, what: string, result?: ExecResult): void {
  if (condition) return;
  const detail = result ? ` (status ${result.status}, stdout ${JSON.stringify(result.stdout)}, exception ${JSON.stringify(result.exception)})` : "";
  throw new CheckFailed(`${what}${detail}`);
}

const checks: Check[] = [
  {
    name: "Variables persist across calls",
    async run({ session }) {
      const s = await session();
      await s.execute("items = [1, 2, 3]");
      const r = await s.execute("print(len(items))");
      expect(r.status === "ok" && r.stdout === "3\n", "the second call should print 3", r);
    },
  },
  {
    name: "Syntax error doesn't kill session",
    async run({ session }) {
      const s = await session();
      const bad = await s.execute("def broken(:");
      expect(bad.status === "error" && (bad.exception ?? "").startsWith("SyntaxError"), "a SyntaxError should be reported", bad);
      const r = await s.execute("1 + 1");
      expect(r.status === "ok" && r.value === "2", "the session should still evaluate 1 + 1", r);
    },
  },
  {
    name: "Exception doesn't kill session",
    async run({ session }) {
      const s = await session();
      await s.execute("kept = 'still here'");
      const bad = await s.execute("1 / 0");
      expect(bad.status === "error" && (bad.exception ?? "").startsWith("ZeroDivisionError"), "a ZeroDivisionError should be reported", bad);
      const r = await s.execute("kept");
      expect(r.status === "ok" && r.value === "'still here'", "the namespace should survive the exception", r);
    },
  },
  {
    name: "Output truncation works",
    async run({ session }) {
      const s = await session();
      const r = await s.execute("print('x' * 1000)", { maxOutputBytes: 50 });
      expect(r.truncated && r.truncated_bytes === 1001 - 50, "1001 bytes under a 50-byte limit should drop exactly 951", r);
      expect(r.stdout.startsWith("x".repeat(25)) && r.stdout.length < 200, "the kept output should be the head, a marker and the tail", r);
    },
  },
  {
    name: "variables() lists bound names",
    async run({ session }) {
      const s = await session();
      await s.execute("alpha = 1\nbeta = 'two'");
      const vars = await s.variables();
      expect("alpha" in vars && "beta" in vars, `variables() should list alpha and beta, got ${JSON.stringify(Object.keys(vars))}`);
      expect(!("print" in vars) && !("__builtins__" in vars), "variables() should not list builtins");
    },
  },
  {
    name: "Pool sessions are isolated",
    async run({ options }) {
      await using pool = new SessionPool(options);
      const a = pool.getSession(await pool.createSession("self-test-a"));
      const b = pool.getSession(await pool.createSession("self-test-b"));
      await a.execute("secret = 42");
      const r = await b.execute("secret");
      expect(r.status === "error" && (r.exception ?? "").startsWith("NameError"), "session b should not see session a's variable", r);
    },
  },
  {
    name: "Runaway C loop is stopped by its timeout",
    async run({ options }) {
      await using s = await ReplSession.start("self-test-timeout", { ...options, graceMs: 500 });
      await s.execute("before = 1");
      const r = await s.execute("sum(range(10**12))", { timeoutMs: 1000 });
      expect(r.status === "timeout", "sum(range(10**12)) with a 1 s timeout should end with status timeout", r);
      const after = await s.execute("2 + 2");
      expect(after.status === "ok" && after.value === "4", "the session should work after the timeout", after);
    },
  },
  {
    name: "os.write and subprocess output is captured",
    async run({ session }) {
      const s = await session();
      const code = "import os, subprocess, sys\nos.write(1, b'from-fd\\n')\nsubprocess.run([sys.executable, '-c', 'print(\"from-child\")'])";
      const r = await s.execute(code);
      expect(r.status === "ok" && r.stdout.includes("from-fd\n") && r.stdout.includes("from-child\n"), "fd 1 output of the cell and of a child process should be in stdout", r);
    },
  },
  {
    name: "A variable survives between two awrepl processes",
    async run({ env }) {
      const name = "self-test-persist";
      const first = await awreplProcess(["-s", name, "run", "survivor = 'from process one'"], env);
      expect(first.code === 0, `the first awrepl process should exit 0, got ${first.code}: ${first.stderr.trim()}`);
      const second = await awreplProcess(["-s", name, "run", "survivor"], env);
      expect(second.code === 0 && second.stdout === "'from process one'\n", `the second awrepl process should print the variable, got ${JSON.stringify(second.stdout)} (${second.stderr.trim()})`);
    },
  },
];

/** The command that re-runs this awrepl: the binary itself, or bun plus main.ts when run from source. */
function selfCommand(): string[] {
  const script = process.argv[1];
  const compiled = !script || script.startsWith("/$bunfs/") || /^[A-Z]:[\\/]~BUN[\\/]/i.test(script) || script === process.execPath;
  return compiled ? [process.execPath] : [process.execPath, script];
}

function awreplProcess(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const [cmd, ...pre] = selfCommand() as [string, ...string[]];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, [...pre, ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => (stdout += s));
    child.stderr.setEncoding("utf8").on("data", (s: string) => (stderr += s));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

export async function selfTest(options: SelfTestOptions): Promise<number> {
  const home = mkdtempSync(join(tmpdir(), "awrepl-self-test-"));
  const env: NodeJS.ProcessEnv = { ...options.env, AWREPL_HOME: home };
  delete env.AWREPL_SESSION;
  if (options.python !== undefined) env.AWREPL_PYTHON = options.python;
  const python = options.python ?? options.env.AWREPL_PYTHON;
  const sessionOptions: SessionOptions = { home, timeoutMs: 30_000, maxOutputBytes: 65_536, ...(python ? { python } : {}) };
  const color = !options.json && useColor(process.stdout.isTTY, options.env);
  const paint = (code: string, text: string) => (color ? `\x1b[${code}m${text}\x1b[0m` : text);
  // Text mode says each line as it comes; JSON mode says nothing until its one object.
  const text = options.json ? async (_line: string) => {} : say;
  const reports: CheckReport[] = [];
  const record = async (report: CheckReport) => {
    reports.push(report);
    const line = report.ok ? `  ${paint("32", "PASS")}  ${report.name}\n` : `  ${paint("31", "FAIL")}  ${report.name}: ${report.detail}\n`;
    await text(line);
  };

  let shared: ReplSession | undefined;
  const ctx: CheckContext = {
    options: sessionOptions,
    home,
    env,
    session: async () => (shared ??= await ReplSession.start("self-test", sessionOptions)),
  };
  let interpreter: SelfTestReport["python"] = null;
  try {
    // Say which interpreter is under test; a failure to start it shows up in every check below.
    try {
      const s = await ctx.session();
      const info = s.info();
      interpreter = { version: info.pythonVersion, executable: s.interpreter.executable ?? info.python };
      await text(`awrepl ${version} self-test: Python ${info.pythonVersion ?? "?"} (${interpreter.executable})\n\n`);
    } catch {
      await text(`awrepl ${version} self-test: Python ${python ?? "(default)"} could not be started\n\n`);
    }
    for (const check of checks) {
      const started = performance.now();
      try {
        await check.run(ctx);
        await record({ name: check.name, ok: true, ms: durationMs(performance.now() - started) });
      } catch (err) {
        const detail = err instanceof Error ? err.message : String(err);
        await record({ name: check.name, ok: false, ms: durationMs(performance.now() - started), detail });
      }
    }
  } finally {
    await shared?.close();
    const started = performance.now();
    try {
      const { stopDaemon } = await import("../client/daemon.ts");
      await stopDaemon({ env });
    } catch (err) {
      await record({ name: "Stopping the self-test's supervisor", ok: false, ms: durationMs(performance.now() - started), detail: (err as Error).message });
    }
    rmSync(home, { recursive: true, force: true });
  }
  // A supervisor that could not be stopped is one more failed entry, so it counts in both numbers.
  const passed = reports.filter((r) => r.ok).length;
  const total = reports.length;
  const ok = passed === total;
  if (options.json) {
    const report: SelfTestReport = { ok, version, python: interpreter, passed, total, checks: reports };
    await say(`${JSON.stringify(report)}\n`);
  } else {
    await say(`\nSELF-TEST: awrepl ${ok ? "ok" : "FAILED"} (${passed}/${total})\n`);
  }
  return ok ? 0 : 1;
}

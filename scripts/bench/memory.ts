// awrepl's idle memory: the supervisor with one idle session, with nine, and with none left; each
// worker's RSS when idle. Read from /proc (VmRSS) after a settle, so it is what the kernel charges.
//
//   bun scripts/bench/memory.ts [--smoke]      prints its figures as JSON
import { attach } from "../../lib/client/attach.ts";
import { closeAllSessions, listSessions } from "../../lib/client/daemon.ts";
import { cleanUpHome, supervisorPid } from "./library.ts";
import type { BenchOptions } from "./lib.ts";
import { AWREPL_BIN, figure, type Figures, log, procStatusMiB, PYTHON, tempHome, withTimeout } from "./lib.ts";

const CALL_MS = 30_000;
const EXTRA_SESSIONS = 8;

async function openIdleSession(name: string, home: string, env: NodeJS.ProcessEnv): Promise<void> {
  const session = await withTimeout(attach(name, { home, python: PYTHON, clientEnv: env }), CALL_MS, `attach(${name})`);
  try {
    const result = await withTimeout(session.execute("x = 1"), CALL_MS, `first cell of ${name}`);
    if (result.status !== "ok") throw new Error(`Session ${name}: ${result.status} ${result.exception}`);
  } finally {
    await session.close(); // detaches this client; the session stays in the supervisor
  }
}

function rssOrThrow(pid: number, what: string): number {
  const mib = procStatusMiB(pid);
  if (mib === null) throw new Error(`Cannot read the RSS of ${what} (pid ${pid})`);
  return mib;
}

export async function memoryFigures(options: BenchOptions = {}): Promise<Figures> {
  const settleMs = options.smoke ? 200 : 1500;
  const { home, remove } = tempHome();
  const env = { ...process.env, AWREPL_HOME: home, AWREPL_BIN, AWREPL_PYTHON: PYTHON };
  const figures: Figures = {};
  try {
    log("memory: supervisor with one idle session");
    await openIdleSession("m0", home, env);
    const pid = await supervisorPid(home);
    if (pid === null) throw new Error("No supervisor runs after attach()");
    await Bun.sleep(settleMs);
    const one = rssOrThrow(pid, "the supervisor");
    figures.supervisor_idle_rss_mib = figure("MiB", [one], "VmRSS with one idle session");
    // VmRSS counts the executable's pages the process touched, and more of them when the file is
    // fully in the page cache (fault-around: a fresh copy of one binary measured 1.7 MiB more than
    // the same bytes in an older file). The anonymous part is the process's own memory.
    figures.supervisor_idle_rss_anon_mib = figure("MiB", [procStatusMiB(pid, "RssAnon") ?? Number.NaN], "RssAnon with one idle session (VmRSS without file pages)");

    log(`memory: ${EXTRA_SESSIONS} extra idle sessions`);
    for (let i = 1; i <= EXTRA_SESSIONS; i++) await openIdleSession(`m${i}`, home, env);
    await Bun.sleep(settleMs);
    const many = rssOrThrow(pid, "the supervisor");
    figures.supervisor_rss_per_extra_session_mib = figure("MiB", [(many - one) / EXTRA_SESSIONS], `(RSS with ${EXTRA_SESSIONS + 1} − RSS with 1) / ${EXTRA_SESSIONS}`);

    const sessions = await withTimeout(listSessions({ home }), CALL_MS, "sessions");
    const workers = sessions.map((s) => s.pid).filter((p): p is number => p !== null);
    figures.worker_idle_rss_mib = figure("MiB", workers.map((w) => rssOrThrow(w, "a worker")), `${workers.length} idle workers`);

    log("memory: supervisor after closing every session");
    await withTimeout(closeAllSessions({ home }), CALL_MS, "close --all");
    await Bun.sleep(settleMs);
    figures.supervisor_no_sessions_rss_mib = figure("MiB", [rssOrThrow(pid, "the supervisor")], "VmRSS after close --all");
  } finally {
    await cleanUpHome(home);
    remove();
  }
  return figures;
}

if (import.meta.main) {
  console.log(JSON.stringify(await memoryFigures({ smoke: process.argv.includes("--smoke") })));
}

// The library on any runtime: `node smoke.mjs`, `deno run -A smoke.mjs`, `bun smoke.mjs`, run from a
// project where `awrepl` resolves (an installed package), or with AWREPL_SMOKE_ENTRY naming another
// specifier (`npm:awrepl@0.1.0` under Deno). State goes to $AWREPL_HOME (the test's own). Prints one
// JSON line: the runtime, the file the entry resolved to, and what failed; exits 1 when a check fails.
const entry = process.env.AWREPL_SMOKE_ENTRY || "awrepl";
const home = process.env.AWREPL_HOME;
if (!home) {
  console.error("smoke.mjs: set AWREPL_HOME to a private state directory");
  process.exit(2);
}
const runtime = typeof Deno !== "undefined" ? `deno ${Deno.version.deno}` : typeof Bun !== "undefined" ? `bun ${Bun.version}` : `node ${process.version}`;
let resolved = null;
try {
  resolved = import.meta.resolve(entry);
} catch (err) {
  resolved = `unresolved: ${err}`;
}
const { ReplSession, SessionPool, attach, stopDaemon } = await import(entry);
const report = { runtime, entry, resolved };
const failures = [];
const check = (what, ok, detail) => {
  if (!ok) failures.push(`${what}: ${JSON.stringify(detail)}`);
};
try {
  // A session in this process: the runtime's Python worker, spawned by the library itself.
  const s = await ReplSession.start("smoke", { home });
  await s.execute("x = 40");
  const r = await s.execute("x + 2");
  check("ReplSession x + 2", r.value === "42" && r.status === "ok", r);
  const err = await s.execute("1/0");
  check("ReplSession exception", err.status === "error" && err.exception?.startsWith("ZeroDivisionError"), err);
  await s.close();

  const pool = new SessionPool({ home });
  // createSession returns the id, as the original's create_session; getSession takes it.
  const a = pool.getSession(await pool.createSession("a"));
  const b = pool.getSession(await pool.createSession("b"));
  await a.execute("y = 1");
  const rb = await b.execute("'y' in globals()");
  check("SessionPool isolation", rb.value === "False", rb);
  await pool.closeAll();

  // A supervisor-held session: the library starts the awrepl executable it finds (AWREPL_BIN, else
  // this platform's npm package), detaches, and finds the state again on a new attach.
  const remote = await attach("smoke-remote", { home });
  await remote.execute("x = 40");
  await remote.close(); // detaches: the session stays in the supervisor
  const again = await attach("smoke-remote", { home });
  const r2 = await again.execute("x + 2");
  check("attach round trip", r2.value === "42" && r2.status === "ok", r2);
  await again.close();
} catch (err) {
  failures.push(`threw: ${err?.stack ?? err}`);
} finally {
  try {
    report.daemonStopped = await stopDaemon({ home });
  } catch (err) {
    failures.push(`stopDaemon threw: ${err}`);
  }
}
report.ok = failures.length === 0;
if (failures.length) report.failures = failures;
console.log(JSON.stringify(report));
process.exit(failures.length ? 1 : 0);

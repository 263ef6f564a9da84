// Run by closed_remote_session.test.ts under Bun, Node and Deno: attaches to a session (AWREPL_HOME,
// the supervisor from AWREPL_BIN), closes the RemoteSession, then makes every call on it. Prints one
// JSON line: each call's error code and message (or "resolved"), and how long it took to settle.
// The process must then end by itself: a call that reconnected would keep it alive.
import { pathToFileURL } from "node:url";

const library = process.env.AWREPL_LIBRARY;
if (!library) {
  console.error("closed_remote_session.mjs: set AWREPL_LIBRARY to the library's entry module");
  process.exit(2);
}
const { attach } = await import(pathToFileURL(library).href);
const session = await attach("closed", {});
await session.execute("x = 1");
await session.close();

/** A detached cell's result, and its keepResult(): the calls that reconnected (Bun) or wrote after end (Node, Deno). */
const detached = session.executeDetached("ran = True");
const calls = {
  executeDetached: () => detached.result,
  keepResult: () => detached.keepResult(),
  execute: () => session.execute("ran = True"),
  collect: () => session.collect(0),
  variables: () => session.variables(),
  inspect: () => session.inspect("x"),
  reset: () => session.reset(),
  interrupt: () => session.interrupt(),
  complete: () => session.complete("x."),
  isComplete: () => session.isComplete("x"),
  snapshot: () => session.snapshot(),
  restore: () => session.restore(),
};
/** A call that neither resolves nor rejects within this is reported as "pending" (it must reject at once). */
const CALL_WAIT_MS = 5_000;
const outcomes = {};
for (const [name, call] of Object.entries(calls)) {
  const started = performance.now();
  let timer;
  const pending = new Promise((resolve) => (timer = setTimeout(() => resolve({ code: "pending" }), CALL_WAIT_MS)));
  const settled = call().then(
    () => ({ code: "resolved" }),
    (err) => ({ code: err?.code ?? null, message: String(err?.message ?? err) }),
  );
  outcomes[name] = await Promise.race([settled, pending]);
  clearTimeout(timer);
  outcomes[name].ms = Math.round(performance.now() - started);
}
console.log(JSON.stringify(outcomes));

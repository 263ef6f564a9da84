import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { alive, PYTHON, rejection, useWorkers, waitFor } from "../../tests/harness/mod.ts";
import { processAlive } from "../core/process.ts";
import { UndeliveredRequestError, Worker } from "./worker.ts";

const workers = useWorkers();
const startWorker = workers.start;

describe("Worker", () => {
  test("handshakes and routes a cell's events to its handlers", async () => {
    const w = await startWorker();
    expect(w.state).toBe("ready");
    expect(w.ready?.protocol).toBe(3);
    const out: string[] = [];
    let result = "";
    const done = await w.request(
      { type: "execute", code: "print('hi')\n40 + 2" },
      { output: (s, t) => out.push(`${s}:${t}`), result: (t) => (result = t) },
    );
    expect(done.status).toBe("ok");
    expect(out.join("")).toBe("stdout:hi\n");
    expect(result).toBe("42");
  });

  test("fd-level output (id null) goes to the running cell", async () => {
    const w = await startWorker();
    let text = "";
    await w.request(
      { type: "execute", code: "import os, subprocess\nos.write(1, b'raw\\n')\nsubprocess.run(['echo', 'child'])" },
      { output: (_s, t) => (text += t) },
    );
    expect(text).toContain("raw\n");
    expect(text).toContain("child\n");
  });

  test("an error event reaches the error handler", async () => {
    const w = await startWorker();
    let ename = "";
    const done = await w.request({ type: "execute", code: "1/0" }, { error: (e) => (ename = e.ename) });
    expect(done.status).toBe("error");
    expect(ename).toBe("ZeroDivisionError");
  });

  test("a line far larger than a pipe chunk arrives whole", async () => {
    const w = await startWorker();
    let result = "";
    await w.request({ type: "execute", code: "'x' * 5_000_000" }, { result: (t) => (result = t) });
    expect(result.length).toBe(5_000_002);
  });

  test("a 10 MB cell's code (far more than a pipe holds) arrives intact, and requests behind it keep their order", async () => {
    const w = await startWorker();
    // A string literal of 10 MB with a checkable pattern: the runtime must read every byte, in order.
    const body = "0123456789abcdef".repeat(655_360);
    const big = w.request({ type: "execute", code: `import hashlib\ns = '${body}'\n(len(s), hashlib.sha256(s.encode()).hexdigest())` });
    let bigResult = "";
    const followers = [1, 2, 3].map((n) => {
      let value = "";
      return w.request({ type: "execute", code: `${n} * 7` }, { result: (t) => (value = t) }).then(() => value);
    });
    const done = await w.request({ type: "execute", code: "'after'" });
    expect(done.status).toBe("ok");
    expect((await big).status).toBe("ok");
    const again = await w.request(
      { type: "execute", code: `import hashlib\n(len(s), hashlib.sha256(s.encode()).hexdigest())` },
      { result: (t) => (bigResult = t) },
    );
    expect(again.status).toBe("ok");
    const expected = createHash("sha256").update(body).digest("hex");
    expect(bigResult).toBe(`(${body.length}, '${expected}')`);
    expect(await Promise.all(followers)).toEqual(["7", "14", "21"]);
  });

  test("exit rejects every pending request once, naming the code; later sends fail fast", async () => {
    const w = await startWorker();
    const first = w.request({ type: "execute", code: "import os; os._exit(3)" });
    const second = w.request({ type: "variables" });
    const [e1, e2] = await Promise.all([rejection(first), rejection(second)]);
    expect(e1.code).toBe("worker_died");
    expect(e1.message).toContain("exited with code 3");
    expect(e2).toBe(e1);
    expect(w.state).toBe("dead");
    const later = await rejection(w.request({ type: "variables" }));
    expect(later.code).toBe("worker_died");
  });

  test("a request written after the process is gone (its exit not seen yet) is rejected as undelivered", async () => {
    // A one-thread fake runtime, so its stdin closes the moment it is a zombie (no watchdog holds it).
    const fake = "import json\nprint(json.dumps({'event': 'ready', 'protocol': 3, 'python': '3', 'capabilities': []}), flush=True)\ninput()";
    const w = await Worker.start({ argv: [PYTHON, "-c", fake] });
    workers.track(w);
    process.kill(w.pid, "SIGKILL");
    // No turn of the event loop until it is gone: the worker cannot have seen the exit.
    const deadline = performance.now() + 5000;
    while (processAlive(w.pid)) if (performance.now() > deadline) throw new Error("the fake runtime did not die within 5 s");
    expect(w.state).toBe("ready");
    const err = await rejection(w.request({ type: "variables" }));
    expect(err).toBeInstanceOf(UndeliveredRequestError);
    expect(err.code).toBe("worker_died");
    expect(err.message).toContain("was killed by signal SIGKILL before it got the variables request");
    // Once the death is seen, a request never leaves: undelivered too.
    expect(await rejection(w.request({ type: "list_names" }))).toBeInstanceOf(UndeliveredRequestError);
  });

  test("a SIGKILL from outside is reported with its signal", async () => {
    const w = await startWorker();
    const pending = w.request({ type: "execute", code: "import time; time.sleep(30)" });
    process.kill(w.pid, "SIGKILL");
    const err = await rejection(pending);
    expect(err.message).toContain("SIGKILL");
  });

  test("kill() ends the whole process group, subprocesses included", async () => {
    const w = await startWorker();
    let childPid = 0;
    await w.request(
      { type: "execute", code: "import subprocess; p = subprocess.Popen(['sleep', '60']); p.pid" },
      { result: (t) => (childPid = Number(t)) },
    );
    expect(alive(childPid)).toBe(true);
    w.kill();
    await w.exited;
    await waitFor(() => !alive(childPid), 5000, "the subprocess to die");
    expect(alive(w.pid)).toBe(false);
  });

  test("close() shuts the worker down and leaves no process", async () => {
    const w = await startWorker();
    await w.close();
    expect(w.state).toBe("closed");
    await waitFor(() => !alive(w.pid), 5000, "the worker to exit");
    const err = await rejection(w.request({ type: "variables" }));
    expect(err.code).toBe("worker_closed");
  });

  test("a command that does not exist is no_interpreter", async () => {
    const err = await rejection(Worker.start({ argv: ["/nonexistent/python3"] }));
    expect(err.code).toBe("no_interpreter");
    expect(err.message).toContain("/nonexistent/python3");
  });

  test("a command that exits before ready is no_interpreter with its stderr", async () => {
    const err = await rejection(Worker.start({ argv: [PYTHON, "-c", "import no_such_module_here"] }));
    expect(err.code).toBe("no_interpreter");
    expect(err.message).toContain("No module named");
  });

  test("a command that never sends ready times out and is killed", async () => {
    const err = await rejection(Worker.start({ argv: [PYTHON, "-c", "import time; time.sleep(60)"], startTimeoutMs: 300 }));
    expect(err.code).toBe("no_interpreter");
    expect(err.message).toContain("did not get ready within 300 ms (is it a Python interpreter?)");
  });

  test("a start failure names the user's command (label), not the bootstrap, with one line of its stderr", async () => {
    const bootstrap = ["-u", "-c", "import os; os.write(2, b'usage: not python\\nsecond line\\n'); os._exit(1)"];
    const err = await rejection(Worker.start({ argv: [PYTHON, ...bootstrap], label: "my-python --flag" }));
    expect(err.code).toBe("no_interpreter");
    expect(err.message).toBe('Python command "my-python --flag" exited with code 1 before it was ready (is it a Python interpreter?): usage: not python');
    const slow = await rejection(Worker.start({ argv: ["sh", "-c", "exec sleep 100"], label: "sh -c 'exec sleep 100'", startTimeoutMs: 300 }));
    expect(slow.message).toBe(`Python command "sh -c 'exec sleep 100'" did not get ready within 300 ms (is it a Python interpreter?)`);
  });
});

describe("Worker: cleanup, facts, heartbeat", () => {
  test("the EOF of the protocol channel is the worker's death, reported at once (issue 15 item 8)", async () => {
    // No watchdog, so the runtime would live on without its channel: the host's rule must end it.
    const w = await startWorker({ env: { ...process.env, AWREPL_NO_WATCHDOG: "1" } });
    const t0 = performance.now();
    const pending = w.request({ type: "execute", code: "import os, time\nos.closerange(3, os.sysconf('SC_OPEN_MAX'))\ntime.sleep(60)" });
    const err = await rejection(pending);
    const ms = performance.now() - t0;
    expect(err.code).toBe("worker_died");
    expect(err.message).toContain("closed its protocol channel");
    expect(w.exit?.reason).toContain("closed its protocol channel");
    expect(ms).toBeLessThan(5_000); // not the cell's 60 s: said at once (typically a few ms)
    await waitFor(() => !processAlive(w.pid), 5000, "the worker to be ended");
  });

  test("info() and ping(): the worker's own facts, answered in band", async () => {
    const w = await startWorker();
    expect(await w.ping(2_000)).toBe(true);
    const facts = await w.info();
    expect(facts?.pid).toBe(w.pid);
    expect(facts?.own_group).toBe(true);
    expect(facts?.cwd).toBe(process.cwd());
    expect(facts?.rss).toBeGreaterThan(1 << 20);
    expect(w.facts).toEqual(facts);
    expect(w.factsAt).toBeGreaterThan(0);
  });

  test("info() during a C loop gives the last facts instead of waiting; ping() says false", async () => {
    const w = await startWorker();
    const first = await w.info();
    const spin = w.request({ type: "execute", code: "sum(range(10**12))" }).catch(() => undefined);
    await Bun.sleep(300);
    const t0 = performance.now();
    expect(await w.info(300)).toEqual(first);
    expect(await w.ping(300)).toBe(false);
    expect(performance.now() - t0).toBeLessThan(5_000);
    w.kill();
    await spin;
  });

  test("behind a transport, kill() ends a C loop in band: exit now, stdin closed, its children gone", async () => {
    // A local python marked as a transport: killing the local process group is not used first.
    const w = await startWorker({ kind: "transport" });
    let child = 0;
    await w.request({ type: "execute", code: "import subprocess; p = subprocess.Popen(['sleep', '60']); p.pid" }, { result: (t) => (child = Number(t)) });
    const spin = rejection(w.request({ type: "execute", code: "sum(range(10**12))" }));
    await Bun.sleep(300);
    w.kill();
    expect((await spin).code).toBe("worker_died");
    await waitFor(() => !processAlive(child), 5000, "the cell's child to end");
    expect(w.exit?.signal ?? w.exit?.code).not.toBeNull();
  });

  test("a silent idle worker behind a transport is declared lost, named, within a few heartbeats", async () => {
    const w = await startWorker({ kind: "transport", heartbeat: { intervalMs: 200, timeoutMs: 1_000 } });
    await Bun.sleep(600);
    expect(w.state).toBe("ready"); // pings answered
    process.kill(w.pid, "SIGSTOP"); // silent, as behind a partition
    const t0 = performance.now();
    await w.exited;
    const ms = performance.now() - t0;
    expect(w.exit?.reason).toContain("was lost: no answer to the heartbeat");
    expect(ms).toBeLessThan(10_000);
    const err = await rejection(w.request({ type: "variables" }));
    expect(err.message).toContain("no answer to the heartbeat");
    await waitFor(() => !processAlive(w.pid), 5000, "the stopped worker to be killed");
  });
});

describe("Worker framing", () => {
  test("lines that are not frames (JSON or not) are kept for diagnostics and do not stop the protocol", async () => {
    // A fake runtime: noise, a JSON value that is not an event, then a proper handshake and replies.
    const fake = [
      "import os, sys, json",
      "out = os.dup(1)",
      "os.write(out, b'banner line\\nnull\\n5\\n[1]\\n')",
      "os.write(out, json.dumps({'event': 'ready', 'protocol': 3, 'python': '3', 'capabilities': []}).encode() + b'\\n')",
      "for line in sys.stdin:",
      "    req = json.loads(line)",
      "    if req.get('type') == 'shutdown': break",
      "    reply = json.dumps({'event': 'done', 'id': req['id'], 'status': 'ok', 'names': ['é' * 3]}).encode()",
      // Split the reply mid-character across two writes to exercise partial chunks.
      "    os.write(out, reply[:len(reply) // 2 + 1]); os.write(out, reply[len(reply) // 2 + 1:] + b'\\n')",
    ].join("\n");
    const w = await Worker.start({ argv: [PYTHON, "-c", fake] });
    workers.track(w);
    const done = await w.request({ type: "list_names" });
    expect(done.names).toEqual(["ééé"]);
    expect(w.diagnostics()).toContain("banner line");
  });
});

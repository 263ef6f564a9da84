// Issue 15 item 8: a cell that closes the worker's private fds. The runtime keeps its channel, pump
// and watchdog fds at the top of the fd table, so the usual patterns (os.close(3), closerange(3, 1024),
// a loop closing 3..255) do not reach them and the session lives on; code that closes every fd up to
// the limit cuts the channel, and the host then sees its EOF at once (the host's rule: that EOF is the
// worker's death; lib/worker tests it).
import { afterEach, describe, expect, test } from "bun:test";
import { closeAll, Runtime, sleep } from "../harness/mod.ts";

afterEach(closeAll);

describe("a cell that closes the worker's fds", () => {
  for (
    const code of [
      "import os\nos.close(3)",
      "import os\nos.closerange(3, 1024)",
      "import os\nfor fd in range(3, 256):\n    try:\n        os.close(fd)\n    except OSError:\n        pass",
    ]
  ) {
    test(`${JSON.stringify(code.split("\n").slice(1).join("; ").slice(0, 40))}: the session lives on`, async () => {
      const rt = await Runtime.start();
      await rt.request({ type: "list_names" }); // the first request starts the watchdog: its fds count too
      const r = await rt.exec(code);
      expect(r.done.status).toBe(r.error ? "error" : "ok"); // os.close(3) may raise EBADF: a plain error
      const after = await rt.exec("print('still here')\n6 * 7");
      expect(after.stdout).toBe("still here\n");
      expect(after.result).toBe("42");
      expect((await rt.exec("import subprocess\nsubprocess.run(['echo', 'fd out'])")).rawStdout).toContain("fd out");
    });
  }

  test("the protocol fds are high, close-on-exec, and a file a cell opens never lands on one", async () => {
    const rt = await Runtime.start();
    await rt.request({ type: "list_names" });
    const r = await rt.exec(
      "import os, fcntl\nfds = sorted(int(f) for f in os.listdir('/proc/self/fd'))\nf = open(os.devnull)\n" +
        "high = [fd for fd in fds if fd > 1000]\nprint(len(high), f.fileno() < 1000, all(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC for fd in high))",
    );
    const [count, low, cloexec] = r.stdout.trim().split(" ");
    expect(Number(count)).toBeGreaterThanOrEqual(8); // requests, events, two pumps (2 each), watchdog (2)
    expect(low).toBe("True");
    expect(cloexec).toBe("True");
  });

  test("closing every fd up to the limit cuts the channel: the host sees its EOF at once", async () => {
    const rt = await Runtime.start();
    await rt.request({ type: "list_names" });
    let endedAt = -1;
    const t0 = performance.now();
    rt.proc.stdout?.once("end", () => {
      endedAt = performance.now() - t0;
    });
    rt.send({ type: "execute", id: "c", code: "import os, time\nos.closerange(3, os.sysconf('SC_OPEN_MAX'))\ntime.sleep(30)" });
    for (let i = 0; i < 500 && endedAt < 0; i++) await sleep(10);
    expect(endedAt).toBeGreaterThanOrEqual(0);
    // Its watchdog lost its pipes too: the runtime is ended, not left sleeping.
    expect(await rt.waitExit(5_000)).toBe(true);
    console.log(`closerange(3, SC_OPEN_MAX): the host saw EOF after ${endedAt.toFixed(0)} ms`);
  });
});

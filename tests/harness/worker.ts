// Workers in tests: a fixture that gives each test a private state directory and ends every worker
// it started (or was handed) after the test, process group and all.
import { afterEach, beforeEach } from "bun:test";
import { resolveInterpreter } from "../../lib/worker/interpreter.ts";
import { runtimeLaunch } from "../../lib/worker/launch.ts";
import { Worker, type WorkerOptions } from "../../lib/worker/worker.ts";
import { PYTHON, tempHome } from "./common.ts";

/** For a test file of Worker tests (call once at its top level). */
export function useWorkers() {
  const workers: Worker[] = [];
  const fixture = {
    tmp: undefined as unknown as ReturnType<typeof tempHome>,
    /** A worker for PYTHON running the runtime, as a session would start it. */
    async start(extra: Partial<WorkerOptions> = {}): Promise<Worker> {
      const interpreter = await resolveInterpreter({ python: PYTHON, home: fixture.tmp.home });
      const launch = await runtimeLaunch(fixture.tmp.home, interpreter);
      return fixture.track(await Worker.start({ argv: launch.argv, stdinPreamble: launch.stdinPreamble, kind: launch.kind, ...extra }));
    },
    /** Ends `worker` after the test too. */
    track(worker: Worker): Worker {
      workers.push(worker);
      return worker;
    },
  };
  beforeEach(() => {
    fixture.tmp = tempHome();
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) {
      w.kill();
      await w.exited;
    }
    fixture.tmp.remove();
  });
  return fixture;
}

// What changes when awrepl runs on a terminal: colour (and NO_COLOR), and a missing CODE that must not
// wait for typed input. A pseudo-terminal comes from util-linux's `script`.
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { awreplBinary, run, withHome } from "../harness/mod.ts";

const SCRIPT = "/usr/bin/script";

/** Runs `awrepl args` on a pseudo-terminal; the result's stdout is what the terminal showed. */
async function onTerminal(home: string, args: string[], env: Record<string, string> = {}) {
  const binary = await awreplBinary();
  const quoted = [binary, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  // The harness sets NO_COLOR for every test; here the terminal decides, so it is unset first.
  const assignments = Object.entries(env).map(([k, v]) => `${k}='${v}'`);
  const command = `env -u NO_COLOR ${assignments.join(" ")} ${quoted}`;
  // `script` runs the command on a new terminal; -e passes its exit status through.
  return run([], { home, wrap: [SCRIPT, "-qec", command, "/dev/null"] });
}

// util-linux's script(1) gives the binary a real terminal (Debian: bsdutils, an Essential package, so
// always present there); BSD/macOS script takes other flags, so elsewhere these tests do not run.
describe.skipIf(!existsSync(SCRIPT))("awrepl on a terminal", () => {
  test("the error line is red; NO_COLOR turns colour off", () =>
    withHome(async (home) => {
      const coloured = await onTerminal(home, ["run", "1/0"], { TERM: "xterm" });
      expect(coloured.code).toBe(1);
      expect(coloured.stdout).toContain("\x1b[1;31mZeroDivisionError: division by zero\x1b[0m");
      const plain = await onTerminal(home, ["run", "1/0"], { TERM: "xterm", NO_COLOR: "1" });
      expect(plain.code).toBe(1);
      expect(plain.stdout).toContain("ZeroDivisionError: division by zero");
      expect(plain.stdout).not.toContain("\x1b[");
    }), 30_000);

  test("no CODE on a terminal is a usage error, not a wait for input", () =>
    withHome(async (home) => {
      const r = await onTerminal(home, ["run"]);
      expect(r.code).toBe(2);
      expect(r.stdout).toContain("No code given");
    }), 30_000);
});

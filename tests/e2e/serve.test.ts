// `awrepl serve` in a real terminal (tmux): multi-line cells, completion, history across runs, Ctrl-C,
// Ctrl-D, meta commands, NO_COLOR and a narrow terminal. Each test has its own AWREPL_HOME and its own
// tmux server, both torn down afterwards.
import { afterEach, beforeAll, describe, expect, test } from "bun:test";
import { awreplBinary, cleanupHome, makeHome, prompts, run, start, testEnv, TmuxPane } from "../harness/mod.ts";

let binary = "";
let home = "";
let panes: TmuxPane[] = [];

beforeAll(async () => {
  binary = await awreplBinary();
}, 300_000);

afterEach(async () => {
  for (const pane of panes) pane.kill();
  panes = [];
  const done = home;
  home = "";
  if (done) await cleanupHome(done);
}, 30_000); // stopping a supervisor and waiting for its workers can take a while on a busy machine

function serve(args: string[] = [], options: { width?: number; env?: Record<string, string | undefined> } = {}): TmuxPane {
  home ||= makeHome();
  const pane = new TmuxPane([binary, ...args, "serve"], { width: options.width, env: testEnv(home, options.env), cwd: home });
  panes.push(pane);
  return pane;
}

const PROMPT = /^>>>$/m;

/** Waits for the n-th primary prompt with the cursor on it, ready for input. */
async function ready(pane: TmuxPane, n: number): Promise<void> {
  await pane.waitFor((s) => prompts(s) >= n);
  await pane.waitForCursorAfter(">>> ");
}

describe("serve in a terminal", () => {
  test("a multi-line def continues with its indent pre-filled, ends at a blank line, and runs", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.enter("def add(a, b):");
    // The runtime says the cell is incomplete: a continuation prompt with the block's indent typed in.
    await pane.waitForCursorAfter("...     ");
    await pane.enterThen("total = a + b", "...     ");
    pane.enter("return total");
    // Nothing follows a return in its block: the next line is offered one level less.
    await pane.waitForCursorAfter("... ");
    pane.keys("Enter");
    await ready(pane, 2);
    pane.enter("add(2, 3) * 7");
    const screen = await pane.waitFor(/^35$/m);
    expect(screen).toContain(">>> def add(a, b):\n...     total = a + b\n...     return total\n");
  }, 60_000);

  test("output appears while the cell is still running; :timeout sets a deadline", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.enter("import time");
    await ready(pane, 2);
    pane.enter("for i in range(3): print('tick', i, flush=True); time.sleep(1)");
    // The first line is on screen while the cell sleeps: no new prompt yet.
    const during = await pane.waitFor(/^tick 0$/m);
    expect(during).not.toMatch(/^tick 2$/m);
    expect(prompts(during)).toBe(2);
    await pane.waitFor(/^tick 2$/m);
    await ready(pane, 3);
    pane.enter(":timeout 500");
    await pane.waitFor("Cells time out after 500 ms.");
    pane.enter("time.sleep(10)");
    await pane.waitFor(/TimeoutError/);
  }, 60_000);

  test("Backspace in the indentation removes a whole indent level", async () => {
    const pane = serve();
    await ready(pane, 1);
    await pane.enterThen("for i in range(2):", "...     ");
    await pane.enterThen("if i:", "...         ");
    await pane.enterThen("print('inner', i)", "...         ");
    pane.keys("BSpace");
    await pane.waitForCursorAfter("...     ");
    await pane.enterThen("print('outer', i)", "...     ");
    pane.keys("Enter");
    const screen = await pane.waitFor(/^outer 1$/m);
    expect(screen).toContain("outer 0\ninner 1\nouter 1"); // the screen may end right after it
  }, 60_000);

  test("pasted code: lines run in order, and an empty line inside a pasted block does not end it", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.type("def total(xs):\n    acc = 0\n\n    for x in xs:\n        acc += x\n\n    return acc\n\ntotal([1, 2, 3]) * 7\n");
    const screen = await pane.waitFor(/^42$/m);
    expect(screen).not.toContain("Error");
  }, 60_000);

  test("pasted code reads blocks as a file: blank, whitespace-only and comment lines between indented lines", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.type(
      [
        "class Shape:",
        "    def sides(self):",
        "        return 4",
        "",
        "    def area(self, a):",
        "        s = a * a",
        "",
        "", // two blank lines in a row inside the body
        "        s = s + 0",
        "    ", // whitespace only
        "# a comment at column 0",
        "        return s",
        "",
        "if Shape().sides() == 4:",
        "    kind = 'square'",
        "",
        "else:", // an else after an empty line continues the if, as in a file
        "    kind = 'other'",
        "",
        "print('area', Shape().area(3), Shape().sides(), kind)",
        "",
      ].join("\n"),
    );
    const screen = await pane.waitFor(/^area 9 4 square$/m);
    expect(screen).not.toContain("Error");
    // Three cells, one new prompt (pasted lines are read without prompts of their own).
    await ready(pane, 2);
    expect(prompts(pane.screen())).toBe(2);
  }, 60_000);

  test("Tab completes a keyword and a name from the live namespace", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.type("impo");
    pane.keys("Tab");
    await pane.waitFor(/^>>> import$/m);
    pane.enter(" collections");
    await ready(pane, 2);
    pane.enter("unusual_name_for_completion = 7");
    await ready(pane, 3);
    pane.type("unusual_na");
    pane.keys("Tab");
    await pane.waitFor(/^>>> unusual_name_for_completion$/m);
    pane.enter(" * 6");
    await pane.waitFor(/^42$/m);
    pane.type("collections.Ordered");
    pane.keys("Tab");
    await pane.waitFor(/^>>> collections\.OrderedDict/m);
  }, 60_000);

  test("history is kept per session and recalled with Up in the next serve run", async () => {
    const first = serve(["-s", "hist"]);
    await ready(first, 1);
    first.enter("marker_value = 41");
    await ready(first, 2);
    first.keys("C-d");
    await first.waitFor("[exit 0]");

    const second = serve(["-s", "hist"]);
    await ready(second, 1);
    second.keys("Up");
    await second.waitFor(/^>>> marker_value = 41$/m);
    second.keys("C-u");
    second.enter("marker_value + 1");
    // The value comes from the session the first run left alive in the supervisor.
    await second.waitFor(/^42$/m);
    second.keys("C-d");
    await second.waitFor("[exit 0]");

    // Another session's history is its own.
    const other = serve(["-s", "other"]);
    await ready(other, 1);
    other.keys("Up");
    await Bun.sleep(300);
    expect(other.cursor().before).toBe(">>> ");
  }, 90_000);

  test("Ctrl-C interrupts `while True: pass` and the session keeps its state", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.enter("kept = 'still here'");
    await ready(pane, 2);
    pane.enter("while True: pass");
    await Bun.sleep(500); // let it spin
    pane.keys("C-c");
    await pane.waitFor(/KeyboardInterrupt/);
    await ready(pane, 3);
    pane.enter("kept.upper()");
    await pane.waitFor("'STILL HERE'");
  }, 60_000);

  test("in a session busy with another client's cell, Ctrl-C while waiting drops the entered cell", async () => {
    const pane = serve(["-s", "shared"]);
    await ready(pane, 1);
    const agent = await start(["-s", "shared", "run", "import time; time.sleep(4); 'agent done'"], { home });
    await Bun.sleep(500); // the agent's cell is running now
    pane.enter("dropped = True");
    await Bun.sleep(300);
    pane.keys("C-c");
    expect((await agent.result).stdout).toBe("'agent done'\n");
    await ready(pane, 2);
    pane.enter("'dropped' in dir()");
    await pane.waitFor(/^False$/m);
  }, 60_000);

  test("Ctrl-C at the prompt abandons the line being typed", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.type("this would be a syntax error");
    pane.keys("C-c");
    await pane.waitFor("this would be a syntax error^C");
    pane.enter("6 * 7");
    const screen = await pane.waitFor(/^42$/m);
    expect(screen).not.toContain("SyntaxError");
  }, 60_000);

  test("Ctrl-D leaves a named session alive in the supervisor; the banner says how to leave", async () => {
    const pane = serve(["-s", "stays"]);
    const banner = await pane.waitFor(PROMPT);
    expect(banner).toContain("session stays");
    // The interpreter the worker runs, resolved (python3 -> python3.11 on Debian).
    expect(banner).toMatch(/Python 3\.\d+\.\d+ \(\/usr\/bin\/python3(\.\d+)?\)/);
    expect(banner).toContain("Ctrl-D");
    pane.enter("answer = 6 * 7");
    await ready(pane, 2);
    pane.keys("C-d");
    const screen = await pane.waitFor("[exit 0]");
    expect(screen).toContain("keeps running");
    const r = await run(["-s", "stays", "run", "answer"], { home });
    expect(r.stdout).toBe("42\n");
    expect(r.code).toBe(0);
  }, 60_000);

  test("a named serve outlives the supervisor it attached to: the next cell reconnects", async () => {
    const pane = serve(["-s", "again"]);
    await ready(pane, 1);
    pane.enter("1 + 1");
    await pane.waitFor(/^2$/m);
    const stop = await run(["daemon", "stop"], { home });
    expect(stop.code).toBe(0);
    await ready(pane, 2);
    pane.enter("20 + 22");
    await pane.waitFor(/^42$/m);
  }, 60_000);

  test("Ctrl-D, even at a continuation prompt, leaves and ends an unnamed session's worker", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.enter("import os; os.getpid()");
    const screen = await pane.waitFor(/^\d+$/m);
    const pid = Number(/^(\d+)$/m.exec(screen)?.[1]);
    expect(alive(pid)).toBe(true);
    // Ctrl-D leaves even from a continuation line that holds only its pre-filled indent.
    await pane.enterThen("if True:", "...     ");
    pane.keys("C-d");
    await pane.waitFor(/^\[exit 0\]$/m);
    const deadline = Date.now() + 10_000;
    while (alive(pid) && Date.now() < deadline) await Bun.sleep(50);
    expect(alive(pid)).toBe(false);
  }, 60_000);

  test("Ctrl-Z suspends serve in a job-control shell and fg brings the prompt back, line intact", async () => {
    home = makeHome();
    const shell = new TmuxPane(["bash", "--norc", "--noprofile", "-i"], { env: testEnv(home, { PS1: "$ " }), cwd: home });
    panes.push(shell);
    await shell.waitForCursorAfter("$ ");
    shell.enter(`${binary} serve`);
    await ready(shell, 1);
    shell.enter("x = 5");
    await ready(shell, 2);
    shell.type("x +");
    shell.keys("C-z");
    await shell.waitFor("Stopped");
    await shell.waitForCursorAfter("$ ");
    shell.enter("fg");
    await shell.waitForCursorAfter(">>> x +");
    shell.enter(" 2");
    await shell.waitFor(/^7$/m);
    shell.keys("C-d");
    await shell.waitForCursorAfter("$ ");
  }, 60_000);

  test("meta commands: :vars, :inspect, :reset, :help, :quit", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.enter("numbers = [3, 1, 2]");
    await ready(pane, 2);
    pane.enter(":vars");
    await pane.waitFor(/^numbers\s+(list\[int\] len 3: )?\[3, 1, 2\]$/m);
    pane.enter(":inspect numbers");
    await pane.waitFor(/^type\s+list$/m);
    await pane.waitFor(/^len\s+3$/m);
    pane.enter(":help");
    await pane.waitFor(/^:reset\s+clear the session's namespace$/m);
    // Cells get end of input on stdin; :help says so (the line may wrap).
    await pane.waitFor((s) => s.replace(/\n/g, " ").includes("input() and getpass raise EOFError, breakpoint()/pdb quits at once"));
    pane.enter(":reset");
    await pane.waitFor("Namespace cleared.");
    pane.enter("numbers");
    await pane.waitFor("NameError");
    pane.enter(":nope");
    await pane.waitFor("Unknown command :nope");
    pane.enter(":quit");
    await pane.waitFor("[exit 0]");
  }, 60_000);

  test("exit(), and a bare exit or quit, leave as in Python's REPL", async () => {
    const first = serve();
    await ready(first, 1);
    first.enter("exit(4)");
    const screen = await first.waitFor(/^\[exit 4\]$/m);
    expect(screen).not.toContain("SystemExit");
    const second = serve();
    await ready(second, 1);
    second.enter("quit");
    await second.waitFor(/^\[exit 0\]$/m);
  }, 60_000);

  test("an exception shows its traceback and the REPL goes on", async () => {
    const pane = serve();
    await ready(pane, 1);
    pane.type("def boom(): return 1 / 0");
    pane.keys("Enter", "Enter");
    await ready(pane, 2);
    pane.enter("boom()");
    const screen = await pane.waitFor("ZeroDivisionError: division by zero");
    expect(screen).toContain("Traceback (most recent call last):");
    expect(screen).toContain("in boom");
    pane.enter("print('after', end='')");
    // Output that leaves its line open does not swallow the next prompt.
    await pane.waitFor(/^after\n>>>$/m);
  }, 60_000);

  test("NO_COLOR: no colour at all; without it the prompt is coloured", async () => {
    const plain = serve([], { env: { NO_COLOR: "1" } });
    await ready(plain, 1);
    expect(plain.screen(true)).not.toMatch(/\x1b\[[0-9;]*m/);
    const colored = serve([], { env: { NO_COLOR: undefined } });
    await ready(colored, 1);
    expect(colored.screen(true)).toMatch(/\x1b\[[0-9;]*m>>>/);
  }, 60_000);

  test("a 40-column terminal: banner and help wrap between words; a wrapped line edits in place", async () => {
    const pane = serve(["-s", "narrow-session"], { width: 40 });
    const screen = await pane.waitFor(PROMPT);
    const bannerLines = screen.split("\n").slice(0, screen.split("\n").findIndex((l) => l === ">>> "));
    for (const line of bannerLines) expect(line.length).toBeLessThanOrEqual(40);
    // Joined back, the wrapped banner reads as the sentence it is: no word was cut.
    expect(bannerLines.join(" ")).toContain("Ctrl-D or :quit leaves; the session keeps running.");
    pane.enter(":help");
    const help = await pane.waitFor("Tab completes");
    for (const line of help.split("\n")) expect(line.length).toBeLessThanOrEqual(40);
    // A line longer than the terminal, typed in one go, then edited at its start: redrawn in place.
    await ready(pane, 2);
    pane.type("values = [n * n for n in range(12) if n % 2 == 0]");
    await pane.waitFor("% 2 == 0]");
    pane.keys("C-a");
    pane.enter("sq_");
    await ready(pane, 3);
    pane.enter("sq_values");
    const rows = (await pane.waitFor("[0, 4, 16, 36, 64, 100]")).split("\n");
    expect(rows.filter((r) => r.startsWith(">>> sq_values = [n * n"))).toHaveLength(1);
    expect(rows.filter((r) => r.startsWith(">>> values"))).toHaveLength(0);
  }, 60_000);
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

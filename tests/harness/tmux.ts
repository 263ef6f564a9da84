// A real terminal for `serve` tests: a private tmux server (its own -L socket) running one command in
// a pane of a fixed size; keys go in with send-keys, the screen comes back with capture-pane. Every
// wait polls the screen with a timeout and, when it gives up, says what the screen showed.
import { spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { shellQuote } from "../../lib/worker/interpreter.ts";

let counter = 0;

export type PaneOptions = { width?: number; height?: number; env: NodeJS.ProcessEnv; cwd: string };

export class TmuxPane {
  readonly socket = `awrepl-serve-${process.pid}-${++counter}`;

  /**
   * Runs `argv` in a new pane. The command's environment is given on its command line (`env -i ...`),
   * so only the pane's processes carry it, not the tmux server. After the command exits the pane shows
   * `[exit N]` and stays open for a final capture.
   */
  constructor(argv: string[], options: PaneOptions) {
    const env = Object.entries(options.env)
      .filter((e): e is [string, string] => e[1] !== undefined && /^[A-Za-z_][A-Za-z0-9_]*$/.test(e[0]))
      .map(([k, v]) => shellQuote(`${k}=${v}`));
    const command = `cd ${shellQuote(options.cwd)} && env -i ${env.join(" ")} TERM=xterm-256color ${argv.map(shellQuote).join(" ")}; echo "[exit $?]"; sleep 600`;
    this.tmux("new-session", "-d", "-x", String(options.width ?? 100), "-y", String(options.height ?? 30), "sh", "-c", command);
  }

  /** Presses keys by tmux name (Enter, Tab, Up, C-c, C-d). */
  keys(...keys: string[]): void {
    this.tmux("send-keys", "-t", "0", ...keys);
  }

  /** Types text literally. */
  type(text: string): void {
    this.tmux("send-keys", "-t", "0", "-l", text);
  }

  /** Types a line and presses Enter. */
  enter(text: string): void {
    this.type(text);
    this.keys("Enter");
  }

  /**
   * Types a line, presses Enter, and waits for the next line to begin with exactly `before` ahead of
   * the cursor. Looking at the cursor alone could match the line as it was before the keys arrived
   * (a continuation prompt looks the same on the line before and after), and typing on then races
   * the REPL; so a new line must have appeared too.
   */
  async enterThen(text: string, before: string, timeoutMs = 20_000): Promise<void> {
    const lines = this.screen().split("\n").length;
    this.enter(text);
    await this.waitForCursorAfter(before, timeoutMs, () => this.screen().split("\n").length > lines);
  }

  /** The screen (and scrollback) as text; with `escapes`, colours and attributes as SGR sequences. */
  screen(escapes = false): string {
    return this.tmux("capture-pane", "-p", "-t", "0", "-S", "-500", ...(escapes ? ["-e"] : [])).replace(/\n+$/, "");
  }

  /** Waits until the screen matches; returns the screen. */
  async waitFor(match: string | RegExp | ((screen: string) => boolean), timeoutMs = 20_000): Promise<string> {
    const test = typeof match === "function" ? match : typeof match === "string" ? (s: string) => s.includes(match) : (s: string) => match.test(s);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const screen = this.screen();
      if (test(screen)) return screen;
      if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${String(match)}; the screen shows:\n${screen}`);
      await Bun.sleep(50);
    }
  }

  /** Where the cursor is, and the text of its line up to the cursor (trailing spaces included). */
  cursor(): { x: number; y: number; before: string } {
    const [x = 0, y = 0] = this.tmux("display-message", "-p", "-t", "0", "#{cursor_x} #{cursor_y}").trim().split(" ").map(Number);
    const line = this.tmux("capture-pane", "-p", "-t", "0").split("\n")[y] ?? "";
    return { x, y, before: line.padEnd(x).slice(0, x) };
  }

  /** Waits until the text before the cursor is `before` exactly (a prompt, a pre-filled indent). */
  async waitForCursorAfter(before: string, timeoutMs = 20_000, also: () => boolean = () => true): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const c = this.cursor();
      if (c.before === before && also()) return;
      if (Date.now() > deadline) {
        throw new Error(`Timed out after ${timeoutMs} ms waiting for the cursor after ${JSON.stringify(before)}; it is after ${JSON.stringify(c.before)}; the screen shows:\n${this.screen()}`);
      }
      await Bun.sleep(50);
    }
  }

  /** Ends the tmux server and everything in it, and removes its socket file (tmux leaves it). */
  kill(): void {
    spawnSync("tmux", ["-L", this.socket, "kill-server"], { stdio: "ignore" });
    const dir = join(process.env.TMUX_TMPDIR || "/tmp", `tmux-${process.getuid?.() ?? 0}`);
    rmSync(join(dir, this.socket), { force: true });
  }

  private tmux(...args: string[]): string {
    const r = spawnSync("tmux", ["-L", this.socket, ...args], { encoding: "utf8", timeout: 10_000 });
    if (r.status !== 0) throw new Error(`tmux ${args[0]} failed: ${r.stderr || r.error}`);
    return r.stdout;
  }
}

/** How many primary prompts the screen shows (capture-pane drops trailing spaces, so ">>>" counts). */
export function prompts(screen: string): number {
  return screen.split("\n").filter((line) => line.startsWith(">>>")).length;
}

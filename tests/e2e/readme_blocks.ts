// The README's code blocks as test cases (tests/e2e/readme.test.ts runs them): extraction from
// README.md, each block's classification, the commands of a shell transcript, and the comparison of a
// transcript's shown output with what the commands print.
//
// A block may carry a marker on the line right before its opening fence, an HTML comment GitHub does
// not show:
//
//   <!-- example: not-run: REASON -->                 not run, and why (required for what cannot run here)
//   <!-- example: KIND [key="value"]... -->           run as KIND, with options
//
// KIND is `shell` (plain commands, run with `set -e`), `transcript` (`$ ` prompts followed by the output
// they print, compared), `completion-install` (each line run in the shell it installs for, on a fresh
// HOME, then the completion file loaded) or `library` (TypeScript run under Node, Bun and Deno).
// Without a marker: a block with `$ ` prompts is a transcript, an `sh` block that calls awrepl is a
// shell block, a `ts`/`js` block a library block; anything else must be marked, so no new block goes
// unrun without a stated reason. Options (values in double quotes, `\"`, `\\` and `\n` escaped):
//
//   any="TEXT"      (repeatable) in the shown output, TEXT stands for any text within its line: a pid,
//                   a timing, a path that differs from machine to machine
//   lines="TEXT"    (repeatable) a shown output line that is just TEXT (trimmed) stands for any number of
//                   lines: output the README shortens
//   needs="A,B"     what the block needs here: `bwrap`, or Python modules (`matplotlib`, `pandas`, ...);
//                   missing, the block fails with the reason (CI installs them), never skipped
//   setup="CMD"     a shell command run in the block's working directory first (`mkdir -p .git/hooks`)
//   stdout="TEXT"   (library) what the program prints on stdout, exactly
//
// Shown paths: the test runs a section's blocks with HOME=<tmp>/home and the working directory
// <tmp>/project, and writes <tmp> as /tmp/readme in what the commands print before comparing, so the
// README may show /tmp/readme/home/... and /tmp/readme/project/... as they are.

export type Kind = "shell" | "transcript" | "completion-install" | "library";

export type Block = {
  /** 1-based line of the opening fence. */
  line: number;
  /** The fence's info string (`sh`, `ts`, ``, ...). */
  info: string;
  /** The lines between the fences, joined with "\n" (no trailing newline). */
  body: string;
  /** The nearest heading above the block (`### Running a cell`), "" before the first. */
  heading: string;
  /** The marker's text after `example:`, when the block has one. */
  marker: string | null;
};

export type Options = { any: string[]; lines: string[]; needs: string[]; setup: string[]; stdout: string | null };

export type Classified =
  | { block: Block; run: true; kind: Kind; options: Options }
  | { block: Block; run: false; reason: string };

const FENCE = /^(`{3,}|~{3,})\s*([^`\s]*)?.*$/;
const MARKER = /^<!--\s*example:\s*(.*?)\s*-->\s*$/;

/** Every fenced code block of a Markdown text, with its marker and heading; also stray markers. */
export function extractBlocks(markdown: string): { blocks: Block[]; strayMarkers: number[] } {
  const lines = markdown.split("\n");
  const blocks: Block[] = [];
  const strayMarkers: number[] = [];
  let heading = "";
  let pendingMarker: { text: string; line: number } | null = null;
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i] as string;
    const fence = FENCE.exec(text);
    if (fence) {
      const close = fence[1] as string;
      const start = i;
      const body: string[] = [];
      for (i++; i < lines.length && !(lines[i] as string).startsWith(close); i++) body.push(lines[i] as string);
      blocks.push({ line: start + 1, info: fence[2] ?? "", body: body.join("\n"), heading, marker: pendingMarker?.text ?? null });
      pendingMarker = null;
      continue;
    }
    if (pendingMarker) strayMarkers.push(pendingMarker.line);
    pendingMarker = null;
    const marker = MARKER.exec(text);
    if (marker) pendingMarker = { text: marker[1] as string, line: i + 1 };
    else if (/^#{1,6} /.test(text)) heading = text;
  }
  if (pendingMarker) strayMarkers.push(pendingMarker.line);
  return { blocks, strayMarkers };
}

const KINDS: readonly Kind[] = ["shell", "transcript", "completion-install", "library"];

/** The block's classification; throws, naming the block, when it is neither runnable nor marked. */
export function classify(block: Block): Classified {
  const where = `README.md line ${block.line} (${block.heading || "top"})`;
  if (block.marker !== null) {
    const notRun = /^not-run:\s*(.+)$/.exec(block.marker);
    if (notRun) return { block, run: false, reason: (notRun[1] as string).trim() };
    const kind = /^([a-z-]+)/.exec(block.marker)?.[1] as Kind | undefined;
    if (!kind || !KINDS.includes(kind)) throw new Error(`${where}: unknown marker "example: ${block.marker}" (kinds: ${KINDS.join(", ")}, or not-run: REASON)`);
    return { block, run: true, kind, options: parseOptions(block.marker.slice(kind.length), where) };
  }
  const options = parseOptions("", where);
  if (block.body.split("\n").some((l) => l.startsWith("$ "))) return { block, run: true, kind: "transcript", options };
  if (["sh", "bash", "shell"].includes(block.info) && /(^|[\s;|&(])awrepl\b/m.test(block.body)) return { block, run: true, kind: "shell", options };
  if (["ts", "js", "typescript", "javascript", "mjs"].includes(block.info)) return { block, run: true, kind: "library", options };
  throw new Error(`${where}: a \`${block.info || "(no language)"}\` block the test cannot classify: mark it <!-- example: KIND --> or <!-- example: not-run: REASON -->`);
}

function parseOptions(text: string, where: string): Options {
  const o: Options = { any: [], lines: [], needs: [], setup: [], stdout: null };
  const re = /\s*([a-z]+)="((?:[^"\\]|\\.)*)"/gy;
  let rest = text;
  let m: RegExpExecArray | null;
  re.lastIndex = 0;
  let end = 0;
  while ((m = re.exec(rest)) !== null) {
    end = re.lastIndex;
    const value = (m[2] as string).replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    switch (m[1]) {
      case "any":
        o.any.push(value);
        break;
      case "lines":
        o.lines.push(value);
        break;
      case "needs":
        o.needs.push(...value.split(",").map((s) => s.trim()).filter(Boolean));
        break;
      case "setup":
        o.setup.push(value);
        break;
      case "stdout":
        o.stdout = value;
        break;
      default:
        throw new Error(`${where}: unknown marker option ${m[1]}`);
    }
  }
  rest = rest.slice(end).trim();
  if (rest) throw new Error(`${where}: cannot read the marker's options at ${JSON.stringify(rest)}`);
  return o;
}

export type Step = { command: string; shown: string[]; line: number };

/**
 * A transcript's commands, each with the output lines shown after it. A command starts at a `$ ` line
 * and goes on while a quote is open, a line ends in `\`, or a here-document has not reached its
 * delimiter; the lines after it up to the next `$ ` line are its output.
 */
export function parseTranscript(body: string, firstLine = 1): Step[] {
  const lines = body.split("\n");
  const steps: Step[] = [];
  let i = 0;
  while (i < lines.length && !(lines[i] as string).startsWith("$ ")) {
    if ((lines[i] as string).trim()) throw new Error(`line ${firstLine + i}: output before the first $ prompt`);
    i++;
  }
  while (i < lines.length) {
    const start = i;
    const command = [(lines[i] as string).slice(2)];
    i++;
    for (;;) {
      const state = shellState(command.join("\n"));
      if (!state.open) {
        for (const delimiter of state.heredocs) {
          while (i < lines.length && lines[i] !== delimiter) command.push(lines[i++] as string);
          if (i >= lines.length) throw new Error(`line ${firstLine + start}: here-document ${delimiter} is not closed`);
          command.push(lines[i++] as string);
        }
        break;
      }
      if (i >= lines.length) throw new Error(`line ${firstLine + start}: the command's quote is not closed`);
      command.push(lines[i++] as string);
    }
    const shown: string[] = [];
    while (i < lines.length && !(lines[i] as string).startsWith("$ ")) shown.push(lines[i++] as string);
    while (shown.length && shown.at(-1) === "") shown.pop();
    steps.push({ command: command.join("\n"), shown, line: firstLine + start });
  }
  return steps;
}

/** Whether shell text leaves a quote (or a trailing `\`) open, and the here-documents it opens. */
export function shellState(text: string): { open: boolean; heredocs: string[] } {
  let quote: "'" | '"' | null = null;
  const heredocs: string[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (quote === "'") {
      if (c === "'") quote = null;
    } else if (quote === '"') {
      if (c === "\\") i++;
      else if (c === '"') quote = null;
    } else if (c === "\\") {
      if (i === text.length - 1) return { open: true, heredocs };
      i++;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "#" && (i === 0 || /\s/.test(text[i - 1] as string))) {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "<" && text[i + 1] === "<" && text[i + 2] !== "<") {
      const m = /^<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)\1/.exec(text.slice(i));
      if (m) {
        heredocs.push(m[2] as string);
        i += m[0].length - 1;
      }
    }
  }
  return { open: quote !== null, heredocs };
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * Null when `actual` is what the shown lines say (placeholders applied), else a message with both.
 * Trailing blank lines do not count.
 */
export function compareOutput(shown: string[], actual: string, options: Pick<Options, "any" | "lines">): string | null {
  const anyText = [...options.any].sort((a, b) => b.length - a.length);
  const parts = shown.map((line) => {
    if (options.lines.includes(line.trim())) return "(?:[^\\n]*\\n)*?";
    let re = escapeRegExp(line);
    for (const a of anyText) re = re.split(escapeRegExp(a)).join("[^\\n]*?");
    return `${re}\\n`;
  });
  const want = new RegExp(`^${parts.join("")}$`);
  const got = `${actual.replace(/\n+$/, "")}\n`.replace(/^\n$/, "");
  if (want.test(got)) return null;
  return `the README shows:\n${shown.join("\n")}\n--- the command printed:\n${got}`;
}

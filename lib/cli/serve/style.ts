// Colours and layout for the interactive REPL. Colour only where `run` uses it (a terminal, no NO_COLOR,
// not TERM=dumb); text is wrapped to the terminal's width so a narrow (40-column) terminal gets short
// lines instead of broken ones.
import { useColor } from "../render.ts";

export type Style = {
  color: boolean;
  prompt(text: string): string;
  dim(text: string): string;
  bold(text: string): string;
  error(text: string): string;
};

export function makeStyle(isTTY: boolean, env: NodeJS.ProcessEnv): Style {
  const color = useColor(isTTY, env);
  const sgr = (open: string, close: string) => (text: string) => (color ? `\x1b[${open}m${text}\x1b[${close}m` : text);
  return {
    color,
    prompt: sgr("32", "39"),
    dim: sgr("2", "22"),
    bold: sgr("1", "22"),
    error: sgr("31", "39"),
  };
}

/** Word-wraps one paragraph to `width` columns; words longer than a line are left whole. */
export function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter(Boolean)) {
    if (line === "") line = word;
    else if (line.length + 1 + word.length <= width) line += ` ${word}`;
    else {
      lines.push(line);
      line = word;
    }
  }
  if (line !== "") lines.push(line);
  return lines;
}

/** The terminal's width, or 80 when unknown (not a terminal, or a terminal that does not say). */
export function columns(stream: NodeJS.WriteStream): number {
  const n = stream.isTTY ? stream.columns : undefined;
  return n && n > 0 ? n : 80;
}

// `awrepl -s NAME watch`: a person follows a session from another terminal while an agent (or anyone)
// uses it. Each cell is shown as it starts (its number, who runs it, its code), then its output as it
// arrives, then how it ended; until Ctrl-C (exit 0). The supervisor never waits for this process: a
// watcher that reads too slowly is sent fewer lines, and told how many it missed.
import { connectSupervisor } from "../client/start.ts";
import { ExitCode } from "../core/errors.ts";
import type { WatchReply } from "../protocol/supervisor.ts";
import type { DisplayItem } from "../protocol/result.ts";
import type { CliContext } from "./context.ts";
import { writeStream } from "./stdio.ts";

export async function watchCommand(ctx: CliContext, name: string, json: boolean): Promise<number> {
  // Started if none runs: the session's next user then finds this supervisor, and this watch sees it.
  const conn = (await connectSupervisor(ctx.layout, { autostart: true, env: ctx.env }))!;
  const print = (text: string) => void writeStream("stdout", text);
  const line = (reply: object) => print(`${JSON.stringify(reply)}\n`);
  // Output of the current cell ends with a newline before the next line of ours.
  let midLine = false;
  const text = (t: string) => {
    if (t === "") return;
    print(t);
    midLine = !t.endsWith("\n");
  };
  const ours = (t: string) => text(`${midLine ? "\n" : ""}${t}\n`);
  const watch = conn.watch(name, {
    output: (stream, raw) => (json ? line({ event: stream, text: raw.text() }) : text(raw.text())),
    display: (item) => (json ? line({ event: "display", item }) : ours(describeDisplay(item))),
    watch: (reply) => (json ? line(reply) : ours(describeReply(reply))),
  });
  let stopped = false;
  const stop = () => {
    if (stopped) process.exit(ExitCode.ok); // a second Ctrl-C does not wait for the supervisor
    stopped = true;
    conn.notify({ type: "cancel", target: watch.id });
  };
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
  try {
    await watch;
    return ExitCode.ok;
  } catch (err) {
    if (stopped) return ExitCode.ok;
    throw err;
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    conn.close();
  }
}

function describeReply(reply: WatchReply): string {
  switch (reply.event) {
    case "watching":
      return `# watching session ${reply.session} (${reply.cells} cell(s) in its history; Ctrl-C to stop)`;
    case "cell": {
      const code = reply.code.replace(/\n$/, "").split("\n").map((l, i) => `${i === 0 ? ">>> " : "... "}${l}`).join("\n");
      return `# [${reply.n}] ${reply.client} ${reply.started_at}\n${code}`;
    }
    case "cell_end": {
      const outcome = reply.exception ?? reply.value;
      return `${outcome !== null ? `${outcome}\n` : ""}# [${reply.n}] ${reply.status} in ${reply.duration_ms} ms`;
    }
    case "dropped":
      return `# dropped ${reply.lines} line(s): this terminal read too slowly`;
  }
}

function describeDisplay(item: DisplayItem): string {
  const kinds = Object.keys(item).filter((k) => k.includes("/"));
  const files = kinds.filter((k) => item.metadata?.[k]).map((k) => `${k} ${item[k]}`);
  return `[display: ${files.length ? files.join(", ") : typeof item["text/plain"] === "string" ? item["text/plain"] : kinds.join(", ")}]`;
}

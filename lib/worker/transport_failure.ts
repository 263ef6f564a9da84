// What kind of process a worker command is, and why one failed, named from its argv, exit and the
// last of what it wrote: the transport (ssh, bubblewrap, docker/podman, kubectl) or the program on
// the far side, rather than "is it a Python interpreter?" for everything. Pure: Worker calls it with
// what it kept (the tail of stderr and stray stdout).
//
// Exit codes, as each tool documents them:
//   ssh        255 = ssh's own error (resolve, connect, auth, host key, connection lost); else the
//              remote command's status (127: the remote shell did not find the command).
//   bwrap      1 with a "bwrap: ..." line = the sandbox could not be set up; else the command's status.
//   docker/podman exec  125 = the exec itself failed (daemon, no such container), 126 = not
//              executable, 127 = not found.
//   kubectl    1 with "error: ..." / "Error from server" = kubectl's own failure.
import { looksLikePython } from "./interpreter.ts";
import { afterPreamble } from "./limits/preamble.ts";

export type WorkerExitLike = { code: number | null; signal: string | null };

/**
 * How a worker's process relates to the runtime: `local` is the interpreter itself; `sandbox` is
 * bubblewrap around it (its death ends the sandbox's pid namespace, everything in it); `transport` is
 * a command in front of it (ssh, docker exec, a wrapper script): killing that is not killing the
 * runtime, so the runtime is asked to exit in band first.
 */
export type WorkerKind = "local" | "sandbox" | "transport";

/** The tools whose failures are named, and which need a heartbeat (they reach another machine or container). */
export type TransportName = "ssh" | "docker" | "podman" | "kubectl";

export function transportName(argv: readonly string[]): TransportName | "bwrap" | null {
  // A limited worker's command line starts with the limits' shell preamble: the command it execs decides.
  const name = (afterPreamble(argv)[0] ?? "").split("/").pop() ?? "";
  if (name === "ssh" || name === "slogin") return "ssh";
  if (name === "bwrap" || name === "docker" || name === "podman" || name === "kubectl") return name;
  return null;
}

/** The kind of a command line when its launcher did not say. */
export function kindOf(argv: readonly string[]): WorkerKind {
  if (transportName(argv) === "bwrap") return "sandbox";
  return looksLikePython(afterPreamble(argv)[0] ?? "") ? "local" : "transport";
}

/** A traceback's last line (the exception); a transport's last line (its error comes last, after
 * warnings); else the first line (a program's usage line, a shell's "not found"). Cut short. */
function meaningfulLine(text: string, last: boolean): string {
  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
  const traceback = lines.some((l) => l.startsWith("Traceback (most recent call last)"));
  const useful = lines.filter((l) => !/^Warning: Permanently added|^\*\*|^Pseudo-terminal will not be allocated/.test(l));
  const line = (traceback || last ? useful.at(-1) : useful[0]) ?? "";
  return line.length > 200 ? `${line.slice(0, 200)}...` : line;
}

const USERNS_HINT = / (No permissions to create new namespace|Operation not permitted|setting up uid map|Creating new namespace failed)/;

function where(t: ReturnType<typeof transportName>): string {
  if (t === "ssh") return " on the remote host";
  if (t === "docker" || t === "podman" || t === "kubectl") return " in the container";
  if (t === "bwrap") return " inside the sandbox";
  return "";
}

/**
 * The transport's own failure, if the evidence shows one: ssh's 255, a bwrap setup error, docker's
 * 125, kubectl's error line. `ready`: the worker had got ready (a lost connection, not a failed start).
 */
export function transportFailure(argv: readonly string[], exit: WorkerExitLike, output: string, ready: boolean): string | null {
  const t = transportName(argv);
  if (t === "ssh" && exit.code === 255) {
    const detail = meaningfulLine(output, true);
    const what = ready ? "connection lost" : "could not reach or log in to the remote host";
    return `ssh exited 255: ${what}${detail ? `: ${detail}` : ""}`;
  }
  if (t === "bwrap") {
    const line = output.split(/\r?\n/).map((l) => l.trim()).find((l) => l.startsWith("bwrap: "));
    if (!line) return null;
    const hint = USERNS_HINT.test(line)
      ? " (user namespaces are refused on this machine: see the sysctl kernel.unprivileged_userns_clone, or AppArmor's restrict_unprivileged_userns on Ubuntu 24.04)"
      : /unrecognized option|Unknown option/.test(line)
      ? " (this bubblewrap is too old: the sandbox needs 0.8 or newer)"
      : "";
    return `The sandbox could not start (bubblewrap): ${line}${hint}`;
  }
  if ((t === "docker" || t === "podman") && exit.code === 125) {
    const detail = meaningfulLine(output, true);
    return `${t} exec failed (exit 125)${detail ? `: ${detail}` : ""}`;
  }
  if (t === "kubectl" && /^(error|Error from server)/m.test(output)) return `kubectl exec failed: ${meaningfulLine(output, true)}`;
  return null;
}

/**
 * Why a worker command that never got ready failed, in one line. `label` is the command as the user
 * gave it. "is it a Python interpreter?" is kept for a program that ran and was not Python.
 */
export function describeStartFailure(argv: readonly string[], label: string, exit: WorkerExitLike, output: string): string {
  const cmd = JSON.stringify(label);
  const transport = transportFailure(argv, exit, output, false);
  if (transport) return transport;
  const t = transportName(argv);
  const line = meaningfulLine(output, false);
  const detail = line ? `: ${line}` : "";
  if (exit.signal) return `Python command ${cmd} was killed by signal ${exit.signal} before it was ready${detail}`;
  if (/Traceback \(most recent call last\)/.test(output)) return `Python command ${cmd} failed before it was ready${detail}`;
  if (t && t !== "bwrap" && (exit.code === 127 || /command not found|No such file or directory|executable file not found/.test(line))) {
    return `The interpreter of ${cmd} was not found${where(t)}${detail}`;
  }
  return `Python command ${cmd} exited with code ${exit.code} before it was ready (is it a Python interpreter?)${detail}`;
}

/** Why a worker command did not answer within the start timeout. */
export function describeStartTimeout(argv: readonly string[], label: string, timeoutMs: number, output: string): string {
  const t = transportName(argv);
  const line = meaningfulLine(output, t !== null);
  const detail = line ? `: ${line}` : "";
  const cmd = JSON.stringify(label);
  if (t === "ssh") return `Python command ${cmd} did not get ready within ${timeoutMs} ms (no answer through ssh: the host is slow or unreachable)${detail}`;
  if (t !== null) return `Python command ${cmd} did not get ready within ${timeoutMs} ms (no answer through ${t})${detail}`;
  return `Python command ${cmd} did not get ready within ${timeoutMs} ms (is it a Python interpreter?)${detail}`;
}

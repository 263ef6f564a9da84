// Who is at the other end of the supervisor's socket. The mount table is the first barrier that keeps
// sandboxed cells away from the socket; this is the second: a sandboxed cell that reaches the socket
// through a mistake in the mount table (a bind of the runtime directory, a shared /tmp) must still not
// be able to ask the supervisor for an unsandboxed session. The kernel's SO_PEERCRED names the peer's
// pid and uid as seen from our namespaces; its /proc entry says which pid and user namespaces it runs in.
//
// Linux under Bun only (bun:ffi is the one way to reach getsockopt here). Elsewhere the check is off,
// not failing: peerCheckAvailable() lets the caller say so in its log.
import type { Socket } from "node:net";
import { readlinkSync } from "node:fs";

const SOL_SOCKET = 1;
const SO_PEERCRED = 17;
const UCRED_BYTES = 12; // struct ucred { pid_t pid; uid_t uid; gid_t gid; }

type Getsockopt = (fd: number, level: number, name: number, value: Uint8Array, length: Uint32Array) => number;

// One dlopen per process: undefined until tried, null when it cannot be had.
let libcGetsockopt: Getsockopt | null | undefined;
let ownNamespaces: { pid: string; user: string } | undefined;

function loadGetsockopt(): Getsockopt | null {
  if (libcGetsockopt !== undefined) return libcGetsockopt;
  libcGetsockopt = null;
  if (process.platform !== "linux" || typeof Bun === "undefined") return null;
  try {
    // require, not import: peerProblem is synchronous, and a static import of bun:ffi would stop this
    // module loading anywhere but Bun. `bun build --compile` still bundles a literal require.
    const ffi = require("bun:ffi") as typeof import("bun:ffi");
    const libc = ffi.dlopen("libc.so.6", {
      getsockopt: { args: ["i32", "i32", "i32", "ptr", "ptr"], returns: "i32" },
    });
    libcGetsockopt = libc.symbols.getsockopt as unknown as Getsockopt;
  } catch {
    libcGetsockopt = null;
  }
  return libcGetsockopt;
}

/** Whether peerProblem really checks anything here (false: not Linux, not Bun, or no libc to call). */
export function peerCheckAvailable(): boolean {
  return loadGetsockopt() !== null;
}

/** Why the process at the other end of `socket` must not be served, or null when it may be. */
export function peerProblem(socket: Socket): string | null {
  const getsockopt = loadGetsockopt();
  const fd: unknown = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  if (getsockopt === null || typeof fd !== "number" || fd < 0) return null;

  const ucred = new Uint8Array(UCRED_BYTES);
  const length = new Uint32Array([UCRED_BYTES]);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, ucred, length) !== 0 || length[0] !== UCRED_BYTES) {
    return `the client's credentials could not be read (SO_PEERCRED on fd ${fd} failed): the supervisor serves only clients it can identify`;
  }
  const view = new DataView(ucred.buffer);
  const pid = view.getInt32(0, true);
  const uid = view.getUint32(4, true);

  // The kernel reports 0 when the peer's pid namespace is not below ours: it runs somewhere we cannot see.
  if (pid === 0) return "the client runs in a pid namespace the supervisor cannot see (SO_PEERCRED pid 0): the supervisor serves only processes of its own namespaces";
  const euid = process.geteuid?.() ?? uid;
  if (uid !== euid) return `the client (pid ${pid}) runs as uid ${uid}, not the supervisor's uid ${euid}: the supervisor serves only its own user`;

  let peer: { pid: string; user: string };
  try {
    ownNamespaces ??= { pid: readlinkSync("/proc/self/ns/pid"), user: readlinkSync("/proc/self/ns/user") };
    peer = { pid: readlinkSync(`/proc/${pid}/ns/pid`), user: readlinkSync(`/proc/${pid}/ns/user`) };
  } catch (err) {
    // Fail closed: a peer that has exited cannot be vouched for.
    return `the client's namespaces could not be read from /proc/${pid}/ns (${(err as Error).message}); it may have exited: the supervisor serves only processes of its own namespaces`;
  }
  const own = ownNamespaces;
  const differing = (["pid", "user"] as const).filter((kind) => peer[kind] !== own[kind]);
  if (differing.length === 0) return null;
  const which = differing.map((kind) => `${peer[kind]}, not ${own[kind]}`).join("; ");
  return `the client (pid ${pid}) runs in another ${differing.join(" and ")} namespace (${which}): a sandbox; the supervisor serves only processes of its own namespaces`;
}

// Inside a sandbox with an allow list: what listens on 127.0.0.1:PROXY_PORT (the sandbox's own
// loopback, its only interface) and carries each connection to the proxy's Unix socket bound in from
// outside (net_proxy.ts). A few lines of stdlib Python started in front of the runtime: it binds the
// port first (so it listens before any cell runs), forks the forwarder (its stdio on /dev/null, so it
// holds none of the worker's pipes), and execs the runtime's own command. One process with one
// thread (it counts toward max_procs and the memory limit: ~8 MiB); it dies with the sandbox's pid
// namespace when the runtime ends, so it never outlives the worker.

/** The proxy's port on the sandbox's loopback (the sandbox has its own network namespace: nothing else is there). */
export const PROXY_PORT = 3128;
/** Where the proxy's socket is bound inside the sandbox. */
export const PROXY_SOCKET_INSIDE = "/run/awrepl/net.sock";

const FORWARDER = `
import os, selectors, socket, sys
port, path, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port))
ls.listen(128)
if os.fork():
    ls.close()
    os.execv(argv[0], argv)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1, 2):
    os.dup2(null, fd)
sel = selectors.DefaultSelector()
ls.setblocking(False)
sel.register(ls, selectors.EVENT_READ)
peer, out, eof = {}, {}, set()
def want(s):
    ev = (selectors.EVENT_READ if s not in eof and len(out[peer[s]]) < 262144 else 0) | (selectors.EVENT_WRITE if out[s] else 0)
    if ev: sel.modify(s, ev) if s in sel.get_map() else sel.register(s, ev)
    elif s in sel.get_map(): sel.unregister(s)
def close(s):
    for x in (s, peer.get(s)):
        if x is not None and x in out:
            if x in sel.get_map(): sel.unregister(x)
            x.close(); out.pop(x); peer.pop(x, None); eof.discard(x)
while True:
    for key, ev in sel.select():
        s = key.fileobj
        if s is ls:
            try:
                c, _ = ls.accept()
            except OSError:
                continue
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                u.connect(path)
            except OSError:
                c.close(); u.close(); continue
            for x in (c, u):
                x.setblocking(False)
            peer[c], peer[u], out[c], out[u] = u, c, bytearray(), bytearray()
            want(c); want(u)
            continue
        if s not in out:
            continue
        try:
            if ev & selectors.EVENT_READ:
                data = s.recv(65536)
                if data:
                    out[peer[s]] += data
                else:
                    eof.add(s)
                    if not out[peer[s]]: peer[s].shutdown(socket.SHUT_WR)
            if ev & selectors.EVENT_WRITE and out[s]:
                del out[s][:s.send(out[s])]
                if not out[s] and peer[s] in eof: s.shutdown(socket.SHUT_WR)
        except OSError:
            close(s); continue
        if s in eof and peer[s] in eof and not out[s] and not out[peer[s]]:
            close(s); continue
        want(s); want(peer[s])
`;

/** The argv in front of the runtime's own inside the sandbox: `python -I -S -c FORWARDER PORT SOCKET`, then the runtime's argv. */
export function forwarderArgv(python: string): string[] {
  return [python, "-I", "-S", "-c", FORWARDER, String(PROXY_PORT), PROXY_SOCKET_INSIDE];
}

/** The sandbox's proxy variables: pip, urllib, requests, curl and git read them. */
export function proxyEnv(): Record<string, string> {
  const url = `http://127.0.0.1:${PROXY_PORT}`;
  const env: Record<string, string> = {};
  for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"]) {
    env[name] = url;
    env[name.toLowerCase()] = url;
  }
  env.NO_PROXY = env.no_proxy = "";
  return env;
}

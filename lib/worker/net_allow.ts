// The sandbox's allow list (`--sandbox-allow HOST[:PORT]`): parsing its entries, and the rule the
// proxy (net_proxy.ts) applies to each request: is this host and port allowed, and may it be reached
// at this address. A private, loopback, link-local or otherwise special address (169.254.169.254,
// 127.0.0.0/8, 10/8, 172.16/12, 192.168/16, 100.64/10, ::1, fc00::/7, fe80::/10, and IPv4 reached
// through IPv6 mappings) is reached only when that address itself, or the exact host name that
// resolved to it, is in the list; a wildcard never opens one.
import { isIP } from "node:net";
import { AwreplError } from "../core/errors.ts";
import type { NetAllowList } from "../protocol/limits.ts";

/** One entry: a host name (lower case, no trailing dot), `*.suffix`, or an address; the ports it opens. */
export type AllowEntry = { host: string; wildcard: boolean; address: boolean; ports: number[] };

/** Ports an entry without one opens. */
const DEFAULT_PORTS = [80, 443];

/** Parses the list, or throws naming the entry that is not `host[:port]`. */
export function parseAllowList(list: NetAllowList): AllowEntry[] {
  if (!Array.isArray(list)) throw new AwreplError("usage", `The sandbox's allow list must be a list of host[:port] strings, not ${JSON.stringify(list)}`);
  return list.map(parseEntry);
}

function parseEntry(entry: unknown): AllowEntry {
  const bad = (why: string) => new AwreplError("usage", `--sandbox-allow takes host[:port] (a name, *.domain, an IPv4 address or [IPv6]), not ${JSON.stringify(entry)}: ${why}`);
  if (typeof entry !== "string" || entry === "") throw bad("empty");
  let host: string;
  let port: string | undefined;
  const v6 = /^\[([0-9a-fA-F:.]+)\](?::(\d+))?$/.exec(entry);
  if (v6) [host, port] = [v6[1] as string, v6[2]];
  else {
    const m = /^([^:/\s[\]@]+)(?::(\d+))?$/.exec(entry);
    if (!m) throw bad("a host name, optionally :port");
    [host, port] = [m[1] as string, m[2]];
  }
  const ports = port === undefined ? DEFAULT_PORTS : [Number(port)];
  if (ports.some((p) => !Number.isInteger(p) || p < 1 || p > 65535)) throw bad("the port must be 1-65535");
  host = normalHost(host);
  const address = isIP(host) !== 0;
  if (v6 && isIP(host) !== 6) throw bad("not an IPv6 address in brackets");
  const wildcard = host.startsWith("*.");
  const name = wildcard ? host.slice(2) : host;
  if (!address && !/^(?=.{1,253}$)([a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*$/.test(name)) throw bad("not a host name");
  if (wildcard && !name.includes(".")) throw bad("a wildcard needs a domain with a dot (*.example.com)");
  return { host, wildcard, address, ports };
}

/** Lower case, no trailing dot, an IPv6 address without brackets. */
export function normalHost(host: string): string {
  return host.replace(/^\[(.*)\]$/, "$1").replace(/\.$/, "").toLowerCase();
}

/** The entries that let `host:port` through (none: refused). */
export function matching(entries: readonly AllowEntry[], host: string, port: number): AllowEntry[] {
  const h = normalHost(host);
  return entries.filter((e) => e.ports.includes(port) && (e.wildcard ? h.endsWith(e.host.slice(1)) : e.host === h));
}

/**
 * May `address` (what `host` resolved to, or host itself when it is an address) be reached through
 * these matching entries: any public address, a special one only when named itself or through the
 * exact host name that resolved to it.
 */
export function addressAllowed(matched: readonly AllowEntry[], address: string): boolean {
  if (!isSpecialAddress(address)) return true;
  return matched.some((e) => !e.wildcard && (!e.address || sameAddress(e.host, address)));
}

function sameAddress(a: string, b: string): boolean {
  return isIP(a) === 4 && isIP(b) === 4 ? a === b : expand6(a) === expand6(b);
}

/** Private, loopback, link-local, unspecified, shared (CGNAT), multicast, reserved; IPv6 forms that reach IPv4. */
export function isSpecialAddress(address: string): boolean {
  const kind = isIP(address);
  if (kind === 4) return special4(address.split(".").map(Number));
  if (kind !== 6) return true; // not an address at all: never "public"
  const groups = expand6(address).split(":").map((g) => Number.parseInt(g, 16));
  const [a = 0, b = 0] = groups;
  // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), 64:ff9b::/96 (NAT64): the IPv4 address inside decides.
  const v4 = [groups[6] ?? 0, groups[7] ?? 0].flatMap((g) => [g >> 8, g & 255]);
  if (groups.slice(0, 5).every((g) => g === 0) && (groups[5] === 0xffff || groups[5] === 0)) return groups[5] === 0 && groups[6] === 0 ? true : special4(v4);
  if (a === 0x64 && b === 0xff9b) return special4(v4);
  if (a === 0x2002) return special4([b >> 8, b & 255, (groups[2] ?? 0) >> 8, (groups[2] ?? 0) & 255]); // 6to4
  if ((a & 0xfe00) === 0xfc00) return true; // fc00::/7 unique local
  if ((a & 0xffc0) === 0xfe80 || (a & 0xffc0) === 0xfec0) return true; // link-local, site-local
  if ((a & 0xff00) === 0xff00) return true; // multicast
  if (a === 0x2001 && b === 0x0db8) return true; // documentation
  return false;
}

function special4([a = 0, b = 0]: number[]): boolean {
  return (
    a === 0 || a === 10 || a === 127 || a >= 224 || // this network, private, loopback, multicast and reserved
    (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) ||
    (a === 100 && b >= 64 && b <= 127) || (a === 192 && b === 0) || (a === 198 && (b === 18 || b === 19))
  );
}

/** An IPv6 address as eight 4-digit groups (an embedded IPv4 tail becomes two groups). */
function expand6(address: string): string {
  let s = address.toLowerCase();
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (tail) {
    const [p, q, r, t] = (tail[1] as string).split(".").map(Number) as [number, number, number, number];
    s = `${s.slice(0, -(tail[1] as string).length)}${((p << 8) | q).toString(16)}:${((r << 8) | t).toString(16)}`;
  }
  const [head = "", rest] = s.split("::");
  const h = head ? head.split(":") : [];
  const r = rest !== undefined ? (rest ? rest.split(":") : []) : [];
  const fill = rest !== undefined ? Array(8 - h.length - r.length).fill("0") : [];
  return [...h, ...fill, ...r].map((g) => g.padStart(4, "0")).join(":");
}

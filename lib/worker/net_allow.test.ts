import { describe, expect, test } from "bun:test";
import { addressAllowed, isSpecialAddress, matching, parseAllowList } from "./net_allow.ts";

describe("the allow list", () => {
  test("entries: names, wildcards, addresses, ports (none: 80 and 443)", () => {
    const [name, wild, v4, v6] = parseAllowList(["PyPI.org.", "*.pythonhosted.org:443", "127.0.0.1:8080", "[::1]:9000"]);
    expect(name).toEqual({ host: "pypi.org", wildcard: false, address: false, ports: [80, 443] });
    expect(wild).toEqual({ host: "*.pythonhosted.org", wildcard: true, address: false, ports: [443] });
    expect(v4).toEqual({ host: "127.0.0.1", wildcard: false, address: true, ports: [8080] });
    expect(v6).toEqual({ host: "::1", wildcard: false, address: true, ports: [9000] });
  });

  test("a bad entry is refused, named", () => {
    for (const bad of ["", "http://pypi.org", "pypi.org:0", "pypi.org:70000", "a b", "*.org.", "user@host", "[nothost]:1", "::1", "*"]) {
      expect(() => parseAllowList([bad])).toThrow(JSON.stringify(bad));
    }
    expect(() => parseAllowList("pypi.org" as unknown as string[])).toThrow("must be a list");
  });

  test("matching: the exact host, a wildcard's subdomains (not its apex), the port", () => {
    const entries = parseAllowList(["pypi.org", "*.pythonhosted.org:443"]);
    expect(matching(entries, "PYPI.ORG", 443).length).toBe(1);
    expect(matching(entries, "pypi.org", 8443).length).toBe(0);
    expect(matching(entries, "files.pythonhosted.org", 443).length).toBe(1);
    expect(matching(entries, "pythonhosted.org", 443).length).toBe(0);
    expect(matching(entries, "evilpythonhosted.org", 443).length).toBe(0);
    expect(matching(entries, "pypi.org.evil.com", 443).length).toBe(0);
  });

  test("special addresses: private, loopback, link-local, metadata, CGNAT, and IPv6 forms that reach them", () => {
    for (
      const a of [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "::",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:a9fe:a9fe",
        "64:ff9b::169.254.169.254",
        "2002:c0a8:0101::1",
        "not-an-address",
      ]
    ) {
      expect([a, isSpecialAddress(a)]).toEqual([a, true]);
    }
    for (const a of ["8.8.8.8", "151.101.0.223", "172.32.0.1", "2606:4700::6810:84e5", "::ffff:8.8.8.8"]) expect([a, isSpecialAddress(a)]).toEqual([a, false]);
  });

  test("a special address is reached only when named: as that address, or the exact host that resolved to it; never through a wildcard", () => {
    const [exactName, wildcard, address] = parseAllowList(["index.corp.example", "*.corp.example", "10.0.0.5:8080"]);
    expect(addressAllowed([exactName!], "10.0.0.9")).toBe(true);
    expect(addressAllowed([wildcard!], "10.0.0.9")).toBe(false);
    expect(addressAllowed([wildcard!], "8.8.8.8")).toBe(true);
    expect(addressAllowed([address!], "10.0.0.5")).toBe(true);
    expect(addressAllowed([address!], "10.0.0.6")).toBe(false);
  });
});

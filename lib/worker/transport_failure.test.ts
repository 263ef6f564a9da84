import { describe, expect, test } from "bun:test";
import { describeStartFailure, describeStartTimeout, kindOf, transportFailure } from "./transport_failure.ts";

const ssh = ["ssh", "-F", "cfg", "host", "python3", "-u", "-c", "BOOTSTRAP"];

describe("transport failures are named", () => {
  test("the kind of a command line", () => {
    expect(kindOf(["/usr/bin/python3"])).toBe("local");
    expect(kindOf(["/usr/bin/bwrap", "--", "python3"])).toBe("sandbox");
    expect(kindOf(ssh)).toBe("transport");
    expect(kindOf(["docker", "exec", "-i", "box", "python3"])).toBe("transport");
    expect(kindOf(["sh", "-c", "exec python3"])).toBe("transport");
  });

  test("ssh's 255 before ready: could not reach or log in, with ssh's last line", () => {
    const out = "Warning: Permanently added 'x' (ED25519) to the list of known hosts.\nssh: connect to host 127.0.0.1 port 1: Connection refused\n";
    expect(describeStartFailure(ssh, "ssh host python3", { code: 255, signal: null }, out)).toBe(
      "ssh exited 255: could not reach or log in to the remote host: ssh: connect to host 127.0.0.1 port 1: Connection refused",
    );
  });

  test("ssh's 255 after ready: connection lost", () => {
    expect(transportFailure(ssh, { code: 255, signal: null }, "Connection to 127.0.0.1 closed by remote host.\n", true)).toBe(
      "ssh exited 255: connection lost: Connection to 127.0.0.1 closed by remote host.",
    );
    expect(transportFailure(ssh, { code: 0, signal: null }, "", true)).toBeNull();
  });

  test("an interpreter missing on the far side, in a container", () => {
    expect(describeStartFailure(ssh, "ssh host python3.99", { code: 127, signal: null }, "bash: line 1: python3.99: command not found\n")).toBe(
      'The interpreter of "ssh host python3.99" was not found on the remote host: bash: line 1: python3.99: command not found',
    );
    const docker = ["docker", "exec", "-i", "box", "python9"];
    expect(describeStartFailure(docker, "docker exec -i box python9", { code: 127, signal: null }, 'OCI runtime exec failed: exec: "python9": executable file not found in $PATH\n')).toContain(
      "was not found in the container",
    );
    expect(describeStartFailure(docker, "docker exec -i box python3", { code: 125, signal: null }, "Error response from daemon: No such container: box\n")).toBe(
      "docker exec failed (exit 125): Error response from daemon: No such container: box",
    );
  });

  test("bubblewrap's own error, with a hint when user namespaces are refused", () => {
    const bwrap = ["/usr/bin/bwrap", "--unshare-all", "--", "/usr/bin/python3"];
    expect(describeStartFailure(bwrap, "python3 (sandboxed)", { code: 1, signal: null }, "bwrap: Can't find source path /nope: No such file or directory\n")).toBe(
      "The sandbox could not start (bubblewrap): bwrap: Can't find source path /nope: No such file or directory",
    );
    expect(describeStartFailure(bwrap, "p", { code: 1, signal: null }, "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.\n"))
      .toContain(
        "user namespaces are refused on this machine",
      );
  });

  test("a Python that failed, and a program that ran and was not Python", () => {
    const tb = "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\nModuleNotFoundError: No module named 'x'\n";
    expect(describeStartFailure(ssh, "ssh host python3", { code: 1, signal: null }, tb)).toBe(`Python command "ssh host python3" failed before it was ready: ModuleNotFoundError: No module named 'x'`);
    expect(describeStartFailure(["sh", "-c", "echo hi"], "sh -c 'echo hi'", { code: 0, signal: null }, "")).toBe(
      `Python command "sh -c 'echo hi'" exited with code 0 before it was ready (is it a Python interpreter?)`,
    );
  });

  test("a start timeout through ssh blames the link, not the interpreter", () => {
    expect(describeStartTimeout(ssh, "ssh host python3", 300, "")).toBe('Python command "ssh host python3" did not get ready within 300 ms (no answer through ssh: the host is slow or unreachable)');
    expect(describeStartTimeout(["sh"], "sh", 300, "")).toContain("(is it a Python interpreter?)");
  });
});

// A state directory made the way a new user or a CI script makes one (`mkdir -p "$AWREPL_HOME"`,
// 0755) is used as it is; what awrepl puts in it stays private, and other users cannot reach the
// socket. One others can write to is still refused (lib/settings/home.ts).
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { cleanupHome, PYTHON, run, tempHome } from "../harness/mod.ts";

describe("a state directory made by mkdir -p", () => {
  test("0755 is accepted; the socket is 0600, what awrepl creates is 0700/0600, and no bind leftover stays", async () => {
    const root = tempHome("awrepl-e2e-");
    const home = join(root.home, "made", "by", "mkdir");
    mkdirSync(home, { recursive: true, mode: 0o755 });
    chmodSync(home, 0o755);
    try {
      const r = await run(["-s", "a", "run", "x = 1; x + 1"], { home });
      expect(r.stderr).toBe("");
      expect(r.stdout).toBe("2\n");
      expect((await run(["-s", "a", "snapshot"], { home })).code).toBe(0);
      expect(statSync(home).mode & 0o777).toBe(0o755); // left as the user made it
      expect(statSync(join(home, "supervisor.sock")).mode & 0o777).toBe(0o600);
      for (const name of readdirSync(home)) {
        expect(name.startsWith(".sock-")).toBe(false);
        const st = statSync(join(home, name));
        if (name === "supervisor.sock") continue;
        expect({ name, mode: (st.mode & 0o777).toString(8) }).toEqual({ name, mode: st.isDirectory() ? "700" : "600" });
      }
      if (process.getuid?.() === 0) {
        // Another user (nobody) can list the directory but cannot connect to the socket.
        const other = Bun.spawnSync([
          "setpriv",
          "--reuid",
          "65534",
          "--regid",
          "65534",
          "--clear-groups",
          PYTHON,
          "-c",
          `import socket; s = socket.socket(socket.AF_UNIX); s.connect(${JSON.stringify(join(home, "supervisor.sock"))})`,
        ], { timeout: 10_000 });
        expect(other.stderr.toString()).toContain("PermissionError");
      }
    } finally {
      await cleanupHome(home);
      root.remove();
    }
  }, 60_000);

  test("one that others can write is refused with the way out, and left as it was", async () => {
    const root = tempHome("awrepl-e2e-");
    const home = join(root.home, "shared");
    mkdirSync(home);
    chmodSync(home, 0o775);
    try {
      const r = await run(["-s", "a", "run", "1"], { home });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`Directory ${home} can be written by other users (mode 0775)`);
      expect(r.stderr).toContain(`chmod go-w ${home}`);
      expect(statSync(home).mode & 0o777).toBe(0o775);
    } finally {
      await cleanupHome(home);
      root.remove();
    }
  }, 60_000);
});

// Which executable runs the supervisor (AWREPL_BIN, this platform's npm package, a checkout's), and an
// executable that cannot be started is said at once, naming it.
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { AwreplError } from "../core/errors.ts";
import { homeLayout } from "../settings/home.ts";
import { ROOT, tempHome } from "../../tests/harness/mod.ts";
import { connectSupervisor, platformPackage, SUPERVISOR_SUBCOMMAND, supervisorCommand } from "./start.ts";

const notInstalled = (specifier: string): string => {
  throw Object.assign(new Error(`Cannot find module '${specifier}'`), { code: "MODULE_NOT_FOUND" });
};

describe("supervisorCommand", () => {
  test("AWREPL_BIN comes first", () => {
    expect(supervisorCommand({ AWREPL_BIN: "/opt/awrepl" }, { fileURLToPath, resolvePackage: notInstalled })).toEqual(["/opt/awrepl", SUPERVISOR_SUBCOMMAND]);
  });

  test("then the executable of this platform's npm package, wherever the resolver finds it", () => {
    const { home: dir, remove } = tempHome("awrepl-platform-pkg-");
    try {
      const pkg = join(dir, "node_modules", ...platformPackage().split("/"));
      mkdirSync(join(pkg, "bin"), { recursive: true });
      writeFileSync(join(pkg, "package.json"), "{}");
      writeFileSync(join(pkg, "bin", process.platform === "win32" ? "awrepl.exe" : "awrepl"), "");
      const asked: string[] = [];
      const resolvePackage = (specifier: string) => {
        asked.push(specifier);
        return join(pkg, "package.json");
      };
      const [bin, sub] = supervisorCommand({}, { fileURLToPath, resolvePackage });
      expect(asked).toEqual([`${platformPackage()}/package.json`]);
      expect(bin).toBe(join(pkg, "bin", "awrepl"));
      expect(sub).toBe(SUPERVISOR_SUBCOMMAND);
    } finally {
      remove();
    }
  });

  test("without either, in a checkout under Bun: bun main.ts", () => {
    expect(supervisorCommand({}, { fileURLToPath, resolvePackage: notInstalled })).toEqual([process.execPath, join(ROOT, "main.ts"), SUPERVISOR_SUBCOMMAND]);
  });
});

test("an executable that cannot be started is said at once, with its name, not after the start timeout", async () => {
  const { home, remove } = tempHome();
  try {
    const missing = join(home, "no-such-awrepl");
    const started = Date.now();
    const err = await connectSupervisor(homeLayout(home), { autostart: true, env: { ...process.env, AWREPL_BIN: missing } }).catch((e) => e);
    expect(err).toBeInstanceOf(AwreplError);
    expect((err as AwreplError).code).toBe("supervisor_unreachable");
    expect((err as AwreplError).message).toContain(`Cannot start the supervisor (${missing} ${SUPERVISOR_SUBCOMMAND})`);
    expect((err as AwreplError).message).toContain("ENOENT");
    expect(Date.now() - started).toBeLessThan(10_000); // the start timeout is 15 s
  } finally {
    remove();
  }
});

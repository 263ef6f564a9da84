#!/usr/bin/env node
// awrepl's npm launcher (bin/awrepl of the npm package; scripts/npm-packages.ts puts it there): runs
// the executable that this platform's package holds (@awrepl/<platform>-<arch>, an optional dependency
// that npm installs only where its os/cpu/libc fields fit) with the same arguments, and exits as it
// exits. Node is only the launcher, and only until it has run once through a symlink
// (node_modules/.bin/awrepl, or the global command, as npm and bun link it): after the executable has
// started, that symlink is pointed at the executable itself, so the next call starts it directly: no
// Node start (~60-90 ms here), and no install script. This package's own bin/awrepl stays JavaScript,
// for whatever runs it with node (pnpm's and Windows' shims, yarn 2+, Deno, Bun).
// AWREPL_NPM_KEEP_LAUNCHER=1 turns the relinking off.
"use strict";
const fs = require("fs");
const path = require("path");

const SCOPE = "@awrepl/";
const platform = `${process.platform}-${process.arch}`;
const pkg = `${SCOPE}${platform}`;
const exe = process.platform === "win32" ? "awrepl.exe" : "awrepl";

function fail(message) {
  process.stderr.write(`awrepl: ${message}\n`);
  process.exit(125); // awrepl's "awrepl itself failed"
}

/** The platforms there are builds for: the package's optional dependencies (one list, written once). */
function platforms() {
  try {
    const manifest = require(path.join(__dirname, "..", "package.json"));
    return Object.keys(manifest.optionalDependencies || {})
      .filter((n) => n.startsWith(SCOPE))
      .map((n) => n.slice(SCOPE.length));
  } catch {
    return [];
  }
}

function isMusl() {
  if (process.platform !== "linux") return false;
  try {
    const report = process.report && process.report.getReport();
    const shared = (report && report.sharedObjects) || [];
    return shared.some((o) => o.includes("libc.musl-") || o.includes("ld-musl-"));
  } catch {
    return false;
  }
}

function binaryPath() {
  let manifest;
  try {
    manifest = require.resolve(`${pkg}/package.json`);
  } catch {
    const known = platforms();
    if (!known.includes(platform)) {
      fail(`there is no awrepl executable for ${platform} (there is one for ${known.join(", ")}); build it from source (npm run build in a checkout)`);
    }
    if (isMusl()) {
      fail(`the ${platform} executable needs glibc, and this Linux uses musl (Alpine?); build awrepl from source, or use a glibc image`);
    }
    fail(
      `the package ${pkg}, which holds the awrepl executable for ${platform}, is not installed. ` +
        `It is an optional dependency of awrepl: install again without --omit=optional or --no-optional ` +
        `(a package-lock.json written on another platform can also leave it out: run npm install, not npm ci, once here)`,
    );
  }
  return path.join(path.dirname(manifest), "bin", exe);
}

/**
 * Points the symlink this launcher was started through (process.argv[1]: the kernel ran it for its
 * #! line) at the executable: atomically (a new link renamed over it), quietly giving up when it cannot.
 */
function relink(bin) {
  if (process.platform === "win32" || process.env.AWREPL_NPM_KEEP_LAUNCHER) return;
  if (typeof Deno !== "undefined" || typeof Bun !== "undefined") return;
  const link = process.argv[1];
  let tmp;
  try {
    if (!link || !fs.lstatSync(link).isSymbolicLink() || fs.realpathSync(link) !== __filename) return;
    tmp = path.join(path.dirname(link), `.awrepl.${process.pid}.tmp`);
    fs.symlinkSync(path.relative(path.dirname(link), bin), tmp);
    fs.renameSync(tmp, link);
  } catch {
    try {
      if (tmp) fs.unlinkSync(tmp);
    } catch {}
  }
}

const bin = binaryPath();
const { spawn } = require("child_process");
const child = spawn(bin, process.argv.slice(2), { stdio: "inherit" });
child.on("error", (err) => fail(`cannot run ${bin}: ${err.message}`));
// Ctrl-C: the terminal sends SIGINT to the whole foreground group, so the executable has it already
// (the first interrupts the cell, a second one means more); the launcher only must not die of it,
// which would give the shell its prompt back while the cell still runs. Signals sent to this process
// alone are passed on.
process.on("SIGINT", () => {});
for (const signal of ["SIGTERM", "SIGHUP", "SIGQUIT"]) {
  process.on(signal, () => {
    child.kill(signal);
  });
}
child.on("exit", (code, signal) => {
  // It started: from now on the command can be the executable itself.
  relink(bin);
  if (signal) {
    // Die of the same signal, so the caller sees what the executable saw.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 125 : code);
});

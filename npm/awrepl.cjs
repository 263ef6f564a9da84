#!/usr/bin/env node
// awrepl's npm launcher (bin/awrepl of the npm package; scripts/npm-packages.ts puts it there): runs
// the executable that this platform's package holds (@awrepl/<platform>-<arch>, an optional dependency
// that npm installs only where its os/cpu/libc fields fit) with the same arguments, and exits as it
// exits. There is no install script, so Node is the launcher until it has run once through a symlink
// (node_modules/.bin/awrepl, or the global command, as npm, yarn and bun link it). Then that symlink is
// pointed at bin/awrepl-direct beside this file, written then: a /bin/sh script that execs the
// executable (about 1 ms for the shell, where Node's start costs 60-130 ms) and that is JavaScript
// too, which runs this launcher.
//
// Why not point the symlink at the executable itself: the kernel reads a script's #! line, starts
// node with the link's path, and node opens that path again. A run whose kernel had read this launcher
// just before a concurrent first run re-pointed the link got the executable as its script
// (SyntaxError: 1 run in 4 when 8 start together right after npm install). Now whatever node finds at
// the link is JavaScript that runs the launcher, and whatever /bin/sh finds there is the same script:
// once re-pointed, the link stays on one path, whose content changes only by a rename of a complete
// file. When the executable is not where the script says (the platform package removed, the project
// moved), the script hands over to Node: this launcher then explains, or rewrites the script. The
// package's own bin/awrepl stays JavaScript, for whatever runs it with node (pnpm's and Windows'
// shims, yarn 2+, Deno, Bun). AWREPL_NPM_KEEP_LAUNCHER=1 turns the relinking off.
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

/** The script the link is pointed at: bin/awrepl-direct, beside this launcher. */
const DIRECT = path.join(__dirname, "awrepl-direct");

/** Single-quoted for sh. */
const shQuote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * bin/awrepl-direct for the executable at `bin`. Run by the kernel, /bin/sh reads line 2: ':' and a
 * word that is //, then the exec (only sh builtins: it needs no PATH). Read by node (which skips the #!
 * line), line 2 is the string ':' and a comment, and line 3 runs the launcher; node does when it
 * opened the link after its re-pointing, or when the script hands over because the executable is gone.
 */
function directScript(bin) {
  const missing = `awrepl: $b is missing (was @awrepl/${platform} removed?) and there is no node on PATH to say more: run npm install`;
  return [
    "#!/bin/sh",
    `':' //; b=${shQuote(bin)}; [ -x "$b" ] && exec "$b" "$@"; command -v node >/dev/null 2>&1 && exec node "$0" "$@"; echo "${missing}" >&2; exit 125`,
    'require("./awrepl");',
    "",
  ].join("\n");
}

/** Puts a complete new file at `file` by renaming it over: a reader sees the old file or the new one. */
function replace(file, make) {
  const tmp = path.join(path.dirname(file), `.awrepl.${process.pid}.tmp`);
  try {
    make(tmp);
    fs.renameSync(tmp, file);
  } catch (err) {
    try {
      fs.unlinkSync(tmp);
    } catch {}
    throw err;
  }
}

/**
 * Points the symlink this launcher was started through (process.argv[1]: the kernel ran it for its
 * #! line) at bin/awrepl-direct, written first; rewrites that script when its executable path is no
 * longer `bin` (a moved project). Quietly gives up when it cannot.
 */
function relink(bin) {
  if (process.platform === "win32" || process.env.AWREPL_NPM_KEEP_LAUNCHER) return;
  if (typeof Deno !== "undefined" || typeof Bun !== "undefined") return;
  const link = process.argv[1];
  // A line end would end the comment that hides the sh line from JavaScript.
  if (!link || /[\n\r\u2028\u2029]/.test(bin)) return;
  try {
    if (!fs.lstatSync(link).isSymbolicLink()) return;
    const now = fs.realpathSync(link);
    if (now !== __filename && now !== DIRECT) return; // not a link to this package's command
    const script = directScript(bin);
    let current = null;
    try {
      current = fs.readFileSync(DIRECT, "utf8");
    } catch {}
    if (current !== script) replace(DIRECT, (tmp) => fs.writeFileSync(tmp, script, { mode: 0o755 }));
    if (now === DIRECT) return;
    // As npm wrote the link (../awrepl/bin/awrepl, relative), with the other name: the link stays
    // inside the package, where npm's uninstall and its global "is it ours" check expect it.
    const target = path.join(path.dirname(fs.readlinkSync(link)), path.basename(DIRECT));
    const resolved = fs.realpathSync(path.resolve(path.dirname(link), path.dirname(target)));
    replace(link, (tmp) => fs.symlinkSync(resolved === __dirname ? target : DIRECT, tmp));
  } catch {}
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

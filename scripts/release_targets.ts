// The platforms a release builds (scripts/build.ts), packs for npm (scripts/npm-packages.ts) and as
// Python wheels (scripts/wheels.ts): one list, in a module of its own so that none of them imports another for it.

/**
 * Release targets: Bun fetches each target's runtime from the npm registry (@oven/bun-*). `npm` is the
 * platform as Node names it (process.platform, process.arch): the npm package @awrepl/<os>-<cpu>
 * carries that file (scripts/npm-packages.ts), with these os/cpu/libc fields.
 */
export const RELEASE_TARGETS: { target: string; file: string; npm: { os: string; cpu: string; libc?: string } }[] = [
  { target: "bun-linux-x64", file: "awrepl-linux-x64", npm: { os: "linux", cpu: "x64", libc: "glibc" } },
  { target: "bun-linux-arm64", file: "awrepl-linux-arm64", npm: { os: "linux", cpu: "arm64", libc: "glibc" } },
  { target: "bun-darwin-x64", file: "awrepl-darwin-x64", npm: { os: "darwin", cpu: "x64" } },
  { target: "bun-darwin-arm64", file: "awrepl-darwin-arm64", npm: { os: "darwin", cpu: "arm64" } },
  { target: "bun-windows-x64", file: "awrepl-windows-x64.exe", npm: { os: "win32", cpu: "x64" } },
];

/** This machine's release file name (awrepl-linux-x64, ...), or null when no release target fits. */
export function nativeReleaseFile(): string | null {
  return RELEASE_TARGETS.find((t) => t.npm.os === process.platform && t.npm.cpu === process.arch)?.file ?? null;
}

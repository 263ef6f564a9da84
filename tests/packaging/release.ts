// A release directory for the packaging tests, made by the release step's own code (scripts/build.ts
// finishRelease: the .gz copies, the installers with this version as their default, SHA256SUMS): this
// platform's file is the real executable (dist/awrepl, built by the harness when stale), every other
// platform's file is a small stand-in script. So the installer and npm tests install the real thing
// in a release's exact shape, without cross-compiling four more 100 MB executables.
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { finishRelease, nativeReleaseFile, RELEASE_TARGETS } from "../../scripts/build.ts";
import { awreplBinary } from "../harness/mod.ts";

/** This machine's release file name; the packaging tests need a platform that has a release build. */
export const NATIVE_FILE = nativeReleaseFile();

/** What a stand-in for another platform's executable holds (it runs, and says which it is). */
export const standIn = (file: string) => `#!/bin/sh\necho "awrepl 9.9.9 (stand-in for ${file})"\n`;

export async function makeTestRelease(dir: string): Promise<string> {
  if (!NATIVE_FILE) throw new Error(`no release target for ${process.platform}-${process.arch}`);
  const binary = await awreplBinary();
  mkdirSync(dir, { recursive: true });
  for (const { file } of RELEASE_TARGETS) {
    if (file === NATIVE_FILE) copyFileSync(binary, join(dir, file));
    else writeFileSync(join(dir, file), standIn(file), { mode: 0o755 });
  }
  // gzip -1: a test does not need the smallest file, and -9 of 107 MiB takes seconds.
  finishRelease(dir, { gzipLevel: 1 });
  return dir;
}

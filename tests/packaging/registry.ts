// A minimal npm registry on 127.0.0.1 for the packaging tests: it serves the tarballs it is given
// (packuments made from each tarball's package.json, with sha512 integrity) and nothing else: any other
// name gets a 404 and is recorded in `refused`, so a test can prove that an install needed nothing from
// the internet. npm, npx and Deno (npm: specifiers, NPM_CONFIG_REGISTRY) install from it as from the
// real registry, so optional dependencies are chosen by os/cpu/libc exactly as for users.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { gunzipSync } from "node:zlib";
import { RELEASE_TARGETS } from "../../scripts/build.ts";

type Served = { name: string; version: string; manifest: Record<string, unknown>; tarball: Buffer; file: string };

/** package/package.json out of a .tgz (a tar is 512-byte headers, each followed by its file's blocks). */
function manifestOf(tgz: Buffer): Record<string, unknown> {
  const tar = gunzipSync(tgz);
  for (let off = 0; off + 512 <= tar.length;) {
    const name = tar.subarray(off, off + 100).toString("utf8").replace(/\0.*$/s, "");
    const size = parseInt(tar.subarray(off + 124, off + 136).toString("utf8").replace(/\0.*$/s, "").trim() || "0", 8);
    if (name === "package/package.json") return JSON.parse(tar.subarray(off + 512, off + 512 + size).toString("utf8"));
    if (!name) break;
    off += 512 + Math.ceil(size / 512) * 512;
  }
  throw new Error("no package/package.json in the tarball");
}

export type Registry = { url: string; requests: string[]; refused: string[]; stop(): void };

export function startRegistry(tarballs: string[]): Registry {
  const served = new Map<string, Served[]>();
  for (const file of tarballs) {
    const tarball = readFileSync(file);
    const manifest = manifestOf(tarball);
    const entry = { name: manifest.name as string, version: manifest.version as string, manifest, tarball, file: basename(file) };
    served.set(entry.name, [...(served.get(entry.name) ?? []), entry]);
  }
  const requests: string[] = [];
  const refused: string[] = [];
  const server: ReturnType<typeof Bun.serve> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req): Response {
      const path = decodeURIComponent(new URL(req.url).pathname);
      requests.push(`${req.method} ${path}`);
      const tar = /^\/(.+)\/-\/([^/]+\.tgz)$/.exec(path);
      if (tar) {
        const hit = served.get(tar[1] as string)?.find((e) => e.file === tar[2]);
        if (hit) return new Response(hit.tarball, { headers: { "content-type": "application/octet-stream" } });
      }
      const name = path.slice(1);
      const versions = served.get(name);
      if (!versions || req.method !== "GET") {
        refused.push(`${req.method} ${path}`);
        return Response.json({ error: "Not found" }, { status: 404 });
      }
      const base = `http://127.0.0.1:${server.port}`;
      return Response.json({
        name,
        "dist-tags": { latest: versions.at(-1)?.version },
        versions: Object.fromEntries(
          versions.map((e) => [
            e.version,
            {
              ...e.manifest,
              _id: `${name}@${e.version}`,
              dist: {
                tarball: `${base}/${name}/-/${e.file}`,
                integrity: `sha512-${createHash("sha512").update(e.tarball).digest("base64")}`,
                shasum: createHash("sha1").update(e.tarball).digest("hex"),
              },
            },
          ]),
        ),
      });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/`, requests, refused, stop: () => server.stop(true) };
}

/** `npm pack` of a directory (its scripts not run: a dependency's prepack would rebuild it). */
export function npmPack(dir: string, dest: string, env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dest], { cwd: dir, encoding: "utf8", env });
  if (r.status !== 0) throw new Error(`npm pack in ${dir} failed: ${r.stderr}`);
  return join(dest, (JSON.parse(r.stdout) as { filename: string }[])[0]?.filename as string);
}

/**
 * Stand-ins for the platform packages not built here (packing four 100 MB executables for a test is
 * not worth it): the same name, version and os/cpu/libc, and a tiny bin/awrepl. A registry must have
 * every optional dependency: Deno fails on one that does not exist ("npm package '@awrepl/darwin-arm64'
 * does not exist") where npm skips it.
 */
export function standInPlatformPackages(dir: string, version: string, except: string, env?: NodeJS.ProcessEnv): string[] {
  const out: string[] = [];
  for (const { npm } of RELEASE_TARGETS) {
    const name = `${npm.os}-${npm.cpu}`;
    if (name === except) continue;
    const pkg = join(dir, `stand-in-${name}`);
    mkdirSync(join(pkg, "bin"), { recursive: true });
    writeFileSync(join(pkg, "bin", npm.os === "win32" ? "awrepl.exe" : "awrepl"), "#!/bin/sh\necho stand-in\n", { mode: 0o755 });
    const manifest = { name: `@awrepl/${name}`, version, os: [npm.os], cpu: [npm.cpu], ...(npm.libc ? { libc: [npm.libc] } : {}), files: ["bin/"] };
    writeFileSync(join(pkg, "package.json"), JSON.stringify(manifest));
    out.push(npmPack(pkg, dir, env));
  }
  return out;
}

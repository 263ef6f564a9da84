// The platform tag of a wheel that carries a release executable (scripts/wheels.ts), read from the
// executable itself rather than assumed from the target's name (docs/packaging.md):
//   Linux    the ELF's version needs: the highest GLIBC_2.N symbol version it asks for gives
//            manylinux_2_N_<arch> (PEP 600), plus the legacy alias of that glibc (manylinux2014 for
//            2.17, ...) so pip older than 20.3 also takes it. Every library it links must be part of
//            glibc (or the dynamic loader): anything else would make the manylinux claim false.
//   macOS    the Mach-O's minimum OS (LC_BUILD_VERSION, or LC_VERSION_MIN_MACOSX on old toolchains):
//            macosx_<major>_<minor>_<arch>. From macOS 11 on, pip only generates `<major>_0` tags, so a
//            minimum of 11.x with x > 0 becomes the next major's `_0` (never claims an older OS).
//   Windows  a PE image for x86-64: win_amd64.
// The architecture each format records is checked against the release target too, so a binary put in
// the wrong file cannot be shipped under another platform's tag.
import { closeSync, openSync, readSync } from "node:fs";

/** What the ELF reader found: the libraries the executable links and the highest glibc it needs. */
export type ElfNeeds = { machine: number; needed: string[]; glibc: [number, number]; versions: string[] };

const EM_X86_64 = 62;
const EM_AARCH64 = 183;
const SHT_DYNAMIC = 6;
const SHT_GNU_VERNEED = 0x6ffffffe;

/** glibc's own libraries and its dynamic loaders: what a manylinux wheel's binary may link. */
const GLIBC_LIBRARIES = new Set([
  "libc.so.6",
  "libm.so.6",
  "libpthread.so.0",
  "libdl.so.2",
  "librt.so.1",
  "libutil.so.1",
  "libresolv.so.2",
  "libnsl.so.1",
  "ld-linux-x86-64.so.2",
  "ld-linux-aarch64.so.1",
]);

/** The legacy names PEP 600 keeps as aliases, by glibc minor (x86_64 has all three; aarch64 only 2014). */
const LEGACY_MANYLINUX: Record<number, { name: string; arches: string[] }> = {
  5: { name: "manylinux1", arches: ["x86_64"] },
  12: { name: "manylinux2010", arches: ["x86_64"] },
  17: { name: "manylinux2014", arches: ["x86_64", "aarch64"] },
};

/** Reads `length` bytes at `position` of an open file; throws when the file is shorter. */
function readAt(fd: number, position: number, length: number, path: string): Buffer {
  const buf = Buffer.alloc(length);
  const got = readSync(fd, buf, 0, length, position);
  if (got !== length) throw new Error(`${path}: truncated (wanted ${length} bytes at offset ${position}, the file ends first)`);
  return buf;
}

function withFile<T>(path: string, fn: (fd: number) => T): T {
  const fd = openSync(path, "r");
  try {
    return fn(fd);
  } finally {
    closeSync(fd);
  }
}

const cString = (buf: Buffer, offset: number) => {
  const end = buf.indexOf(0, offset);
  return buf.toString("latin1", offset, end < 0 ? buf.length : end);
};

/**
 * The libraries a 64-bit little-endian ELF executable links (DT_NEEDED) and the symbol versions it
 * needs from them (.gnu.version_r), from its section headers. What `readelf -dV` / `objdump -T` show.
 */
export function readElfNeeds(path: string): ElfNeeds {
  return withFile(path, (fd) => {
    const header = readAt(fd, 0, 64, path);
    if (header.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${path} is not an ELF executable (no \\x7fELF magic)`);
    if (header[4] !== 2 || header[5] !== 1) throw new Error(`${path}: only 64-bit little-endian ELF is supported (class ${header[4]}, data ${header[5]})`);
    const machine = header.readUInt16LE(18);
    const shoff = Number(header.readBigUInt64LE(0x28));
    const shentsize = header.readUInt16LE(0x3a);
    const shnum = header.readUInt16LE(0x3c);
    if (shoff === 0 || shnum === 0) throw new Error(`${path} has no section headers (stripped?): its glibc needs cannot be read`);
    const table = readAt(fd, shoff, shentsize * shnum, path);
    const sections = Array.from({ length: shnum }, (_, i) => {
      const at = i * shentsize;
      return {
        type: table.readUInt32LE(at + 4),
        offset: Number(table.readBigUInt64LE(at + 24)),
        size: Number(table.readBigUInt64LE(at + 32)),
        link: table.readUInt32LE(at + 40),
        info: table.readUInt32LE(at + 44),
      };
    });
    const contents = (s: { offset: number; size: number }) => readAt(fd, s.offset, s.size, path);
    const stringsOf = (s: { link: number }) => {
      const strtab = sections[s.link];
      if (!strtab) throw new Error(`${path}: a section links to string table ${s.link}, which does not exist`);
      return contents(strtab);
    };

    const needed: string[] = [];
    for (const s of sections.filter((s) => s.type === SHT_DYNAMIC)) {
      const dyn = contents(s);
      const strings = stringsOf(s);
      for (let at = 0; at + 16 <= dyn.length; at += 16) {
        const tag = dyn.readBigInt64LE(at);
        if (tag === 0n) break; // DT_NULL
        if (tag === 1n) needed.push(cString(strings, Number(dyn.readBigUInt64LE(at + 8)))); // DT_NEEDED
      }
    }

    const versions: string[] = [];
    for (const s of sections.filter((s) => s.type === SHT_GNU_VERNEED)) {
      const data = contents(s);
      const strings = stringsOf(s);
      let entry = 0;
      for (let n = 0; n < s.info; n++) {
        const file = cString(strings, data.readUInt32LE(entry + 4));
        let aux = entry + data.readUInt32LE(entry + 8);
        for (let k = 0, count = data.readUInt16LE(entry + 2); k < count; k++) {
          versions.push(`${cString(strings, data.readUInt32LE(aux + 8))}@${file}`);
          aux += data.readUInt32LE(aux + 12);
        }
        const next = data.readUInt32LE(entry + 12);
        if (next === 0) break;
        entry += next;
      }
    }

    let glibc: [number, number] = [2, 0];
    for (const v of versions) {
      const m = /^GLIBC_(\d+)\.(\d+)(?:\.\d+)?@/.exec(v);
      if (!m) continue;
      const found: [number, number] = [Number(m[1]), Number(m[2])];
      if (found[0] > glibc[0] || (found[0] === glibc[0] && found[1] > glibc[1])) glibc = found;
    }
    return { machine, needed, glibc, versions };
  });
}

/** The manylinux tags (compressed tag set, PEP 425) for a Linux executable of `arch` (x86_64, aarch64). */
export function manylinuxTag(path: string, arch: "x86_64" | "aarch64"): { tag: string; needs: ElfNeeds } {
  const needs = readElfNeeds(path);
  const wanted = arch === "x86_64" ? EM_X86_64 : EM_AARCH64;
  if (needs.machine !== wanted) throw new Error(`${path} is an ELF for machine ${needs.machine}, not ${arch} (${wanted})`);
  const foreign = needs.needed.filter((lib) => !GLIBC_LIBRARIES.has(lib));
  if (foreign.length) throw new Error(`${path} links ${foreign.join(", ")}, which a manylinux system does not promise (only glibc's libraries)`);
  const other = needs.versions.filter((v) => !v.startsWith("GLIBC_"));
  if (other.length) throw new Error(`${path} needs symbol versions outside glibc (${other.join(", ")}): its manylinux tag cannot be derived`);
  const [major, minor] = needs.glibc;
  if (major !== 2 || minor === 0) throw new Error(`${path}: no GLIBC_2.x symbol version found, so the glibc it needs is unknown`);
  const tags = [`manylinux_${major}_${minor}_${arch}`];
  const legacy = LEGACY_MANYLINUX[minor];
  if (legacy?.arches.includes(arch)) tags.push(`${legacy.name}_${arch}`);
  return { tag: tags.join("."), needs };
}

const MH_MAGIC_64 = 0xfeedfacf;
const CPU_TYPE = { x86_64: 0x01000007, arm64: 0x0100000c } as const;
const LC_VERSION_MIN_MACOSX = 0x24;
const LC_BUILD_VERSION = 0x32;
const PLATFORM_MACOS = 1;

/** The minimum macOS of a thin 64-bit Mach-O executable, as [major, minor]. */
export function readMachOMinimum(path: string, arch: keyof typeof CPU_TYPE): [number, number] {
  return withFile(path, (fd) => {
    const header = readAt(fd, 0, 32, path);
    const magic = header.readUInt32LE(0);
    if (magic !== MH_MAGIC_64) throw new Error(`${path} is not a thin 64-bit Mach-O executable (magic 0x${magic.toString(16)})`);
    const cpu = header.readUInt32LE(4);
    if (cpu !== CPU_TYPE[arch]) throw new Error(`${path} is a Mach-O for CPU type 0x${cpu.toString(16)}, not ${arch}`);
    const ncmds = header.readUInt32LE(16);
    const commands = readAt(fd, 32, header.readUInt32LE(20), path);
    const decode = (v: number): [number, number] => [v >>> 16, (v >>> 8) & 0xff];
    let legacy: [number, number] | null = null;
    for (let n = 0, at = 0; n < ncmds && at + 8 <= commands.length; n++) {
      const cmd = commands.readUInt32LE(at);
      const size = commands.readUInt32LE(at + 4);
      if (cmd === LC_BUILD_VERSION && commands.readUInt32LE(at + 8) === PLATFORM_MACOS) return decode(commands.readUInt32LE(at + 12));
      if (cmd === LC_VERSION_MIN_MACOSX) legacy = decode(commands.readUInt32LE(at + 8));
      if (size < 8) break;
      at += size;
    }
    if (legacy) return legacy;
    throw new Error(`${path} records no minimum macOS version (neither LC_BUILD_VERSION nor LC_VERSION_MIN_MACOSX)`);
  });
}

/** The macosx tag for a minimum OS: below 11 as is, from 11 on `<major>_0` (rounded up: see the top). */
export function macosTagFor([major, minor]: [number, number], arch: "x86_64" | "arm64"): string {
  if (major >= 11) return `macosx_${minor === 0 ? major : major + 1}_0_${arch}`;
  return `macosx_${major}_${minor}_${arch}`;
}

/** Checks a Windows executable is a PE image for x86-64 (IMAGE_FILE_MACHINE_AMD64). */
export function checkPeAmd64(path: string): void {
  withFile(path, (fd) => {
    const dos = readAt(fd, 0, 64, path);
    if (dos.toString("latin1", 0, 2) !== "MZ") throw new Error(`${path} is not a Windows executable (no MZ header)`);
    const pe = readAt(fd, dos.readUInt32LE(0x3c), 6, path);
    if (pe.toString("latin1", 0, 4) !== "PE\0\0") throw new Error(`${path} has no PE signature`);
    const machine = pe.readUInt16LE(4);
    if (machine !== 0x8664) throw new Error(`${path} is a PE image for machine 0x${machine.toString(16)}, not x86-64 (0x8664)`);
  });
}

/** The wheel platform tag for a release target's executable (`bun-linux-x64`, ...), read from the file. */
export function wheelPlatformTag(target: string, path: string): string {
  switch (target) {
    case "bun-linux-x64":
      return manylinuxTag(path, "x86_64").tag;
    case "bun-linux-arm64":
      return manylinuxTag(path, "aarch64").tag;
    case "bun-darwin-x64":
      return macosTagFor(readMachOMinimum(path, "x86_64"), "x86_64");
    case "bun-darwin-arm64":
      return macosTagFor(readMachOMinimum(path, "arm64"), "arm64");
    case "bun-windows-x64":
      checkPeAmd64(path);
      return "win_amd64";
    default:
      throw new Error(`no wheel platform tag is known for the release target ${target}`);
  }
}

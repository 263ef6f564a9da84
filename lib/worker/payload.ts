// Snapshot payloads that travel over the protocol (docs/protocol.md, "Payloads over the protocol"):
// a worker that cannot write the host's state directory (behind ssh, in a container, in a sandbox)
// streams its snapshot to the host, and the host streams it back on restore. Memory stays bounded on
// both sides: one piece at a time.
//
// The API the session layer uses (a snapshot, then a restore):
//
//   const file = new PayloadFile(target);                       // a temp file beside target, 0600
//   try {
//     const done = await worker.request({ type: "snapshot", to: "host", max_bytes }, file.handlers);
//     file.commit(done);          // status ok, byte count and sha256 checked, fsync, renamed over target
//   } finally {
//     file.discard();             // no-op after commit; removes the temp file otherwise
//   }
//   // done.manifest: the manifest to write beside target (the session's job, with its own rules)
//
//   const source = await openPayload(path, maxBytes);            // regular file, under the cap
//   const done = await worker.request(restoreRequest(source), handlers, source.pieces());
//
// Binary frames (the runtime's `binary_data`) carry the pieces as raw bytes after a header line and
// the sha256 after the last one, computed as they are sent; to an older runtime the pieces go in
// base64 and the file is hashed first, for the request.
//
// snapshotToFile() and restoreFromFile() below do exactly that against a worker directly. A request
// with a payload can be interrupted like any other (the runtime drops the pieces that follow).
import { createHash } from "node:crypto";
import { closeSync, constants, fsyncSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { AwreplError } from "../core/errors.ts";
import type { DoneEvent, RestoreRequest, SnapshotRequest } from "../protocol/runtime.ts";
import { BINARY_PIECE_BYTES } from "../wire/data_frames.ts";
import type { RequestHandlers, Worker } from "./worker.ts";

/**
 * Receives one snapshot's `data` events into a temporary file beside `target` (`.<name>.<pid>.tmp`,
 * the pattern snapshot_files.ts sweeps), hashing as it goes; commit() checks it against the `done`
 * and renames it into place. Nothing is buffered: each piece is written when it arrives.
 */
export class PayloadFile {
  readonly tmp: string;
  private fd: number | null;
  private readonly hash = createHash("sha256");
  private received = 0;
  private nextSeq = 0;
  private failure: string | null = null;
  private committed = false;

  constructor(readonly target: string) {
    this.tmp = join(dirname(target), `.${basename(target)}.${process.pid}.tmp`);
    try {
      unlinkSync(this.tmp); // a killed writer's leftover: O_EXCL below must create a fresh 0600 file
    } catch {
      // none
    }
    try {
      this.fd = openSync(this.tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    } catch (err) {
      throw new AwreplError("snapshot_failed", `Cannot write snapshot ${target}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The handlers to pass with the snapshot request. */
  readonly handlers: RequestHandlers = {
    data: (piece, seq) => this.write(piece, seq),
  };

  /** Bytes received so far. */
  get bytes(): number {
    return this.received;
  }

  private write(piece: Uint8Array, seq: number): void {
    if (this.failure !== null || this.fd === null) return;
    // A binary frame's piece may arrive in several parts, each carrying the piece's seq.
    if (seq === this.nextSeq) this.nextSeq++;
    else if (seq !== this.nextSeq - 1) {
      this.failure = `piece ${seq} arrived where ${this.nextSeq} was expected`;
      return;
    }
    try {
      let off = 0;
      while (off < piece.length) off += writeSync(this.fd, piece, off, piece.length - off);
    } catch (err) {
      this.failure = (err as Error).message; // a full disk: said by commit(), after the worker's done
      return;
    }
    this.hash.update(piece);
    this.received += piece.length;
  }

  /**
   * Checks the payload against the snapshot's `done` (status ok, its byte count and sha256), makes it
   * durable (fsync, unless `durable` is false: an autosave) and renames it over the target. Throws
   * snapshot_failed with the reason otherwise (the temp file is removed by discard()).
   */
  commit(done: DoneEvent, durable = true): void {
    const fail = (why: string) => {
      throw new AwreplError("snapshot_failed", `Snapshot to ${this.target} failed: ${why}`);
    };
    if (done.status !== "ok") fail(done.reason ?? "no reason given");
    if (this.failure !== null) fail(this.failure);
    if (this.fd === null) fail("it was discarded");
    if (done.bytes !== this.received) fail(`the worker sent ${this.received} bytes but reported ${done.bytes}`);
    const sha256 = this.hash.digest("hex");
    if (done.sha256 !== sha256) fail(`the payload's sha256 is ${sha256} but the worker reported ${done.sha256}`);
    try {
      if (durable) fsyncSync(this.fd as number);
      closeSync(this.fd as number);
      this.fd = null;
      renameSync(this.tmp, this.target);
      this.committed = true;
    } catch (err) {
      fail((err as Error).message);
    }
  }

  /** Removes the temp file unless commit() succeeded. Safe to call more than once. */
  discard(): void {
    if (this.fd !== null) {
      try {
        closeSync(this.fd);
      } catch {
        // closed
      }
      this.fd = null;
    }
    if (this.committed) return;
    try {
      unlinkSync(this.tmp);
    } catch {
      // not there
    }
  }
}

/** A payload the host sends: its size is known before the first piece. */
export type PayloadSource = {
  path: string;
  bytes: number;
  /** The file's bytes, read one piece at a time as the pipe takes them. */
  pieces(): PayloadPieces;
};

/**
 * The pieces of a payload, and what an older runtime (without `binary_data`) needs first: the sha256
 * of the whole file, which costs a pass of its own (Worker.request asks only then). With binary
 * frames the worker hashes the pieces as it sends them and the hash follows the last one.
 */
export type PayloadPieces = AsyncIterable<Uint8Array> & { sha256(): Promise<string> };

/**
 * Opens a snapshot file to send: a regular file (never a FIFO or a device: `restore /dev/zero`) of at
 * most `maxBytes` (0: no cap). Throws restore_failed naming the problem (a missing file included).
 */
export async function openPayload(path: string, maxBytes: number): Promise<PayloadSource> {
  const file = await openFile(path);
  try {
    const st = await file.stat();
    if (!st.isFile()) throw new AwreplError("restore_failed", `Cannot restore from ${path}: it is not a regular file`);
    if (maxBytes > 0 && st.size > maxBytes) {
      throw new AwreplError("restore_failed", `Cannot restore from ${path}: it holds ${st.size} bytes, over the snapshot cap of ${maxBytes}`);
    }
    const bytes = st.size;
    const pieces = (): PayloadPieces => ({
      [Symbol.asyncIterator]: () => filePieces(path, bytes)[Symbol.asyncIterator](),
      sha256: async () => {
        const hash = createHash("sha256");
        for await (const piece of filePieces(path, bytes)) hash.update(piece);
        return hash.digest("hex");
      },
    });
    return { path, bytes, pieces };
  } finally {
    await file.close();
  }
}

/** The restore request for `source` (send it with source.pieces() as the request's payload). */
export function restoreRequest(source: PayloadSource): Omit<RestoreRequest, "id"> {
  return { type: "restore", from: "host", bytes: source.bytes };
}

async function openFile(path: string): Promise<FileHandle> {
  try {
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused right after, by stat).
    return await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new AwreplError("restore_failed", `Cannot restore from ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** Exactly `size` bytes, one fresh piece at a time (a file that changes size meanwhile is refused). */
async function* readPieces(file: FileHandle, size: number, path: string): AsyncIterable<Uint8Array> {
  let total = 0;
  for (;;) {
    const buf = Buffer.allocUnsafe(BINARY_PIECE_BYTES);
    const { bytesRead } = await file.read(buf, 0, buf.length, null);
    if (bytesRead === 0) break;
    total += bytesRead;
    if (total > size) throw new AwreplError("restore_failed", `Cannot restore from ${path}: it grew while it was read`);
    yield buf.subarray(0, bytesRead);
  }
  if (total !== size) throw new AwreplError("restore_failed", `Cannot restore from ${path}: it shrank while it was read`);
}

async function* filePieces(path: string, bytes: number): AsyncIterable<Uint8Array> {
  const file = await openFile(path);
  try {
    yield* readPieces(file, bytes, path);
  } finally {
    await file.close();
  }
}

export type SnapshotCaps = { maxBytes?: number; maxVariableBytes?: number; chunkBytes?: number };

/** A snapshot of `worker`'s namespace written to `target` on this machine; resolves with the `done` (manifest included). */
export async function snapshotToFile(worker: Worker, target: string, caps: SnapshotCaps = {}): Promise<DoneEvent> {
  const request: Omit<SnapshotRequest, "id"> = { type: "snapshot", to: "host" };
  if (caps.maxBytes) request.max_bytes = caps.maxBytes;
  if (caps.maxVariableBytes) request.max_variable_bytes = caps.maxVariableBytes;
  if (caps.chunkBytes) request.chunk_bytes = caps.chunkBytes;
  const file = new PayloadFile(target);
  try {
    const done = await worker.request(request, file.handlers);
    file.commit(done);
    return done;
  } finally {
    file.discard();
  }
}

/** Restores the snapshot at `path` (on this machine) into `worker`; resolves with the `done`. */
export async function restoreFromFile(worker: Worker, path: string, maxBytes = 0): Promise<DoneEvent> {
  const source = await openPayload(path, maxBytes);
  return worker.request(restoreRequest(source), undefined, source.pieces());
}

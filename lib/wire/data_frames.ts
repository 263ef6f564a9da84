// Snapshot payload frames: the pieces of a snapshot streamed between a worker and its host (runtime
// protocol, "Payloads over the protocol"): `{"event":"data",...}` out of the runtime, `{"type":"data",...}`
// back into it for a restore. Read without JSON.parse, like the output frames (output_frames.ts).

/** Raw bytes per `data` request a restore sends (the runtime's snapshot pieces are the same size). */
export const PIECE_BYTES = 1 << 18;

const DATA_OPEN = Buffer.from('{"event":"data","id":"');
const SEQ_KEY = Buffer.from('","seq":');
const DATA_KEY = Buffer.from(',"data":"');

/**
 * `{"event":"data","id":"<id>","seq":` and the seq up to `key` (the runtime's exact shapes): the id,
 * the seq and where `key` starts; null when the line does not open so.
 */
function readHead(buf: Buffer, key: Buffer): { id: string; seq: number; keyAt: number } | null {
  for (let i = 0; i < DATA_OPEN.length; i++) if (buf[i] !== DATA_OPEN[i]) return null;
  const idEnd = buf.indexOf(SEQ_KEY, DATA_OPEN.length);
  if (idEnd < 0) return null;
  const id = buf.toString("latin1", DATA_OPEN.length, idEnd);
  if (id.includes("\\") || id.includes('"')) return null;
  const seqStart = idEnd + SEQ_KEY.length;
  const keyAt = buf.indexOf(key, seqStart);
  if (keyAt < 0) return null;
  const seq = Number(buf.toString("latin1", seqStart, keyAt));
  if (!Number.isInteger(seq) || seq < 0) return null;
  return { id, seq, keyAt };
}

/**
 * `{"event":"data","id":"7","seq":12,"data":"<base64>"}` (the exact shape runtime.py writes) read
 * without JSON.parse, the piece decoded; null for any other line (a data event in another shape still
 * arrives through the JSON path).
 */
export function readDataFrame(line: Uint8Array): { id: string; seq: number; piece: Buffer } | null {
  const n = line.length;
  if (n < DATA_OPEN.length + 20 || line[n - 1] !== 0x7d || line[n - 2] !== 0x22) return null;
  const buf = Buffer.from(line.buffer, line.byteOffset, n);
  const head = readHead(buf, DATA_KEY);
  if (!head) return null;
  return { id: head.id, seq: head.seq, piece: Buffer.from(buf.toString("latin1", head.keyAt + DATA_KEY.length, n - 2), "base64") };
}

/** Raw bytes per binary `data` frame a restore sends (the runtime's binary snapshot frames are the same size). */
export const BINARY_PIECE_BYTES = 1 << 20;

const BYTES_KEY = Buffer.from(',"bytes":');

/**
 * The header of a binary data frame, `{"event":"data","id":"7","seq":12,"bytes":N}` (the exact shape
 * runtime.py writes when the request asked for `binary`): exactly N raw bytes of the payload follow
 * it on the stream, then lines again. Null for any other line.
 */
export function readBinaryDataHeader(line: Uint8Array): { id: string; seq: number; bytes: number } | null {
  const n = line.length;
  if (n < DATA_OPEN.length + 20 || n > 200 || line[n - 1] !== 0x7d) return null;
  const buf = Buffer.from(line.buffer, line.byteOffset, n);
  const head = readHead(buf, BYTES_KEY);
  if (!head) return null;
  const bytes = Number(buf.toString("latin1", head.keyAt + BYTES_KEY.length, n - 1));
  if (!Number.isSafeInteger(bytes) || bytes < 0) return null;
  return { id: head.id, seq: head.seq, bytes };
}

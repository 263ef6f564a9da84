// Snapshot payload frames: the pieces of a snapshot streamed between a worker and its host (runtime
// protocol, "Payloads over the protocol"): `{"event":"data",...}` out of the runtime, `{"type":"data",...}`
// back into it for a restore. Read without JSON.parse, like the output frames (output_frames.ts).

/** Raw bytes per `data` request a restore sends (the runtime's snapshot pieces are the same size). */
export const PIECE_BYTES = 1 << 18;

const DATA_OPEN = Buffer.from('{"event":"data","id":"');
const SEQ_KEY = Buffer.from('","seq":');
const DATA_KEY = Buffer.from(',"data":"');

/**
 * `{"event":"data","id":"7","seq":12,"data":"<base64>"}` (the exact shape runtime.py writes) read
 * without JSON.parse, the piece decoded; null for any other line (a data event in another shape still
 * arrives through the JSON path).
 */
export function readDataFrame(line: Uint8Array): { id: string; seq: number; piece: Buffer } | null {
  const n = line.length;
  if (n < DATA_OPEN.length + 20 || line[n - 1] !== 0x7d || line[n - 2] !== 0x22) return null;
  for (let i = 0; i < DATA_OPEN.length; i++) if (line[i] !== DATA_OPEN[i]) return null;
  const buf = Buffer.from(line.buffer, line.byteOffset, n);
  const idEnd = buf.indexOf(SEQ_KEY, DATA_OPEN.length);
  if (idEnd < 0) return null;
  const id = buf.toString("latin1", DATA_OPEN.length, idEnd);
  if (id.includes("\\") || id.includes('"')) return null;
  const seqStart = idEnd + SEQ_KEY.length;
  const dataKey = buf.indexOf(DATA_KEY, seqStart);
  if (dataKey < 0) return null;
  const seq = Number(buf.toString("latin1", seqStart, dataKey));
  if (!Number.isInteger(seq) || seq < 0) return null;
  return { id, seq, piece: Buffer.from(buf.toString("latin1", dataKey + DATA_KEY.length, n - 2), "base64") };
}

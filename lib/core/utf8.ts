// Cutting a text by its UTF-8 size: its length in bytes, and the longest prefix or suffix that fits in
// a number of bytes, cut on a character boundary (never inside a multi-byte character or a surrogate
// pair). Shared by the output kept for a result (lib/session/output.ts) and the CLI's rendering of it.
/** UTF-8 length of a string without allocating when it is ASCII-only (the common case). */
export function utf8Length(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * The longest prefix of `text` whose UTF-8 encoding fits in `maxBytes`, cut on a character boundary.
 * Returns the prefix and its byte length. Only the first maxBytes UTF-16 units can be in it (each
 * encodes to at least one byte), so a huge text is never encoded whole.
 */
export function utf8Prefix(text: string, maxBytes: number): [string, number] {
  if (maxBytes <= 0) return ["", 0];
  let window = text.length > maxBytes ? text.slice(0, maxBytes) : text;
  // Never split a surrogate pair: a lone high surrogate at the end would encode as U+FFFD.
  const last = window.charCodeAt(window.length - 1);
  if (window.length < text.length && last >= 0xd800 && last <= 0xdbff) window = window.slice(0, -1);
  const buf = Buffer.from(window, "utf8");
  if (buf.length <= maxBytes) return [window, buf.length];
  let end = maxBytes;
  // Step back over continuation bytes (10xxxxxx) so the cut is before a lead byte.
  while (end > 0 && ((buf[end] as number) & 0xc0) === 0x80) end--;
  return [buf.toString("utf8", 0, end), end];
}

/**
 * The longest suffix of `text` whose UTF-8 encoding fits in `maxBytes`, cut on a character boundary.
 * Returns the suffix and its byte length. Like utf8Prefix, it encodes only the last maxBytes units.
 */
export function utf8Suffix(text: string, maxBytes: number): [string, number] {
  if (maxBytes <= 0) return ["", 0];
  let window = text.length > maxBytes ? text.slice(text.length - maxBytes) : text;
  const first = window.charCodeAt(0);
  if (window.length < text.length && first >= 0xdc00 && first <= 0xdfff) window = window.slice(1);
  const buf = Buffer.from(window, "utf8");
  if (buf.length <= maxBytes) return [window, buf.length];
  let start = buf.length - maxBytes;
  while (start < buf.length && ((buf[start] as number) & 0xc0) === 0x80) start++;
  return [buf.toString("utf8", start), buf.length - start];
}

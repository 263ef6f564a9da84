// The top-level "id" of a JSON-RPC message streamed past in pieces, read without holding the message:
// what the reply to a frame too large to parse needs (JSON-RPC answers with the request's id, or null
// when it cannot be told). The SDK's client writes the id last, after the params, so the whole frame is
// scanned; only the top-level member names and the id's own text are kept, each bounded.
import type { RequestId } from "@modelcontextprotocol/server";

/** A member name or an id longer than this is not one to answer with. */
const MAX_TOKEN_BYTES = 256;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;

const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** What the scan tells of the frame: its id (null: none, or not a valid one) and whether it looked like a response. */
export type FrameHead = { id: RequestId | null; response: boolean };

/**
 * Feed it the frame's bytes with push(), in any pieces; head() says what was found. A frame that is
 * not a JSON object (an array, garbage) has no id. Nesting is tracked, so an "id" inside the params is
 * not taken for the message's.
 */
export class FrameIdScanner {
  private depth = 0;
  private started = false;
  private dead = false; // not an object, or its top level closed: nothing more to learn
  private inString = false;
  private escaped = false;
  /** At depth 1: the next string is a member name (after `{` or `,`), not a value. */
  private expectName = true;
  /** At depth 1, between `:` and the value's first byte: whose value comes. */
  private valueOf: string | null = null;
  /** The bytes of the depth-1 token being kept (a member name, or the id's value); null when none is. */
  private token: number[] | null = null;
  private tokenTooLong = false;
  private tokenIsName = false;
  private lastName: string | null = null;
  private idText: string | null | undefined; // undefined: no id member; null: one that is no id
  private names = { method: false, result: false, error: false };

  push(piece: Uint8Array): void {
    for (let i = 0; i < piece.length && !this.dead; i++) {
      if (this.inString) {
        if (this.token === null) {
          // The bulk of a big frame (the code's string): skip to the next quote or backslash.
          while (!this.escaped && i < piece.length && piece[i] !== QUOTE && piece[i] !== BACKSLASH) i++;
          if (i === piece.length) break;
        }
        this.stringByte(piece[i] as number);
      } else this.structuralByte(piece[i] as number);
    }
  }

  head(): FrameHead {
    this.endPrimitive();
    const response = !this.names.method && (this.names.result || this.names.error);
    if (typeof this.idText !== "string") return { id: null, response };
    try {
      const id: unknown = JSON.parse(this.idText);
      if (typeof id === "string" || (typeof id === "number" && Number.isSafeInteger(id))) return { id, response };
    } catch {
      // not a JSON value: no id
    }
    return { id: null, response };
  }

  private stringByte(b: number): void {
    this.keep(b);
    if (this.escaped) this.escaped = false;
    else if (b === BACKSLASH) this.escaped = true;
    else if (b === QUOTE) {
      this.inString = false;
      if (this.token !== null) this.endToken();
    }
  }

  private structuralByte(b: number): void {
    if (!this.started) {
      if (isSpace(b)) return;
      this.started = true;
      if (b !== OPEN_OBJECT) this.dead = true;
      else this.depth = 1;
      return;
    }
    if (isSpace(b)) {
      this.endPrimitive();
      return;
    }
    if (this.depth === 1) this.topLevelByte(b);
    else if (b === QUOTE) this.inString = true;
    else if (b === OPEN_OBJECT || b === OPEN_ARRAY) this.depth++;
    else if (b === CLOSE_OBJECT || b === CLOSE_ARRAY) this.depth--;
  }

  /** A byte outside strings, directly inside the message's object. */
  private topLevelByte(b: number): void {
    if (this.valueOf !== null) {
      // The first byte of a member's value.
      const isId = this.valueOf === "id";
      this.valueOf = null;
      if (b === OPEN_OBJECT || b === OPEN_ARRAY) {
        if (isId) this.idText = null; // an object or array id: not valid
        this.depth++;
        return;
      }
      if (isId) this.startToken(false);
      if (b === QUOTE) this.inString = true;
      this.keep(b);
      return;
    }
    switch (b) {
      case QUOTE:
        this.inString = true;
        if (this.expectName) {
          this.startToken(true);
          this.keep(b);
        }
        return;
      case COLON:
        this.valueOf = this.lastName ?? "";
        return;
      case COMMA:
        this.endPrimitive();
        this.expectName = true;
        return;
      case CLOSE_OBJECT:
      case CLOSE_ARRAY:
        this.endPrimitive();
        this.depth = 0;
        this.dead = true; // the message ended: whatever follows is not its
        return;
      case OPEN_OBJECT:
      case OPEN_ARRAY:
        this.depth++;
        return;
      default:
        this.keep(b); // a number, true, false or null: kept if it is the id's
    }
  }

  private startToken(isName: boolean): void {
    this.token = [];
    this.tokenTooLong = false;
    this.tokenIsName = isName;
  }

  private keep(b: number): void {
    if (this.token === null) return;
    if (this.token.length < MAX_TOKEN_BYTES) this.token.push(b);
    else this.tokenTooLong = true;
  }

  /** A primitive id value (a number, say) ends at whitespace, `,` or `}`. */
  private endPrimitive(): void {
    if (this.token !== null && !this.tokenIsName && !this.inString) this.endToken();
  }

  private endToken(): void {
    const text = this.tokenTooLong || this.token === null ? null : utf8(this.token);
    const isName = this.tokenIsName;
    this.token = null;
    if (!isName) {
      this.idText = text;
      return;
    }
    this.expectName = false;
    this.lastName = text === null ? null : parseName(text);
    if (this.lastName === "method" || this.lastName === "result" || this.lastName === "error") this.names[this.lastName] = true;
  }
}

/** The token's text, or null when it is not UTF-8 (an id we could not echo faithfully). */
function utf8(bytes: number[]): string | null {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
  } catch {
    return null;
  }
}

function parseName(text: string): string | null {
  try {
    const name: unknown = JSON.parse(text);
    return typeof name === "string" ? name : null;
  } catch {
    return null;
  }
}

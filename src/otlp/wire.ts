import { OtlpDecodeError } from './errors.js';

/** Protobuf wire types OTLP uses. Groups (3, 4) are proto2-only and never appear in OTLP; 6 and 7 do not exist. */
export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
export const WIRE_FIXED32 = 5;

const TWO_POW_32 = 4294967296;
const utf8Decoder = new TextDecoder('utf-8');

/**
 * A cursor over protobuf bytes. Every read is bounded by `end`, the end of the enclosing message, so a length
 * that points past its parent, a truncated varint or fixed field, or a bad wire type throws OtlpDecodeError
 * instead of reading garbage. The cursor only moves forward, so decoding always terminates.
 */
export class WireReader {
  pos = 0;
  /** High 32 bits of the last varint read (the low 32 bits are its return value). */
  hi = 0;
  private scratch: DataView | null = null;
  /** The exact nanoseconds below the millisecond of the last fixed64Millis read (0..999_999). */
  subNs = 0;

  constructor(readonly buf: Uint8Array) {}

  fail(message: string, at: number = this.pos): never {
    throw new OtlpDecodeError(`${message} at byte ${at}`);
  }

  /** Reads a base-128 varint of at most 10 bytes; returns the low 32 bits unsigned, sets `hi`. */
  varint(end: number): number {
    const buf = this.buf;
    let pos = this.pos;
    if (pos >= end) this.fail('truncated varint');
    let b = buf[pos++];
    if (b < 0x80) {
      this.pos = pos;
      this.hi = 0;
      return b;
    }
    const start = this.pos;
    let lo = b & 0x7f;
    let hi = 0;
    for (let shift = 7; shift < 28; shift += 7) {
      if (pos >= end) this.fail('truncated varint', start);
      b = buf[pos++];
      lo |= (b & 0x7f) << shift;
      if (b < 0x80) {
        this.pos = pos;
        this.hi = 0;
        return lo >>> 0;
      }
    }
    if (pos >= end) this.fail('truncated varint', start);
    b = buf[pos++];
    lo |= (b & 0x0f) << 28;
    hi = (b & 0x7f) >>> 4;
    if (b >= 0x80) {
      for (let shift = 3; shift < 32; shift += 7) {
        if (pos >= end) this.fail('truncated varint', start);
        b = buf[pos++];
        hi |= (b & 0x7f) << shift;
        if (b < 0x80) break;
        if (shift === 31) this.fail('varint longer than 10 bytes', start);
      }
    }
    this.pos = pos;
    this.hi = hi >>> 0;
    return lo >>> 0;
  }

  /** Reads a field tag and checks its field number and wire type. Returns the raw tag (field << 3 | wire type). */
  tag(end: number): number {
    const at = this.pos;
    const tag = this.varint(end);
    if (this.hi !== 0) this.fail('field tag out of range', at);
    const wireType = tag & 7;
    if (tag >>> 3 === 0) this.fail('field number 0', at);
    if (wireType === 3 || wireType === 4) this.fail(`unsupported group wire type ${wireType}`, at);
    if (wireType > 5) this.fail(`invalid wire type ${wireType}`, at);
    return tag;
  }

  /** Reads the length prefix of a length-delimited field and checks it fits in the enclosing message. */
  length(end: number): number {
    const at = this.pos;
    const len = this.varint(end);
    if (this.hi !== 0 || len > end - this.pos) {
      this.fail(`length ${this.hi !== 0 ? '>= 2^32' : len} runs past the end of its message (${end - this.pos} bytes left)`, at);
    }
    return len;
  }

  /** Skips one field's value of the given wire type without looking at it. */
  skip(wireType: number, end: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.varint(end);
        return;
      case WIRE_FIXED64:
        if (end - this.pos < 8) this.fail('truncated fixed64');
        this.pos += 8;
        return;
      case WIRE_LEN: {
        const len = this.length(end);
        this.pos += len;
        return;
      }
      case WIRE_FIXED32:
        if (end - this.pos < 4) this.fail('truncated fixed32');
        this.pos += 4;
        return;
      default:
        this.fail(`invalid wire type ${wireType}`);
    }
  }

  /** Throws unless a known field arrived with the wire type its definition requires. */
  expectWireType(tag: number, wireType: number, field: string): void {
    if ((tag & 7) !== wireType) this.fail(`${field} (field ${tag >>> 3}) has wire type ${tag & 7}, expected ${wireType}`);
  }

  /**
   * Reads a fixed64 of Unix nanoseconds as milliseconds (a double), exactly to one rounding, without BigInt; the
   * exact nanoseconds below the millisecond are left in `subNs` (see exactIso).
   */
  fixed64Millis(end: number): number {
    const buf = this.buf;
    const p = this.pos;
    if (end - p < 8) this.fail('truncated fixed64');
    const lo = (buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16) | (buf[p + 3] << 24)) >>> 0;
    const hi = (buf[p + 4] | (buf[p + 5] << 8) | (buf[p + 6] << 16) | (buf[p + 7] << 24)) >>> 0;
    this.pos = p + 8;
    this.subNs = (hi * 967296 + lo) % 1e6;
    return nanosPartsToMillis(hi, lo);
  }

  /** Reads a little-endian IEEE 754 double. */
  double(end: number): number {
    const p = this.pos;
    if (end - p < 8) this.fail('truncated double');
    this.scratch ??= new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
    this.pos = p + 8;
    return this.scratch.getFloat64(p, true);
  }
}

/**
 * Milliseconds of hi * 2^32 + lo nanoseconds. With 2^32 = 4294 * 10^6 + 967296, the whole milliseconds and the
 * nanosecond remainder are exact integers below 2^53; only `whole + rem / 1e6` rounds, exactly as the JSON
 * decoder's string path does, so both transports give the same double for the same instant.
 */
export function nanosPartsToMillis(hi: number, lo: number): number {
  const belowMillion = hi * 967296 + lo;
  const rem = belowMillion % 1e6;
  return hi * 4294 + (belowMillion - rem) / 1e6 + rem / 1e6;
}

/**
 * RFC 3339 text of a decoded OTLP time exact to the nanosecond: `ms` the (rounded) double the decoders give,
 * `subNs` the exact nanoseconds below the millisecond. The whole milliseconds are recovered exactly
 * (|ms - (whole + subNs / 1e6)| is far below half a millisecond). Without `subNs`, the millisecond text as before.
 */
export function exactIso(ms: number, subNs?: number): string {
  if (subNs === undefined) return new Date(ms).toISOString();
  const whole = Math.round(ms - subNs / 1e6);
  if (subNs === 0) return isoMillis(whole);
  // the nanoseconds below the millisecond as six digits, trailing zeros dropped
  const ns = String(subNs).padStart(6, '0');
  let end = 6;
  while (ns.charCodeAt(end - 1) === 48) end--;
  return `${isoMillis(whole).slice(0, -1)}${ns.slice(0, end)}Z`;
}

/** Last second formatted by isoMillis: spans of a batch mostly share it. */
let isoSecond = NaN;
let isoPrefix = '';
/** Years 1970-9999: `toISOString` gives `YYYY-MM-DDTHH:MM:SS.mmmZ`, 24 characters. */
const ISO_FIXED_END = 253_402_300_800_000;

/** `new Date(whole).toISOString()` for whole milliseconds, formatting the date and time once per second. */
function isoMillis(whole: number): string {
  if (!(whole >= 0 && whole < ISO_FIXED_END)) return new Date(whole).toISOString();
  const second = Math.floor(whole / 1000);
  if (second !== isoSecond) {
    isoPrefix = new Date(second * 1000).toISOString().slice(0, 20); // YYYY-MM-DDTHH:MM:SS.
    isoSecond = second;
  }
  const milli = whole - second * 1000;
  return `${isoPrefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}

/** Converts a varint's two 32-bit halves, read as a two's-complement int64, to the nearest number. */
export function int64PartsToNumber(hi: number, lo: number): number {
  return (hi | 0) * TWO_POW_32 + lo;
}

const HEX_DIGIT_CODES: readonly number[] = Array.from('0123456789abcdef', (c) => c.charCodeAt(0));
const hexCodes16: number[] = new Array<number>(16).fill(0);
const hexCodes32: number[] = new Array<number>(32).fill(0);

/** Lowercase hex of an 8- or 16-byte id at buf[start, start+length): one string, no intermediate pieces. */
export function hexOf(buf: Uint8Array, start: number, length: 8 | 16): string {
  const codes = length === 8 ? hexCodes16 : hexCodes32;
  for (let i = 0; i < length; i++) {
    const b = buf[start + i];
    codes[2 * i] = HEX_DIGIT_CODES[b >>> 4];
    codes[2 * i + 1] = HEX_DIGIT_CODES[b & 15];
  }
  return String.fromCharCode.apply(null, codes);
}

export function allZero(buf: Uint8Array, start: number, length: number): boolean {
  let or = 0;
  for (let i = start; i < start + length; i++) or |= buf[i];
  return or === 0;
}

const SHORT_TEXT = 64;
/** One reusable char-code array per short length, so short ASCII text becomes one string in one call. */
const shortTextCodes: number[][] = Array.from({ length: SHORT_TEXT + 1 }, (_, n) => new Array<number>(n).fill(0));

/** UTF-8 text of buf[start, end): a plain loop for short ASCII (names, ids), TextDecoder otherwise. */
export function utf8Text(buf: Uint8Array, start: number, end: number): string {
  const length = end - start;
  if (length <= SHORT_TEXT) {
    const codes = shortTextCodes[length];
    for (let i = 0; i < length; i++) {
      const c = buf[start + i];
      if (c >= 0x80) return utf8Decoder.decode(buf.subarray(start, end));
      codes[i] = c;
    }
    return String.fromCharCode.apply(null, codes);
  }
  return utf8Decoder.decode(buf.subarray(start, end));
}

/**
 * WAL positions (LSNs) and the opaque checkpoint string of a {@link SourcePosition}.
 *
 * LSNs are compared as 64-bit integers, never as strings: PostgreSQL prints them as
 * `%X/%X` (no zero padding in 17), so `0/9` sorts after `0/10` as text.
 */
import type { Lsn, SourcePosition } from './types.js';

/** The invalid LSN `0/0`: "no position yet". */
export const ZERO_LSN: Lsn = '0/0';

const LSN_PATTERN = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;

export function isLsn(value: string): boolean {
  return LSN_PATTERN.test(value);
}

/** Where {@link readHalves} leaves an LSN's two 32-bit halves (module state: synchronous, no array per call). */
let halfHi = 0;
let halfLo = 0;

/**
 * Reads `hi/lo` (1–8 hex digits each, either case) into `halfHi` / `halfLo`; throws a
 * `RangeError` on anything else. A loop instead of a regex and two `parseInt`s: LSNs are compared
 * for every transaction.
 */
function readHalves(lsn: Lsn): void {
  if (typeof lsn === 'string') {
    const n = lsn.length;
    let value = 0;
    let digits = 0;
    let hi = -1;
    let i = 0;
    for (; i < n; i++) {
      const c = lsn.charCodeAt(i);
      let d: number;
      if (c >= 48 && c <= 57) d = c - 48;
      else if (c >= 65 && c <= 70) d = c - 55;
      else if (c >= 97 && c <= 102) d = c - 87;
      else if (c === 47 && hi < 0 && digits > 0) {
        hi = value;
        value = 0;
        digits = 0;
        continue;
      } else break;
      if (++digits > 8) break;
      value = value * 16 + d;
    }
    if (i === n && hi >= 0 && digits > 0) {
      halfHi = hi;
      halfLo = value;
      return;
    }
  }
  throw new RangeError(`not a PostgreSQL LSN (expected e.g. 0/1A2B3C): ${JSON.stringify(lsn)}`);
}

/** The two 32-bit halves of an LSN (both exact as numbers). Throws a `RangeError` on anything else. */
function halves(lsn: Lsn): [number, number] {
  readHalves(lsn);
  return [halfHi, halfLo];
}

/** `'16/B374D848'` → `0x16B374D848n`. Throws a `RangeError` on anything else. */
export function parseLsn(lsn: Lsn): bigint {
  const [hi, lo] = halves(lsn);
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** `0x16B374D848n` → `'16/B374D848'`, the form PostgreSQL 17 prints. */
export function formatLsn(value: bigint): Lsn {
  if (value < 0n || value > 0xffff_ffff_ffff_ffffn) throw new RangeError(`LSN out of range: ${value}`);
  return lsnFromHalves(Number(value >> 32n), Number(value & 0xffff_ffffn));
}

/** The LSN whose high and low 32 bits are `hi` and `lo` (unsigned), as PostgreSQL 17 prints it. */
export function lsnFromHalves(hi: number, lo: number): Lsn {
  // The high half changes once per 4 GiB of WAL: its text is kept.
  if (hi !== lastHi) {
    lastHi = hi;
    lastHiText = hi.toString(16).toUpperCase();
  }
  return `${lastHiText}/${lo.toString(16).toUpperCase()}`;
}
let lastHi = 0;
let lastHiText = '0';

/** Reads the 64-bit LSN at `offset` of a protocol message as text (hot: every WAL message; no bigint). */
export function readLsnAt(buffer: Buffer, offset: number): Lsn {
  return lsnFromHalves(buffer.readUInt32BE(offset), buffer.readUInt32BE(offset + 4));
}

/** An LSN already in PostgreSQL's own form: upper-case hex, no leading zeros. */
const CANONICAL_LSN = /^(?:0|[1-9A-F][0-9A-F]{0,7})\/(?:0|[1-9A-F][0-9A-F]{0,7})$/;

/** `lsn` in the form PostgreSQL 17 prints (`0/0a` → `0/A`); throws a `RangeError` on anything that is not an LSN. */
export function canonicalLsn(lsn: Lsn): Lsn {
  if (typeof lsn === 'string' && CANONICAL_LSN.test(lsn)) return lsn;
  const [hi, lo] = halves(lsn);
  return lsnFromHalves(hi, lo);
}

/** Negative, zero or positive, like `Array.prototype.sort` wants. */
export function compareLsn(a: Lsn, b: Lsn): number {
  // Hot (receipts, checkpoints): compared as two exact 32-bit numbers, no bigint.
  readHalves(a);
  const ah = halfHi;
  const al = halfLo;
  readHalves(b);
  const bh = halfHi;
  const bl = halfLo;
  return ah !== bh ? (ah < bh ? -1 : 1) : al < bl ? -1 : al > bl ? 1 : 0;
}

export function maxLsn(a: Lsn, b: Lsn): Lsn {
  return compareLsn(a, b) >= 0 ? a : b;
}

/** Bytes of WAL between two positions (`to - from`), as a number (WAL distances fit easily). */
export function lsnDistance(from: Lsn, to: Lsn): number {
  return Number(parseLsn(to) - parseLsn(from));
}

/** Reads the 64-bit LSN at `offset` of a protocol message. */
export function readLsn(buffer: Buffer, offset: number): Lsn {
  return readLsnAt(buffer, offset);
}

const CHECKPOINT_VERSION = 'v1';

export interface PositionParts {
  readonly systemId: string;
  readonly timeline: number;
  readonly slot: string;
  readonly commitLsn: Lsn;
  readonly xid: number;
}

/**
 * Encodes a position as `v1:<systemId>:<timeline>:<slot>:<commitLsn>:<xid>`. Slot names
 * are `[a-z0-9_]` (PostgreSQL's rule), so `:` never appears inside a field.
 */
export function encodeCheckpoint(parts: PositionParts): string {
  return checkpointOf(parts, canonicalLsn(parts.commitLsn));
}

/**
 * The last system, timeline and slot that passed the checks, with their checkpoint prefix
 * (`v1:<systemId>:<timeline>:<slot>:`): a source makes one position per transaction, all with the
 * same three. The prefix is one flat string, so a checkpoint is three parts, not eleven (a
 * transaction in flight holds its checkpoint until durable).
 */
let checkedSource: { systemId: string; slot: string; timeline: number; prefix: string } = { systemId: '', slot: '', timeline: Number.NaN, prefix: '' };

function checkpointOf(parts: PositionParts, commitLsn: Lsn): string {
  if (parts.systemId !== checkedSource.systemId || parts.slot !== checkedSource.slot || parts.timeline !== checkedSource.timeline) {
    if (!/^\d+$/.test(parts.systemId)) throw new RangeError(`systemId must be a decimal string: ${parts.systemId}`);
    if (!/^[a-z0-9_]+$/.test(parts.slot)) throw new RangeError(`slot name must match [a-z0-9_]+: ${parts.slot}`);
    if (!Number.isInteger(parts.timeline) || parts.timeline < 1) throw new RangeError(`timeline must be a positive integer: ${parts.timeline}`);
    const prefix = Buffer.from(`${CHECKPOINT_VERSION}:${parts.systemId}:${parts.timeline}:${parts.slot}:`, 'latin1').toString('latin1');
    checkedSource = { systemId: parts.systemId, slot: parts.slot, timeline: parts.timeline, prefix };
  }
  if (!Number.isInteger(parts.xid) || parts.xid < 0 || parts.xid > 0xffff_ffff) throw new RangeError(`xid must be a 32-bit unsigned integer: ${parts.xid}`);
  return `${checkedSource.prefix}${commitLsn}:${parts.xid}`;
}

/** Builds a {@link SourcePosition} with its checkpoint string. */
export function makeSourcePosition(parts: PositionParts): SourcePosition {
  const commitLsn = canonicalLsn(parts.commitLsn);
  return {
    systemId: parts.systemId,
    timeline: parts.timeline,
    slot: parts.slot,
    commitLsn,
    xid: parts.xid,
    checkpoint: checkpointOf(parts, commitLsn),
  };
}

/** Parses a checkpoint string written by {@link encodeCheckpoint}. Throws a `RangeError` naming what is wrong. */
export function decodeCheckpoint(checkpoint: string): SourcePosition {
  const fields = checkpoint.split(':');
  if (fields.length !== 6 || fields[0] !== CHECKPOINT_VERSION) {
    throw new RangeError(`not a ${CHECKPOINT_VERSION} source checkpoint (expected v1:<systemId>:<timeline>:<slot>:<commitLsn>:<xid>): ${JSON.stringify(checkpoint)}`);
  }
  const [, systemId = '', timeline = '', slot = '', commitLsn = '', xid = ''] = fields;
  if (!/^\d+$/.test(timeline) || !/^\d+$/.test(xid)) throw new RangeError(`checkpoint has a non-numeric timeline or xid: ${JSON.stringify(checkpoint)}`);
  return makeSourcePosition({ systemId, timeline: Number(timeline), slot, commitLsn, xid: Number(xid) });
}

/**
 * Orders two positions of the same source (same system and slot): by commit LSN, then xid.
 * Throws when they come from different systems or slots; across timelines the commit LSN
 * still orders them (a promoted standby continues the primary's WAL).
 */
export function comparePositions(a: SourcePosition, b: SourcePosition): number {
  if (a.systemId !== b.systemId || a.slot !== b.slot) {
    throw new RangeError(`positions from different sources cannot be ordered: ${a.checkpoint} vs ${b.checkpoint}`);
  }
  return compareLsn(a.commitLsn, b.commitLsn) || a.xid - b.xid;
}

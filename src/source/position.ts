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

/** The two 32-bit halves of an LSN (both exact as numbers). Throws a `RangeError` on anything else. */
function halves(lsn: Lsn): [number, number] {
  if (typeof lsn !== 'string' || !LSN_PATTERN.test(lsn)) throw new RangeError(`not a PostgreSQL LSN (expected e.g. 0/1A2B3C): ${JSON.stringify(lsn)}`);
  const slash = lsn.indexOf('/');
  return [parseInt(lsn.slice(0, slash), 16), parseInt(lsn.slice(slash + 1), 16)];
}

/** `'16/B374D848'` → `0x16B374D848n`. Throws a `RangeError` on anything else. */
export function parseLsn(lsn: Lsn): bigint {
  const [hi, lo] = halves(lsn);
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** `0x16B374D848n` → `'16/B374D848'`, the form PostgreSQL 17 prints. */
export function formatLsn(value: bigint): Lsn {
  if (value < 0n || value > 0xffff_ffff_ffff_ffffn) throw new RangeError(`LSN out of range: ${value}`);
  const hi = value >> 32n;
  const lo = value & 0xffff_ffffn;
  return `${hi.toString(16).toUpperCase()}/${lo.toString(16).toUpperCase()}`;
}

/** Negative, zero or positive, like `Array.prototype.sort` wants. */
export function compareLsn(a: Lsn, b: Lsn): number {
  // Hot (receipts, checkpoints): compared as two exact 32-bit numbers, no bigint.
  const [ah, al] = halves(a);
  const [bh, bl] = halves(b);
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
  return formatLsn(buffer.readBigUInt64BE(offset));
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
  if (!/^\d+$/.test(parts.systemId)) throw new RangeError(`systemId must be a decimal string: ${parts.systemId}`);
  if (!Number.isInteger(parts.timeline) || parts.timeline < 1) throw new RangeError(`timeline must be a positive integer: ${parts.timeline}`);
  if (!/^[a-z0-9_]+$/.test(parts.slot)) throw new RangeError(`slot name must match [a-z0-9_]+: ${parts.slot}`);
  if (!Number.isInteger(parts.xid) || parts.xid < 0 || parts.xid > 0xffff_ffff) throw new RangeError(`xid must be a 32-bit unsigned integer: ${parts.xid}`);
  const commitLsn = formatLsn(parseLsn(parts.commitLsn));
  return [CHECKPOINT_VERSION, parts.systemId, String(parts.timeline), parts.slot, commitLsn, String(parts.xid)].join(':');
}

/** Builds a {@link SourcePosition} with its checkpoint string. */
export function makeSourcePosition(parts: PositionParts): SourcePosition {
  const checkpoint = encodeCheckpoint(parts);
  return {
    systemId: parts.systemId,
    timeline: parts.timeline,
    slot: parts.slot,
    commitLsn: formatLsn(parseLsn(parts.commitLsn)),
    xid: parts.xid,
    checkpoint,
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

/**
 * Receipts: the last applied source position, stamped on every event the sink appends, so the
 * tail of each stream says how far that stream got (DESIGN invariant 3).
 *
 * A receipt names a *unit* (one source transaction or one snapshot record) and the *ordinal* of
 * the event within that unit's events for this stream. When a unit is replayed after a crash,
 * its events for a stream are skipped up to and including the tail's ordinal and appended after
 * it — which also resumes a unit that was split across several appends (max append size) or
 * across streams (per-stream mode) and interrupted half-way.
 *
 * Metadata keys (flat strings, so multi-stream append can carry them):
 *
 * | key                   | value                                                            |
 * |-----------------------|------------------------------------------------------------------|
 * | `receipt.assembler`   | the assembler's name: one assembler owns a stream                |
 * | `receipt.kind`        | `transaction` or `snapshot`                                      |
 * | `receipt.source`      | source system identifier (`pg_control` system id), when known   |
 * | `receipt.commitLsn`   | transaction: commit LSN, `X/X`                                   |
 * | `receipt.xid`         | transaction: xid, decimal                                        |
 * | `receipt.lsn`         | snapshot: the LSN the record is ordered at (consistent point of  |
 * |                       | the initial snapshot, high watermark of an incremental chunk)    |
 * | `receipt.generation`  | snapshot: snapshot generation                                    |
 * | `receipt.sequence`    | snapshot: emit order of the record within its generation         |
 * | `receipt.table`       | snapshot: `schema.table` (diagnosis)                             |
 * | `receipt.key`         | snapshot: the row's key as text (diagnosis)                      |
 * | `receipt.ordinal`     | 0-based index of this event among the unit's events in this stream |
 * |                       | (scope `unit`: among all the unit's events, in every stream)     |
 * | `receipt.count`       | number of the unit's events in this stream (scope `unit`: in all) |
 * | `receipt.scope`       | `unit` for a unit appended in slices (see below); absent: stream |
 *
 * Scope. A unit small enough to be held whole numbers its events per stream. A unit of more
 * than `SLICED_UNIT_EVENTS` events (a bulk update, a backfill) reaches the sink in slices, in
 * bounded memory, and numbers each event by its place in the whole unit (`receipt.scope` =
 * `unit`): monotonic in every stream, computable slice by slice without holding a per-stream
 * tally. Whether a unit is sliced depends only on its number of events, so a replay numbers its
 * events as the first attempt did; a stream whose tail holds the same unit in the other scope
 * (written by a version that did not slice) is resolved by event id instead (see the sink).
 *
 * Order (one function, {@link compareReceipts}): within one assembler and one source system,
 * units are ordered by LSN — a transaction by its commit LSN (then xid), a snapshot record by its
 * `lsn` — and a snapshot record sorts before a transaction at the same LSN (it contains only what
 * committed before that point); snapshot records at the same LSN by generation, then sequence.
 * Within a unit, by ordinal. Receipts of different assemblers or source systems do not compare.
 */
import { compareLsn, isLsn } from '../source/position.js';
import type { Lsn } from '../source/types.js';

export const RECEIPT_KEYS = {
  assembler: 'receipt.assembler',
  kind: 'receipt.kind',
  source: 'receipt.source',
  commitLsn: 'receipt.commitLsn',
  xid: 'receipt.xid',
  lsn: 'receipt.lsn',
  generation: 'receipt.generation',
  sequence: 'receipt.sequence',
  table: 'receipt.table',
  key: 'receipt.key',
  ordinal: 'receipt.ordinal',
  count: 'receipt.count',
  scope: 'receipt.scope',
} as const;

/** Metadata keys starting with this prefix belong to the sink; events must not bring their own. */
export const RECEIPT_PREFIX = 'receipt.';

interface UnitBase {
  readonly assembler: string;
  /** Source system id; receipts from different systems never compare. */
  readonly source?: string;
}

export interface TransactionUnit extends UnitBase {
  readonly kind: 'transaction';
  readonly commitLsn: Lsn;
  readonly xid: number;
}

export interface SnapshotUnit extends UnitBase {
  readonly kind: 'snapshot';
  /** Where the record sits among transactions: the snapshot's consistent point or chunk high watermark. */
  readonly lsn: Lsn;
  readonly generation: string;
  /** Emit order within the generation (0, 1, 2, …). */
  readonly sequence: number;
  readonly table: string;
  readonly key: string;
}

/** What one append call is about: one source transaction or one snapshot record. */
export type ReceiptUnit = TransactionUnit | SnapshotUnit;

/**
 * What `ordinal` and `count` count: the unit's events in this stream (`stream`, the default) or
 * all the unit's events (`unit`: a unit appended in slices).
 */
export type ReceiptScope = 'stream' | 'unit';

/** A unit plus the event's place among that unit's events (in one stream, or in all: `scope`). */
export type Receipt = ReceiptUnit & { readonly ordinal: number; readonly count: number; readonly scope?: 'unit' };

export function receiptAt(unit: ReceiptUnit, ordinal: number, count: number, scope: ReceiptScope = 'stream'): Receipt {
  // Spelled out rather than spread (`{ ...unit, ordinal, count }`): one per appended stream, and
  // a spread of a unit cost ~3 µs in the profile. Same keys, same order.
  if (unit.kind === 'transaction') {
    const { assembler, source, commitLsn, xid } = unit;
    const receipt: Receipt =
      source === undefined ? { kind: 'transaction', assembler, commitLsn, xid, ordinal, count } : { kind: 'transaction', assembler, source, commitLsn, xid, ordinal, count };
    return scope === 'unit' ? { ...receipt, scope } : receipt;
  }
  return scope === 'unit' ? { ...unit, ordinal, count, scope } : { ...unit, ordinal, count };
}

/** The scope of a receipt's ordinal. */
export function scopeOf(receipt: Receipt): ReceiptScope {
  return receipt.scope ?? 'stream';
}

/** Whether {@link compareReceipts} may order the two (same assembler, same source system when both say). */
export function receiptsComparable(a: ReceiptUnit, b: ReceiptUnit): boolean {
  if (a.assembler !== b.assembler) return false;
  return a.source === undefined || b.source === undefined || a.source === b.source;
}

/** Orders units only (ignores ordinals). Throws a `RangeError` when they do not compare. */
export function compareUnits(a: ReceiptUnit, b: ReceiptUnit): number {
  if (!receiptsComparable(a, b)) {
    throw new RangeError(`receipts of different assemblers or sources do not compare: ${describeUnit(a)} vs ${describeUnit(b)}`);
  }
  const lsnA = a.kind === 'transaction' ? a.commitLsn : a.lsn;
  const lsnB = b.kind === 'transaction' ? b.commitLsn : b.lsn;
  const byLsn = compareLsn(lsnA, lsnB);
  if (byLsn !== 0) return byLsn;
  if (a.kind !== b.kind) return a.kind === 'snapshot' ? -1 : 1;
  if (a.kind === 'transaction' && b.kind === 'transaction') return a.xid - b.xid;
  if (a.kind === 'snapshot' && b.kind === 'snapshot') {
    if (a.generation !== b.generation) return compareGenerations(a.generation, b.generation);
    return a.sequence - b.sequence;
  }
  return 0;
}

/**
 * Snapshot generations in the order they were made: `nextGeneration` counts decimals up
 * (`9` → `10`) and appends `.1` to anything else, so compare dot-separated parts, numerically
 * where both are decimal ("9" < "10"), a prefix before its extensions ("a" < "a.1").
 */
export function compareGenerations(a: string, b: string): number {
  const pa = a.split('.');
  const pb = b.split('.');
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    if (/^\d+$/.test(x) && /^\d+$/.test(y)) return BigInt(x) < BigInt(y) ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return pa.length - pb.length;
}

/**
 * The one comparison of receipts: by unit, then ordinal. Throws a `RangeError` when they do not
 * compare — different assemblers or sources, or the same unit numbered in different scopes
 * (check {@link ordinalsComparable}; the sink then compares by event id).
 */
export function compareReceipts(a: Receipt, b: Receipt): number {
  const byUnit = compareUnits(a, b);
  if (byUnit !== 0) return byUnit;
  if (scopeOf(a) !== scopeOf(b)) throw new RangeError(`ordinals of ${describeUnit(a)} do not compare: one counts per stream, the other across the unit`);
  return a.ordinal - b.ordinal;
}

/** Whether two receipts of the same unit number their events in the same scope (receipts of different units always compare by unit). */
export function ordinalsComparable(a: Receipt, b: Receipt): boolean {
  return compareUnits(a, b) !== 0 || scopeOf(a) === scopeOf(b);
}

/** The receipt as flat, string-valued event metadata. */
export function receiptToMetadata(receipt: Receipt): Record<string, string> {
  const metadata = receiptUnitMetadata(receipt);
  metadata[RECEIPT_KEYS.ordinal] = String(receipt.ordinal);
  metadata[RECEIPT_KEYS.count] = String(receipt.count);
  if (receipt.scope === 'unit') metadata[RECEIPT_KEYS.scope] = 'unit';
  return metadata;
}

/** The unit's part of the receipt metadata (all but ordinal and count): the same for every event of a unit. */
export function receiptUnitMetadata(receipt: ReceiptUnit): Record<string, string> {
  const k = RECEIPT_KEYS;
  const metadata: Record<string, string> = { [k.assembler]: receipt.assembler, [k.kind]: receipt.kind };
  if (receipt.source !== undefined) metadata[k.source] = receipt.source;
  if (receipt.kind === 'transaction') {
    metadata[k.commitLsn] = receipt.commitLsn;
    metadata[k.xid] = String(receipt.xid);
  } else {
    metadata[k.lsn] = receipt.lsn;
    metadata[k.generation] = receipt.generation;
    metadata[k.sequence] = String(receipt.sequence);
    metadata[k.table] = receipt.table;
    metadata[k.key] = receipt.key;
  }
  return metadata;
}

/**
 * Reads a receipt back from event metadata as the client returns it (parsed JSON, raw bytes or
 * nothing). `null` when there is none or it is malformed — to the sink, the same thing: an event
 * this assembler did not write.
 */
export function receiptFromMetadata(metadata: unknown): Receipt | null {
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata) || metadata instanceof Uint8Array) return null;
  const m = metadata as Record<string, unknown>;
  const text = (key: string): string | undefined => (typeof m[key] === 'string' ? (m[key] as string) : undefined);
  const integer = (key: string): number | undefined => {
    const value = text(key);
    return value !== undefined && /^\d+$/.test(value) ? Number(value) : undefined;
  };
  const k = RECEIPT_KEYS;
  const assembler = text(k.assembler);
  const ordinal = integer(k.ordinal);
  const count = integer(k.count);
  if (assembler === undefined || ordinal === undefined || count === undefined) return null;
  const scope = text(k.scope);
  if (scope !== undefined && scope !== 'unit') return null;
  const source = text(k.source);
  const base = source === undefined ? { assembler } : { assembler, source };
  const placed = scope === 'unit' ? { ordinal, count, scope: 'unit' as const } : { ordinal, count };
  switch (text(k.kind)) {
    case 'transaction': {
      const commitLsn = text(k.commitLsn);
      const xid = integer(k.xid);
      if (commitLsn === undefined || !isLsn(commitLsn) || xid === undefined) return null;
      return { ...base, kind: 'transaction', commitLsn, xid, ...placed };
    }
    case 'snapshot': {
      const lsn = text(k.lsn);
      const generation = text(k.generation);
      const sequence = integer(k.sequence);
      const table = text(k.table);
      const key = text(k.key);
      if (lsn === undefined || !isLsn(lsn) || generation === undefined || sequence === undefined || table === undefined || key === undefined) return null;
      return { ...base, kind: 'snapshot', lsn, generation, sequence, table, key, ...placed };
    }
    default:
      return null;
  }
}

export function describeUnit(unit: ReceiptUnit): string {
  return unit.kind === 'transaction'
    ? `transaction ${unit.commitLsn}/xid ${unit.xid} (${unit.assembler})`
    : `snapshot ${unit.generation} #${unit.sequence} ${unit.table} ${unit.key} at ${unit.lsn} (${unit.assembler})`;
}

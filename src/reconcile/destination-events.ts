/**
 * The destination side: one forward pass over `$all`, filtered on the server by the reconcilers'
 * stream prefixes, and the cut rule for each event — a transaction's events count when its commit
 * LSN is before the cut, a snapshot record's when the LSN it is ordered at is not after it (the
 * record holds only what committed before that LSN). The positions come from the receipts the
 * sink stamps (docs: src/sink/receipt.ts; read in either form by `receiptFromMetadata`); an event
 * without one (written by someone else) counts: it is in the destination now, and the comparison
 * should see it.
 */
import { FORWARDS, START, streamNameFilter, type KurrentDBClient } from '@kurrent/kurrentdb-client';
import { RECEIPT_KEY, RECEIPT_KEYS, receiptFromMetadata } from '../sink/receipt.js';
import { compareLsn, isLsn } from '../source/position.js';
import type { Lsn } from '../source/types.js';
import { FOLD_METADATA_KEYS } from './compare.js';
import type { ReconcileEvent } from './define-reconciler.js';

/** The LSN an event is ordered at, and whether it is a snapshot record's (`null`: no receipt). */
export function eventPosition(metadata: Readonly<Record<string, string>>): { readonly lsn: Lsn; readonly snapshot: boolean } | null {
  const receipt = receiptFromMetadata(metadata);
  if (receipt !== null) return receipt.kind === 'snapshot' ? { lsn: receipt.lsn, snapshot: true } : { lsn: receipt.commitLsn, snapshot: false };
  const lsn = metadata['source.commitLsn'];
  return lsn !== undefined && isLsn(lsn) ? { lsn, snapshot: false } : null;
}

/** Whether an event belongs to the cut at `cut`. */
export function inCut(metadata: Readonly<Record<string, string>>, cut: Lsn): boolean {
  const position = eventPosition(metadata);
  if (position === null) return true;
  const order = compareLsn(position.lsn, cut);
  return position.snapshot ? order <= 0 : order < 0;
}

function contractVersion(metadata: Readonly<Record<string, string>>, type: string): number | null {
  const contract = metadata['contract'];
  if (contract === undefined) return null;
  const at = contract.lastIndexOf('@');
  const version = Number(contract.slice(at + 1));
  return at > 0 && contract.slice(0, at) === type && Number.isInteger(version) ? version : null;
}

/**
 * Metadata keys an event is read with: what the fold sees and what the cut rule needs (the
 * receipt, in either form). The sink stamps about twenty (diagnosis, transaction boundaries);
 * copying them all cost more than any other step of the destination pass (0.6 of 10.7 s CPU for
 * 200,000 events, bench:reconcile). `receipt.kind` is not read: the fold's is the parsed receipt's.
 */
const READ_METADATA_KEYS = [...new Set([...FOLD_METADATA_KEYS.filter((key) => key !== 'receipt.kind'), 'source.commitLsn', RECEIPT_KEY])];
/** The flat receipt keys of events written by earlier versions, read only where there is no `receipt`. */
const FLAT_RECEIPT_KEYS: readonly string[] = Object.values(RECEIPT_KEYS);

function copyStrings(value: object, keys: readonly string[], out: Record<string, string>): void {
  for (const key of keys) {
    const v = Object.hasOwn(value, key) ? (value as Record<string, unknown>)[key] : undefined;
    if (typeof v === 'string') out[key] = v;
  }
}

function stringMetadata(value: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return out;
  copyStrings(value, READ_METADATA_KEYS, out);
  if (out[RECEIPT_KEY] === undefined) copyStrings(value, FLAT_RECEIPT_KEYS, out);
  // The fold's `receipt.kind` (docs/reconcile.md), whichever form the receipt was written in.
  const receipt = receiptFromMetadata(out);
  if (receipt !== null) out[RECEIPT_KEYS.kind] = receipt.kind;
  return out;
}

function dataOf(value: unknown): unknown {
  if (value instanceof Uint8Array) {
    const text = Buffer.from(value).toString('utf8');
    try {
      return text === '' ? null : JSON.parse(text);
    } catch {
      return text;
    }
  }
  return value;
}

/** A recorded event as a reconciler folds it: string metadata, the contract version, JSON data. */
export function toReconcileEvent(stream: string, type: string, data: unknown, metadata: unknown): ReconcileEvent {
  const strings = stringMetadata(metadata);
  return { stream, type, version: contractVersion(strings, type), data: dataOf(data), metadata: strings };
}

/** An event of an entity stream with its revision, or a change of the stream's visibility. */
export type DestinationRecord =
  | { readonly kind: 'event'; readonly revision: number; readonly event: ReconcileEvent }
  /** `$tb` (truncate before) from the stream's metadata: a soft delete sets it past every event. */
  | { readonly kind: 'truncate'; readonly stream: string; readonly before: number }
  /** A tombstone (hard delete). */
  | { readonly kind: 'tombstone'; readonly stream: string };

/** KurrentDB's `EventNumber.DeletedStream` (int64 max) and anything beyond 2^53 read as "every event". */
const ALL = Number.MAX_SAFE_INTEGER;

function truncateBefore(data: unknown): number | null {
  const tb = (data as { $tb?: unknown } | null)?.$tb;
  if (typeof tb === 'number') return tb >= ALL ? ALL : tb;
  if (typeof tb === 'string' && /^\d+$/.test(tb)) return Math.min(Number(tb), ALL);
  return null;
}

/**
 * Every record of streams starting with one of `prefixes` — their events, and from their
 * metastreams (`$$<stream>`) what hides events from a stream read (a truncation, a soft delete) —
 * in `$all` order, so in revision order per stream. A stream read would not show an event before
 * `$tb`, nor any after a tombstone: neither does the fold (`$all` keeps them until a scavenge).
 */
export async function* destinationRecords(client: KurrentDBClient, prefixes: readonly string[]): AsyncGenerator<DestinationRecord> {
  const filter = streamNameFilter({ prefixes: [...prefixes, ...prefixes.map((p) => `$$${p}`)] });
  for await (const resolved of client.readAll({ direction: FORWARDS, fromPosition: START, filter })) {
    const event = resolved.event;
    if (!event) continue;
    if (event.streamId.startsWith('$$')) {
      const before = event.type === '$metadata' ? truncateBefore(dataOf(event.data)) : null;
      if (before !== null) yield { kind: 'truncate', stream: event.streamId.slice(2), before };
      continue;
    }
    if (event.type === '$streamDeleted') {
      yield { kind: 'tombstone', stream: event.streamId };
      continue;
    }
    yield { kind: 'event', revision: Number(event.revision), event: toReconcileEvent(event.streamId, event.type, event.data, event.metadata) };
  }
}

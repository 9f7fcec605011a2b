// The chaos run's check of "Entity streams begin at their beginning" (docs/snapshots.md) on the
// invoice streams of the destination: every seeded invoice's stream begins with exactly one
// InvoiceImported (the row at the slot's consistent point) and no InvoiceImported follows another
// event in any stream — whether the invoice was read by the exported snapshot, by a resumed
// chunk, or from the before-image of its first change written while the snapshot was unfinished.
import { receiptFromMetadata } from '../../src/sink/receipt.js';
import { parseLsn } from '../../src/source/position.js';
import type { DestinationEvent } from '../../src/testing/verify-destination.js';

export const SNAPSHOT_EVENT = 'InvoiceImported';

export interface StreamBeginnings {
  /** Seeded invoices (each must have a stream). */
  readonly seeded: number;
  /** Seeded invoices whose stream begins with InvoiceImported. */
  readonly beginWithImport: number;
  /** Seeded invoices whose stream holds exactly one InvoiceImported. */
  readonly exactlyOneImport: number;
  /** Seeded invoices whose stream has events after its InvoiceImported (changed during the run). */
  readonly changedAfterImport: number;
  /** Seeded invoices with no stream at all. */
  readonly withoutStream: string[];
  /** Streams (any) with an InvoiceImported after another event: must be none. */
  readonly importAfterOther: string[];
  /** Seeded invoice streams that begin with something else, or hold more than one InvoiceImported: must be none. */
  readonly badBeginning: string[];
  /** InvoiceImported in the stream of an invoice that was not seeded: must be none. */
  readonly importOfUnseeded: string[];
  readonly ok: boolean;
}

/** Checks the destination's invoice streams; `events` in per-stream revision order (readDestination). */
export function checkStreamBeginnings(events: readonly DestinationEvent[], seededInvoiceIds: readonly string[]): StreamBeginnings {
  const byStream = new Map<string, string[]>();
  for (const e of events) {
    if (!e.stream.startsWith('invoice-')) continue;
    const types = byStream.get(e.stream);
    if (types) types.push(e.type);
    else byStream.set(e.stream, [e.type]);
  }
  const seeded = new Set(seededInvoiceIds.map((id) => `invoice-${id}`));
  let beginWithImport = 0;
  let exactlyOneImport = 0;
  let changedAfterImport = 0;
  const withoutStream: string[] = [];
  const importAfterOther: string[] = [];
  const badBeginning: string[] = [];
  const importOfUnseeded: string[] = [];
  for (const stream of seeded) {
    const types = byStream.get(stream);
    if (!types) {
      withoutStream.push(stream);
      continue;
    }
    const imports = types.filter((t) => t === SNAPSHOT_EVENT).length;
    if (types[0] === SNAPSHOT_EVENT) beginWithImport += 1;
    if (imports === 1) exactlyOneImport += 1;
    if (types[0] !== SNAPSHOT_EVENT || imports !== 1) badBeginning.push(`${stream}: ${types.join(', ')}`);
    else if (types.length > 1) changedAfterImport += 1;
  }
  for (const [stream, types] of byStream) {
    if (types.slice(1).includes(SNAPSHOT_EVENT)) importAfterOther.push(`${stream}: ${types.join(', ')}`);
    if (!seeded.has(stream) && types.includes(SNAPSHOT_EVENT)) importOfUnseeded.push(`${stream}: ${types.join(', ')}`);
  }
  const ok = withoutStream.length === 0 && importAfterOther.length === 0 && badBeginning.length === 0 && importOfUnseeded.length === 0 && beginWithImport === seeded.size && exactlyOneImport === seeded.size;
  return { seeded: seeded.size, beginWithImport, exactlyOneImport, changedAfterImport, withoutStream, importAfterOther, badBeginning, importOfUnseeded, ok };
}

export function formatStreamBeginnings(b: StreamBeginnings, maxListed = 10): string {
  const list = (name: string, items: readonly string[]) => (items.length === 0 ? [] : [`  ${name} (${items.length}):`, ...items.slice(0, maxListed).map((s) => `    ${s}`)]);
  return [
    `invoice streams: ${b.seeded} seeded, ${b.beginWithImport} begin with ${SNAPSHOT_EVENT}, ${b.exactlyOneImport} hold exactly one, ${b.changedAfterImport} changed after it; ` +
      `${b.importAfterOther.length} with ${SNAPSHOT_EVENT} after another event, ${b.importOfUnseeded.length} of unseeded invoices with one, ${b.withoutStream.length} seeded without a stream — ${b.ok ? 'OK' : 'VIOLATED'}`,
    ...list('beginning otherwise or with more than one import', b.badBeginning),
    ...list(`${SNAPSHOT_EVENT} after another event`, b.importAfterOther),
    ...list(`${SNAPSHOT_EVENT} of an unseeded invoice`, b.importOfUnseeded),
    ...list('seeded without a stream', b.withoutStream),
  ].join('\n');
}

/** Where each seeded invoice's InvoiceImported came from, told by its receipt position. */
export interface ImportOrigins {
  /** Read by the exported snapshot of the first process: at the consistent point. */
  readonly exportedSnapshot: number;
  /** Made from the before-image of the row's first change: at that change's commit LSN (the next event's). */
  readonly beforeImage: number;
  /** Read by a chunk of the resumed snapshot (at its watermark). */
  readonly resumedChunk: number;
  /** Streams whose first event carries no receipt position. */
  readonly unknown: number;
}

interface StoredEventLike {
  readonly type: string;
  readonly metadata: Uint8Array;
}

const decoder = new TextDecoder();

export function importOrigins(readStream: (stream: string) => readonly StoredEventLike[], seededInvoiceIds: readonly string[], consistentPoint: bigint): ImportOrigins {
  const counts = { exportedSnapshot: 0, beforeImage: 0, resumedChunk: 0, unknown: 0 };
  const receipt = (e: StoredEventLike | undefined) => (e ? receiptFromMetadata(JSON.parse(decoder.decode(e.metadata))) : null);
  for (const id of seededInvoiceIds) {
    const [first, second] = readStream(`invoice-${id}`);
    const record = receipt(first);
    const change = receipt(second);
    if (first?.type !== SNAPSHOT_EVENT || record?.kind !== 'snapshot') counts.unknown += 1;
    else if (parseLsn(record.lsn) === consistentPoint) counts.exportedSnapshot += 1;
    else if (change?.kind === 'transaction' && parseLsn(change.commitLsn) === parseLsn(record.lsn)) counts.beforeImage += 1;
    else counts.resumedChunk += 1;
  }
  return counts;
}

// Units prepared when queued (`Sink.prepare`): in multi-stream mode the sink encodes a unit's
// events then and keeps only their records, so a queued unit does not hold the mapper's objects.
// What lands must be exactly what an unprepared unit gives — also when the server stops serving
// multi-stream append while prepared units wait, and the sink falls back to per-stream appends,
// which need the data and metadata back from the records.
import { describe, expect, it } from 'vitest';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { checkpointStreamName, type SinkBatch, type SinkEvent, type TransactionSinkPosition } from '../../src/sink/index.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { sinkFactory, stored, useInMemoryKurrentDB, type LogLine } from '../support/kurrentdb-rig.js';

const { cleanups, server } = useInMemoryKurrentDB();
const sink = sinkFactory(cleanups);

const SYSTEM_ID = '7391029384756102938';

/** Transaction `n` of `scope`: two events in `invoice-<scope>-<n>`, one in a stream shared by all transactions. */
function tx(scope: string, n: number): SinkBatch {
  const commitLsn = `0/${(0x10000 + n * 0x100).toString(16).toUpperCase()}`;
  const xid = 800 + n;
  const position: TransactionSinkPosition = { checkpoint: `v1:${SYSTEM_ID}:1:slot_a:${commitLsn}:${xid}`, commitLsn, xid, systemId: SYSTEM_ID };
  const streams = [`invoice-${scope}-${n}`, `ledger-${scope}`, `invoice-${scope}-${n}`];
  const events = streams.map((stream, index): SinkEvent => ({
    id: uuidv5(JSON.stringify([scope, n, index])),
    stream,
    type: index === 1 ? 'LedgerPosted' : 'InvoiceLineAdded',
    // Not plain ASCII in one of them: that record is encoded the general way.
    data: { n, index, note: n % 2 === 0 ? 'ü "quoted" 日本' : 'plain', amounts: [1.5, n] },
    metadata: { 'source.commitLsn': commitLsn, 'source.xid': String(xid), 'transaction.index': String(index), ...(n % 3 === 0 ? { note: 'cödé' } : {}) },
  }));
  return { position, events };
}

/** Every stream the units touch, with the checkpoint stream: what a destination holds of them. */
function contents(db: InMemoryKurrentDB, scope: string, units: number, assembler: string) {
  const streams = [`ledger-${scope}`, checkpointStreamName(assembler)];
  for (let n = 1; n <= units; n++) streams.push(`invoice-${scope}-${n}`);
  return Object.fromEntries(streams.map((stream) => [stream, stored(db, stream)]));
}

describe('units prepared when queued', () => {
  it('multi-stream: prepared units land exactly as unprepared ones, and the prepared batch keeps ids, streams and types in order', async () => {
    // Two servers, the same units and assembler: one sink appends them as given, the other prepared.
    const UNITS = 12;
    const plainDb = await server({ features: { multiStreamAppend: true } });
    const preparedDb = await server({ features: { multiStreamAppend: true } });
    const plain = await sink(plainDb, { assembler: 'asm_p' });
    const prepared = await sink(preparedDb, { assembler: 'asm_p' });
    expect(prepared.mode).toBe('multi-stream');

    const batches = Array.from({ length: UNITS }, (_, i) => tx('p', i + 1));
    await plain.appendMany(batches);
    const queued = batches.map((batch) => prepared.prepare!(batch));
    for (const [i, batch] of queued.entries()) {
      expect(batch).not.toBe(batches[i]);
      expect(batch.position).toEqual(batches[i]!.position);
      expect(batch.events.map((e) => [e.id, e.stream, e.type])).toEqual(batches[i]!.events.map((e) => [e.id, e.stream, e.type]));
      expect(prepared.prepare!(batch)).toBe(batch); // prepared once
    }
    const outcomes = await prepared.appendMany(queued);
    expect(outcomes.map((o) => [o.appended, o.skipped, o.checkpoint])).toEqual(Array.from({ length: UNITS }, (_, i) => [3, 0, i === UNITS - 1 ? 'appended' : 'none']));
    const expected = contents(plainDb, 'p', UNITS, 'asm_p');
    expect(Object.values(expected).flat()).toHaveLength(UNITS * 3 + 1);
    expect(contents(preparedDb, 'p', UNITS, 'asm_p')).toEqual(expected);
  });

  it('a server that stops serving multi-stream append while prepared units wait: they go per-stream, each event once, data and metadata intact', async () => {
    const db = await server({ features: { multiStreamAppend: true } });
    const logs: LogLine[] = [];
    const s = await sink(db, { assembler: 'asm_fallback' }, logs);
    expect(s.mode).toBe('multi-stream');
    const batches = Array.from({ length: 6 }, (_, i) => tx('c', i + 1));
    const queued = batches.map((batch) => s.prepare!(batch));
    // Two: a failed attempt on the framed connection is sent once more on the client's own path.
    db.failNextAppends(2, 'unimplemented');
    const outcomes = await s.appendMany(queued);
    expect(outcomes.map((o) => o.appended)).toEqual([3, 3, 3, 3, 3, 3]);
    expect(outcomes.every((o) => o.mode === 'per-stream')).toBe(true);
    expect(logs.some((line) => line.message.includes('switching to per-stream appends'))).toBe(true);

    for (const batch of batches) {
      for (const stream of new Set(batch.events.map((e) => e.stream))) {
        const mine = batch.events.filter((e) => e.stream === stream);
        const landed = stored(db, stream).filter((e) => mine.some((m) => m.id === e.id));
        expect(landed.map((e) => e.id)).toEqual(mine.map((e) => e.id));
        for (const [i, event] of landed.entries()) {
          expect(event.data).toEqual(mine[i]!.data);
          const { receipt, ...rest } = event.metadata;
          expect(rest).toEqual(mine[i]!.metadata);
          expect(receipt).toMatch(/^r1\|t\|asm_fallback\|/);
        }
      }
    }
    // Every event once: 6 units × 3 events, and a checkpoint event.
    expect(stored(db, 'ledger-c')).toHaveLength(6);
    expect(stored(db, checkpointStreamName('asm_fallback'))).toHaveLength(1);
  });
});

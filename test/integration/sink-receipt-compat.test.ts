// A destination written by an earlier version — receipts as the flat `receipt.*` keys — replayed
// by this one, which writes the one `receipt` property: what is there is skipped, what is missing
// is appended once, in order, and the streams then hold both forms side by side.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { jsonEvent, KurrentDBClient, type EventData } from '@kurrent/kurrentdb-client';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import {
  checkpointStreamName,
  compareReceipts,
  createKurrentDBSink,
  flatReceiptMetadata,
  receiptAt,
  receiptFromMetadata,
  type KurrentDBSink,
  type Receipt,
  type ReceiptUnit,
  type SinkBatch,
  type SinkEvent,
} from '../../src/sink/index.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { useInMemoryKurrentDB } from '../support/kurrentdb-rig.js';

const { cleanups, server } = useInMemoryKurrentDB();
const SOURCE = '7391029384756102938';

/** A unit: the batch the sink is given (slices: several), and the receipt unit it stands for. */
interface Unit {
  readonly batches: readonly SinkBatch[];
  readonly unit: ReceiptUnit;
  readonly events: readonly SinkEvent[];
  readonly sliced: boolean;
}

function metadataOf(db: InMemoryKurrentDB, stream: string): Record<string, string>[] {
  return db.readStreamEvents(stream).map((event) => JSON.parse(Buffer.from(event.metadata).toString('utf8')) as Record<string, string>);
}

describe.each([
  { mode: 'multi-stream' as const, features: { multiStreamAppend: true } },
  { mode: 'per-stream' as const, features: { multiStreamAppend: false } },
])('a destination written with flat receipt.* keys, replayed ($mode)', ({ mode, features }) => {
  it('skips what is there, appends what is missing once and in order, and recognises both forms afterwards', async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const assembler = `asm_${id}`;
    const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((s) => `invoice-${id}-${s}`) as [string, string, string, string];
    const event = (key: string, stream: string, metadata: Record<string, string> = {}): SinkEvent => ({
      id: uuidv5(`${id}/${key}`),
      stream,
      type: 'InvoiceChanged',
      data: { key },
      metadata: { contract: 'InvoiceChanged@1', ...metadata },
    });
    const record = (sequence: number, stream: string): Unit => {
      const position = { kind: 'snapshot' as const, snapshotGeneration: 'g1', lsn: '0/500', sequence, table: 'public.invoice', key: `{"id":${sequence}}`, systemId: SOURCE };
      const events = [event(`snap/${sequence}`, stream, { 'snapshot.generation': 'g1' })];
      const unit: ReceiptUnit = { kind: 'snapshot', assembler, source: SOURCE, lsn: '0/500', generation: 'g1', sequence, table: 'public.invoice', key: `{"id":${sequence}}` };
      return { batches: [{ position, events }], unit, events, sliced: false };
    };
    const change = (commitLsn: string, xid: number, streams: readonly string[], sliceSize?: number): Unit => {
      const position = { checkpoint: `v1:${SOURCE}:1:slot:${commitLsn}:${xid}`, commitLsn, xid, systemId: SOURCE };
      const events = streams.map((stream, i) => event(`tx/${xid}/${i}`, stream, { 'source.commitLsn': commitLsn, 'source.xid': String(xid) }));
      const unit: ReceiptUnit = { kind: 'transaction', assembler, source: SOURCE, commitLsn, xid };
      if (sliceSize === undefined) return { batches: [{ position, events }], unit, events, sliced: false };
      const batches: SinkBatch[] = [];
      for (let offset = 0; offset < events.length; offset += sliceSize) batches.push({ position, events: events.slice(offset, offset + sliceSize), slice: { offset, total: events.length } });
      return { batches, unit, events, sliced: true };
    };
    const bulk = Array.from({ length: 1_200 }, (_, i) => (i % 2 === 0 ? c : d)); // more than SLICED_UNIT_EVENTS: sliced, numbered across the unit
    const units: Unit[] = [
      record(0, a),
      record(1, b),
      change('0/600', 10, [a, b, a]),
      change('0/700', 11, [a, a, a, b]),
      change('0/800', 12, bulk, 600),
      change('0/900', 13, [a, c]),
    ];

    // The earlier version's destination: units 0–2 whole, unit 3 cut short in `a` (not in `b`),
    // the bulk unit cut short in both its streams (`c` up to 698, `d` up to 499), the checkpoint of unit 2.
    const written = (unit: Unit, index: number): boolean => {
      if (unit === units[3]) return unit.events[index]!.stream === a && index < 2;
      if (unit === units[4]) return unit.events[index]!.stream === c ? index < 700 : index < 500;
      return unit !== units[5];
    };
    const old = new Map<string, EventData[]>();
    for (const unit of units) {
      const perStream = new Map<string, number>();
      const counts = new Map<string, number>();
      for (const e of unit.events) counts.set(e.stream, (counts.get(e.stream) ?? 0) + 1);
      unit.events.forEach((e, index) => {
        const ordinal = perStream.get(e.stream) ?? 0;
        perStream.set(e.stream, ordinal + 1);
        if (!written(unit, index)) return;
        const receipt = unit.sliced ? receiptAt(unit.unit, index, unit.events.length, 'unit') : receiptAt(unit.unit, ordinal, counts.get(e.stream)!);
        const list = old.get(e.stream) ?? [];
        list.push(jsonEvent({ id: e.id, type: e.type, data: e.data as Record<string, unknown>, metadata: { ...e.metadata, ...flatReceiptMetadata(receipt) } }));
        old.set(e.stream, list);
      });
    }
    const lastWhole = units[2]!;
    const checkpointUnit = lastWhole.unit as ReceiptUnit & { kind: 'transaction' };
    const checkpointPosition = lastWhole.batches[0]!.position as { checkpoint: string };
    old.set(checkpointStreamName(assembler), [
      jsonEvent({
        id: uuidv5(JSON.stringify(['checkpoint', assembler, 'transaction', SOURCE, checkpointUnit.commitLsn, checkpointUnit.xid])),
        type: 'CheckpointRecorded',
        data: { assembler, position: lastWhole.batches[0]!.position as unknown as Record<string, unknown> },
        metadata: { contract: 'CheckpointRecorded@1', 'source.checkpoint': checkpointPosition.checkpoint, ...flatReceiptMetadata(receiptAt(checkpointUnit, 0, 1)) },
      }),
    ]);
    const client = KurrentDBClient.connectionString(db.connectionString);
    cleanups.push(() => client.dispose());
    for (const [stream, events] of old) await client.appendToStream(stream, events);
    const before = new Map([...old].map(([stream, events]) => [stream, events.map((e) => e.id)]));
    expect(metadataOf(db, a).every((m) => m['receipt'] === undefined && m['receipt.kind'] !== undefined)).toBe(true);

    // Replay from the start with this version, then one unit more.
    const sink = async (): Promise<KurrentDBSink> => {
      const created = await createKurrentDBSink({ connectionString: db.connectionString, assembler, retry: { initialDelayMs: 5, maxDelayMs: 50 } });
      cleanups.push(() => created.close());
      return created;
    };
    const s1 = await sink();
    expect(s1.mode).toBe(mode);
    const outcomes = [];
    for (const unit of units) for (const batch of unit.batches) outcomes.push(await s1.append(batch));
    expect(outcomes.map((o) => [o.appended, o.skipped])).toEqual([
      [0, 1],
      [0, 1],
      [0, 3],
      [2, 2],
      [50, 550], // slice 0–599: `d` from 501 on is missing
      [550, 50], // slice 600–1199: `c` up to 698 is there
      [2, 0],
    ]);
    expect(outcomes.slice(0, 3).map((o) => o.checkpoint)).toEqual(['skipped', 'skipped', 'skipped']);
    await s1.close();

    // Every event once, in unit order, per stream; what was there untouched (old form), the rest in the new.
    for (const stream of [a, b, c, d]) {
      const expected = units.flatMap((unit) => unit.events.filter((e) => e.stream === stream).map((e) => e.id));
      expect(db.readStreamEvents(stream).map((e) => e.id), stream).toEqual(expected);
      const metadata = metadataOf(db, stream);
      const kept = before.get(stream)?.length ?? 0;
      expect(metadata.slice(0, kept).every((m) => m['receipt'] === undefined && m['receipt.assembler'] === assembler), stream).toBe(true);
      expect(metadata.slice(kept).every((m) => typeof m['receipt'] === 'string' && Object.keys(m).every((k) => !k.startsWith('receipt.'))), stream).toBe(true);
      const receipts = metadata.map((m) => receiptFromMetadata(m));
      expect(receipts.every((r) => r !== null)).toBe(true);
      for (let i = 1; i < receipts.length; i++) expect(compareReceipts(receipts[i - 1] as Receipt, receipts[i] as Receipt), `${stream} #${i}`).toBeLessThan(0);
    }
    expect(db.readStreamEvents(checkpointStreamName(assembler))).toHaveLength(4); // the earlier version's, then units 3, 4 and 5

    // Replayed again (tails in the new form now, the older events behind them): nothing appended.
    const s2 = await sink();
    for (const unit of units) for (const batch of unit.batches) expect(await s2.append(batch)).toMatchObject({ appended: 0 });
    for (const stream of [a, b, c, d]) expect(db.readStreamEvents(stream)).toHaveLength(units.flatMap((u) => u.events).filter((e) => e.stream === stream).length);
  });
});

// The KurrentDB sink against the in-memory KurrentDB, through the real client over gRPC:
// new streams, replays (same instance, new instance, server restart), crashes between appends,
// another writer, modes, and the max append size.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import {
  createKurrentDBSink,
  checkpointStreamName,
  OversizedEventError,
  StreamConflictError,
  SinkError,
  receiptFromMetadata,
  type TransactionUnit,
  type SinkEvent,
  type TransactionSinkPosition,
} from '../../src/sink/index.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { sinkFactory, stored, useInMemoryKurrentDB, type LogLine } from '../support/kurrentdb-rig.js';

// ---- rig ----------------------------------------------------------------------------------

const { cleanups, server } = useInMemoryKurrentDB();

const sink = sinkFactory(cleanups);

const SYSTEM_ID = '7391029384756102938';

/** Source transaction `n` with events `[stream, type, data?]`, ids deterministic in (scope, n, ordinal). */
interface TxBatch {
  readonly position: TransactionSinkPosition;
  readonly events: readonly SinkEvent[];
}

function tx(scope: string, n: number, events: ReadonlyArray<readonly [string, string, unknown?]>): TxBatch {
  const commitLsn = `0/${(0x10000 + n * 0x100).toString(16).toUpperCase()}`;
  const xid = 800 + n;
  return {
    position: { checkpoint: `v1:${SYSTEM_ID}:1:slot_a:${commitLsn}:${xid}`, commitLsn, xid, systemId: SYSTEM_ID },
    events: events.map(([stream, type, data], index): SinkEvent => ({
      id: uuidv5(JSON.stringify([scope, n, index])),
      stream,
      type,
      data: data ?? { n, index },
      metadata: {
        'source.commitLsn': commitLsn,
        'source.xid': String(xid),
        'transaction.index': String(index),
        'transaction.count': String(events.length),
        contract: `${type}@1`,
      },
    })),
  };
}

function ids(db: InMemoryKurrentDB, stream: string): string[] {
  return db.readStreamEvents(stream).map((event) => event.id);
}

function unique(): string {
  return randomUUID().slice(0, 8);
}

// ---- both modes ---------------------------------------------------------------------------

describe.each([
  { mode: 'multi-stream' as const, path: 'AppendSession', features: { multiStreamAppend: true } },
  { mode: 'per-stream' as const, path: 'BatchAppend', features: { multiStreamAppend: false } },
  { mode: 'per-stream' as const, path: 'Append', features: { multiStreamAppend: false, batchAppend: false } },
])('KurrentDB sink, $mode mode via $path (detected)', ({ mode, features }) => {
  it('appends a transaction to new streams with receipts, and its checkpoint event', async () => {
    const db = await server({ features });
    const logs: LogLine[] = [];
    const id = unique();
    const a = `invoice-${id}-1`;
    const b = `customer-${id}-7`;
    const s = await sink(db, { assembler: `asm_${id}` }, logs);
    expect(s.mode).toBe(mode);
    expect(logs.find((line) => line.message === 'kurrentdb sink started')?.fields).toMatchObject({ mode });

    const batch = tx(id, 1, [
      [a, 'InvoiceIssued'],
      [b, 'CustomerBilled'],
      [a, 'InvoiceLineAdded'],
    ]);
    const outcome = await s.append(batch);

    expect(outcome).toMatchObject({ appended: 3, skipped: 0, checkpoint: 'appended', mode });
    expect(outcome.streams).toEqual([
      { stream: a, appended: 2, skipped: 0, revision: 1n },
      { stream: b, appended: 1, skipped: 0, revision: 0n },
    ]);
    const events = stored(db, a);
    expect(events.map((e) => [e.type, e.revision, e.id])).toEqual([
      ['InvoiceIssued', 0n, batch.events[0]!.id],
      ['InvoiceLineAdded', 1n, batch.events[2]!.id],
    ]);
    // Metadata: the mapping's flat keys, untouched, plus the receipt (one property; receipt.ts).
    expect(events[1]!.metadata).toMatchObject({
      ...batch.events[2]!.metadata,
      receipt: `r1|t|asm_${id}|${SYSTEM_ID}|${batch.position.commitLsn}|${batch.position.xid}|1|2`,
    });
    expect(Object.keys(events[1]!.metadata).filter((key) => key.startsWith('receipt'))).toEqual(['receipt']);
    expect(receiptFromMetadata(events[1]!.metadata)).toEqual({
      kind: 'transaction',
      assembler: `asm_${id}`,
      source: SYSTEM_ID,
      commitLsn: batch.position.commitLsn,
      xid: batch.position.xid,
      ordinal: 1,
      count: 2,
    });
    expect(events[0]!.data).toEqual({ n: 1, index: 0 });
    expect(stored(db, b)).toHaveLength(1);

    const checkpoints = stored(db, checkpointStreamName(`asm_${id}`));
    expect(checkpoints).toHaveLength(1);
    expect(checkpoints[0]).toMatchObject({ type: 'CheckpointRecorded', metadata: { 'source.checkpoint': batch.position.checkpoint } });
    expect(receiptFromMetadata(checkpoints[0]!.metadata)).toMatchObject({ commitLsn: batch.position.commitLsn });
    expect(checkpoints[0]!.data).toMatchObject({ assembler: `asm_${id}`, position: { checkpoint: batch.position.checkpoint } });
  });

  it('skips a replayed transaction: same instance, a new instance, and after a server restart', async () => {
    const db = await server({ features });
    const id = unique();
    const a = `invoice-${id}-1`;
    const b = `customer-${id}-7`;
    const assembler = `asm_${id}`;
    const first = tx(id, 1, [
      [a, 'InvoiceIssued'],
      [b, 'CustomerBilled'],
    ]);
    const second = tx(id, 2, [[a, 'InvoicePaid']]);
    const s1 = await sink(db, { assembler });
    await s1.append(first);
    await s1.append(second);

    // Same instance (revisions cached).
    expect(await s1.append(first)).toMatchObject({ appended: 0, skipped: 2, checkpoint: 'skipped' });
    expect(await s1.append(second)).toMatchObject({ appended: 0, skipped: 1, checkpoint: 'skipped' });
    await s1.close();

    // A new instance: empty revision cache, tails are read.
    const s2 = await sink(db, { assembler });
    expect(await s2.append(first)).toMatchObject({ appended: 0, skipped: 2, checkpoint: 'skipped' });
    expect(s2.status().cachedStreams).toBe(3);
    await s2.close();

    // After a server restart (the weak idempotency cache is gone) and with a new instance.
    await db.restart();
    const s3 = await sink(db, { assembler });
    expect(await s3.append(first)).toMatchObject({ appended: 0, skipped: 2 });
    expect(await s3.append(second)).toMatchObject({ appended: 0, skipped: 1 });
    const third = tx(id, 3, [
      [b, 'CustomerCredited'],
      [a, 'InvoiceClosed'],
    ]);
    expect(await s3.append(third)).toMatchObject({ appended: 2, skipped: 0, checkpoint: 'appended' });

    expect(ids(db, a)).toEqual([first.events[0]!.id, second.events[0]!.id, third.events[1]!.id]);
    expect(ids(db, b)).toEqual([first.events[1]!.id, third.events[0]!.id]);
    expect(ids(db, checkpointStreamName(assembler))).toHaveLength(3);
    expect(s3.status()).toMatchObject({ appendedEvents: 2, skippedEvents: 3, state: 'connected' });
  });

  it('resumes a transaction interrupted between two appends: each event exactly once', async () => {
    const db = await server({ features });
    const id = unique();
    const a = `invoice-${id}-1`;
    const b = `customer-${id}-7`;
    const assembler = `asm_${id}`;
    const batch = tx(id, 1, [
      [a, 'InvoiceIssued'],
      [a, 'InvoiceLineAdded'],
      [b, 'CustomerBilled'],
    ]);
    const requests: string[][] = [];
    const crashing = await sink(db, {
      assembler,
      // Per-stream: the "process" dies after stream A's append, before stream B's.
      // Multi-stream: it dies before the one atomic call.
      hooks: {
        beforeAppend: ({ streams }) => {
          requests.push([...streams]);
          if (streams.includes(b)) throw new Error('simulated crash');
        },
      },
    });
    await expect(crashing.append(batch)).rejects.toThrow('simulated crash');
    if (mode === 'per-stream') {
      expect(requests).toEqual([[a], [b]]);
      expect(ids(db, a)).toHaveLength(2);
    } else {
      expect(requests).toEqual([[a, b, checkpointStreamName(assembler)]]);
      expect(ids(db, a)).toHaveLength(0);
    }
    expect(ids(db, b)).toHaveLength(0);
    expect(ids(db, checkpointStreamName(assembler))).toHaveLength(0);
    await crashing.close();

    const restarted = await sink(db, { assembler });
    const outcome = await restarted.append(batch);
    expect(outcome.streams).toEqual(
      mode === 'per-stream'
        ? [
            { stream: a, appended: 0, skipped: 2, revision: 1n },
            { stream: b, appended: 1, skipped: 0, revision: 0n },
          ]
        : [
            { stream: a, appended: 2, skipped: 0, revision: 1n },
            { stream: b, appended: 1, skipped: 0, revision: 0n },
          ],
    );
    expect(outcome.checkpoint).toBe('appended');
    expect(ids(db, a)).toEqual([batch.events[0]!.id, batch.events[1]!.id]);
    expect(ids(db, b)).toEqual([batch.events[2]!.id]);
    expect(ids(db, checkpointStreamName(assembler))).toHaveLength(1);
  });

  it('stops with a clear error when another writer appends to its stream', async () => {
    const db = await server({ features });
    const id = unique();
    const a = `invoice-${id}-1`;
    const assembler = `asm_${id}`;
    const s = await sink(db, { assembler });
    await s.append(tx(id, 1, [[a, 'InvoiceIssued']]));

    const other = KurrentDBClient.connectionString(db.connectionString);
    cleanups.push(() => other.dispose());
    await other.appendToStream(a, jsonEvent({ type: 'SomethingElse', data: { by: 'someone else' } }));

    // Cached revision 0, actual 1: the receipt at the tail is not ours.
    const error = await s.append(tx(id, 2, [[a, 'InvoicePaid']])).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StreamConflictError);
    const conflict = error as StreamConflictError;
    expect(conflict.code).toBe('SINK_STREAM_CONFLICT');
    expect(conflict.details).toMatchObject({ stream: a, expected: '0', actual: '1', reason: 'foreign-tail', theirs: null, tailEvent: { type: 'SomethingElse', revision: '1' } });
    expect(conflict.details.ours).toMatchObject({ 'receipt.commitLsn': tx(id, 2, []).position.commitLsn, 'receipt.ordinal': '0' });
    expect(conflict.message).toContain(a);
    expect(conflict.message).toContain('expected revision 0, found revision 1');
    expect(ids(db, a)).toHaveLength(2);

    // A new instance sees the foreign tail on first touch.
    const fresh = await sink(db, { assembler });
    const onFirstTouch = (await fresh.append(tx(id, 2, [[a, 'InvoicePaid']])).catch((e: unknown) => e)) as StreamConflictError;
    expect(onFirstTouch).toMatchObject({ code: 'SINK_STREAM_CONFLICT', details: { stream: a, reason: 'foreign-tail', actual: '1' } });
    expect(onFirstTouch.message).toContain(`expected a tail written by assembler "${assembler}", found revision 1`);

    // Another assembler's receipts are foreign too.
    const intruder = await sink(db, { assembler: `other_${id}` });
    const b = `customer-${id}-1`;
    await intruder.append(tx(id, 5, [[b, 'CustomerBilled']]));
    await expect(fresh.append(tx(id, 6, [[b, 'CustomerCredited']]))).rejects.toMatchObject({
      code: 'SINK_STREAM_CONFLICT',
      details: { stream: b, reason: 'foreign-tail', theirs: { 'receipt.assembler': `other_${id}` } },
    });
  });

  it('on a wrong expected version, re-reads the tail: continues after its own landed events, stops on unexplained ones', async () => {
    const db = await server({ features });
    const id = unique();
    const a = `invoice-${id}-1`;
    const assembler = `asm_${id}`;
    const big = (n: number) => ({ n, text: 'z'.repeat(800) });
    const tx1 = tx(id, 1, [[a, 'InvoiceIssued']]);
    const tx2 = tx(id, 2, [
      [a, 'InvoiceLineAdded', big(1)],
      [a, 'InvoiceLineAdded', big(2)],
    ]);
    const tx3 = tx(id, 3, [[a, 'InvoicePaid']]);

    const one = await sink(db, { assembler });
    await one.append(tx1);
    const logs: LogLine[] = [];
    const two = await sink(db, { assembler }, logs);
    expect(await two.append(tx1)).toMatchObject({ skipped: 1 }); // `two` now caches revision 0

    // Another instance writes the first half of tx2 (split by a small max append size) and dies.
    let sent = 0;
    const dying = await sink(db, {
      assembler,
      maxAppendSize: 1_500,
      hooks: {
        beforeAppend: () => {
          sent += 1;
          if (sent === 2) throw new Error('simulated crash');
        },
      },
    });
    await expect(dying.append(tx2)).rejects.toThrow('simulated crash');
    expect(ids(db, a)).toHaveLength(2);

    // `two` sends all of tx2 at revision 0: the server sees a half-matching retry and answers
    // wrong-expected-version; the tail's receipt (tx2, ordinal 0) explains it.
    expect(await two.append(tx2)).toMatchObject({ appended: 1, skipped: 1 });
    expect(logs.some((line) => line.message.includes('earlier attempt had landed'))).toBe(true);
    expect(ids(db, a)).toEqual([tx1.events[0]!.id, ...tx2.events.map((e) => e.id)]);

    // `one` still caches revision 0 and tries tx3 there: the tail (tx2) is ours but does not
    // contain tx3 — another instance of this assembler is writing. Stop.
    const error = (await one.append(tx3).catch((e: unknown) => e)) as StreamConflictError;
    expect(error).toBeInstanceOf(StreamConflictError);
    expect(error.details).toMatchObject({
      stream: a,
      expected: '0',
      actual: '2',
      reason: 'unexplained-revision',
      ours: { 'receipt.commitLsn': tx3.position.commitLsn },
      theirs: { 'receipt.commitLsn': tx2.position.commitLsn, 'receipt.ordinal': '1' },
    });
    expect(ids(db, a)).toHaveLength(3);
  });

  // ---- optimistic first touch: no tail read for new streams ----

  it('appendMany: several units in one call (group commit) — merged per stream in unit order, a receipt per unit, an outcome per unit', async () => {
    const db = await server({ features });
    const id = unique();
    const a = `invoice-${id}-1`;
    const b = `customer-${id}-7`;
    const c = `invoice-${id}-2`;
    const assembler = `asm_${id}`;
    const units = [
      tx(id, 1, [[a, 'InvoiceDrafted'], [b, 'CustomerBilled']]),
      tx(id, 2, [[c, 'InvoiceDrafted']]),
      tx(id, 3, [[a, 'InvoiceIssued'], [a, 'InvoiceLineAdded'], [b, 'CustomerCredited']]),
      tx(id, 4, []),
    ];
    const requests: { streams: readonly string[]; events: number }[] = [];
    const s = await sink(db, { assembler, hooks: { beforeAppend: (r) => void requests.push({ streams: r.streams, events: r.events }) } });
    const outcomes = await s.appendMany(units);

    expect(outcomes.map((o) => [o.appended, o.skipped, o.checkpoint])).toEqual([
      [2, 0, 'none'],
      [1, 0, 'none'],
      [3, 0, 'appended'],
      [0, 0, 'none'],
    ]);
    expect(outcomes[2]!.streams).toEqual([
      { stream: a, appended: 2, skipped: 0, revision: 2n },
      { stream: b, appended: 1, skipped: 0, revision: 1n },
    ]);
    expect(ids(db, a)).toEqual([units[0]!.events[0]!.id, units[2]!.events[0]!.id, units[2]!.events[1]!.id]);
    expect(ids(db, b)).toEqual([units[0]!.events[1]!.id, units[2]!.events[2]!.id]);
    expect(ids(db, c)).toEqual([units[1]!.events[0]!.id]);
    // Each event's receipt names its own unit; ordinals count within the unit's share of the stream.
    expect(stored(db, a).map((e) => receiptFromMetadata(e.metadata)).map((r) => r && r.kind === 'transaction' && [r.commitLsn, r.ordinal, r.count])).toEqual([
      [units[0]!.position.commitLsn, 0, 1],
      [units[2]!.position.commitLsn, 0, 2],
      [units[2]!.position.commitLsn, 1, 2],
    ]);
    // One checkpoint event for the call: its last unit with events.
    expect(stored(db, checkpointStreamName(assembler)).map((e) => (receiptFromMetadata(e.metadata) as TransactionUnit | null)?.commitLsn)).toEqual([units[2]!.position.commitLsn]);
    if (mode === 'multi-stream') expect(requests).toEqual([{ streams: [a, b, c, checkpointStreamName(assembler)], events: 7 }]);
    else expect(requests.map((r) => r.streams[0]).sort()).toEqual([a, b, c, checkpointStreamName(assembler)].sort());
  });

  it('appendMany: the same unit twice in one batch is appended once (the second is a replay); a foreign id collision is still an error', async () => {
    const db = await server({ features });
    const id = unique();
    const a = `invoice-${id}-1`;
    const s = await sink(db, { assembler: `asm_${id}` });
    const one = tx(id, 1, [[a, 'InvoiceDrafted']]);
    const two = tx(id, 2, [[a, 'InvoiceIssued']]);
    const outcomes = await s.appendMany([one, two, one]);
    expect(outcomes.map((o) => [o.appended, o.skipped])).toEqual([
      [1, 0],
      [1, 0],
      [0, 1],
    ]);
    expect(ids(db, a)).toEqual([one.events[0]!.id, two.events[0]!.id]);
    // Another unit reusing an id is not a replay: refused before anything is written.
    const clash = { ...tx(id, 3, [[a, 'InvoicePaid']]), events: [{ ...two.events[0]!, type: 'InvoicePaid' }] };
    await expect(s.appendMany([tx(id, 4, [[a, 'InvoiceVoided']]), two, clash])).rejects.toMatchObject({ code: 'SINK_INVALID_EVENT' });
    expect(ids(db, a)).toHaveLength(2);
  });

  it('appendMany: a batch replayed over a partly applied one writes each event exactly once (new instance, tails read)', async () => {
    const db = await server({ features });
    const id = unique();
    const a = `invoice-${id}-1`;
    const b = `customer-${id}-7`;
    const assembler = `asm_${id}`;
    const units = [tx(id, 1, [[a, 'InvoiceDrafted'], [b, 'CustomerBilled']]), tx(id, 2, [[a, 'InvoiceIssued']]), tx(id, 3, [[b, 'CustomerCredited'], [a, 'InvoicePaid']])];
    // A first run got units 1 and 2 in, then died.
    const first = await sink(db, { assembler });
    await first.appendMany(units.slice(0, 2));
    await first.close();
    // The replay delivers 1..3 again in one batch.
    const second = await sink(db, { assembler });
    const outcomes = await second.appendMany(units);
    expect(outcomes.map((o) => [o.appended, o.skipped])).toEqual([
      [0, 2],
      [0, 1],
      [2, 0],
    ]);
    expect(ids(db, a)).toEqual([units[0]!.events[0]!.id, units[1]!.events[0]!.id, units[2]!.events[1]!.id]);
    expect(ids(db, b)).toEqual([units[0]!.events[1]!.id, units[2]!.events[0]!.id]);
    // And once more, all of it: nothing new.
    expect((await second.appendMany(units)).map((o) => o.appended)).toEqual([0, 0, 0]);
    expect(ids(db, a)).toHaveLength(3);
  });

  it('first touch: appending N units to N new streams reads no stream tail', async () => {
    const db = await server({ features });
    const id = unique();
    const assembler = `asm_${id}`;
    const requests: string[][] = [];
    const s = await sink(db, { assembler, hooks: { beforeAppend: ({ streams }) => void requests.push([...streams]) } });
    const n = 12;
    for (let i = 1; i <= n; i++) {
      const outcome = await s.append(tx(id, i, [[`invoice-${id}-${i}`, 'InvoiceIssued']]));
      expect(outcome).toMatchObject({ appended: 1, skipped: 0, checkpoint: 'appended', mode });
      expect(outcome.streams).toEqual([{ stream: `invoice-${id}-${i}`, appended: 1, skipped: 0, revision: 0n }]);
    }
    // One request per unit (per stream in per-stream mode), none of them failed or repeated.
    expect(requests).toHaveLength(mode === 'multi-stream' ? n : 2 * n);
    expect(s.status()).toMatchObject({ tailReads: 0, logHeadReads: 1, appendedEvents: n, skippedEvents: 0, cachedStreams: n + 1 });
    for (let i = 1; i <= n; i++) expect(ids(db, `invoice-${id}-${i}`)).toHaveLength(1);
    expect(ids(db, checkpointStreamName(assembler))).toHaveLength(n);
  });

  it('first touch: a new instance replaying units whose streams exist writes nothing, then continues at the real tails', async () => {
    const db = await server({ features });
    const id = unique();
    const assembler = `asm_${id}`;
    const [a, b, c] = [`invoice-${id}-1`, `customer-${id}-1`, `invoice-${id}-2`];
    const units = [
      tx(id, 1, [
        [a, 'InvoiceIssued'],
        [b, 'CustomerBilled'],
      ]),
      tx(id, 2, [
        [a, 'InvoiceLineAdded'],
        [a, 'InvoiceLineAdded'],
        [c, 'InvoiceIssued'],
      ]),
      tx(id, 3, [[b, 'CustomerCredited']]),
    ];
    const s1 = await sink(db, { assembler });
    for (const unit of units) await s1.append(unit);
    await s1.close();
    const before = [a, b, c, checkpointStreamName(assembler)].map((stream) => ids(db, stream));
    const logBefore = db.streamNames().length;

    // Every unit replayed by an instance with an empty cache: nothing new anywhere.
    const s2 = await sink(db, { assembler });
    expect(await s2.append(units[0]!)).toMatchObject({ appended: 0, skipped: 2, checkpoint: 'skipped' });
    expect(await s2.append(units[1]!)).toMatchObject({ appended: 0, skipped: 3, checkpoint: 'skipped' });
    expect(await s2.append(units[2]!)).toMatchObject({ appended: 0, skipped: 1, checkpoint: 'skipped' });
    expect([a, b, c, checkpointStreamName(assembler)].map((stream) => ids(db, stream))).toEqual(before);
    expect(db.streamNames().length).toBe(logBefore);
    expect(s2.status()).toMatchObject({ appendedEvents: 0, skippedEvents: 6 });
    // Only streams that turned out to exist had their tails read (each once).
    expect(s2.status().tailReads).toBeLessThanOrEqual(4);
    await s2.close();

    // Another new instance whose first unit is new, on streams that exist: appended at their real tails.
    const requests: string[][] = [];
    const s3 = await sink(db, { assembler, hooks: { beforeAppend: ({ streams }) => void requests.push([...streams]) } });
    const next = tx(id, 4, [
      [c, 'InvoicePaid'],
      [a, 'InvoicePaid'],
      [b, 'CustomerBilled'],
    ]);
    const outcome = await s3.append(next);
    expect(outcome).toMatchObject({ appended: 3, skipped: 0, checkpoint: 'appended' });
    expect(outcome.streams).toEqual([
      { stream: c, appended: 1, skipped: 0, revision: 1n },
      { stream: a, appended: 1, skipped: 0, revision: 3n },
      { stream: b, appended: 1, skipped: 0, revision: 2n },
    ]);
    expect(ids(db, a)).toEqual([...before[0]!, next.events[1]!.id]);
    expect(ids(db, b)).toEqual([...before[1]!, next.events[2]!.id]);
    expect(ids(db, c)).toEqual([...before[2]!, next.events[0]!.id]);
    expect(ids(db, checkpointStreamName(assembler))).toHaveLength(4);
    // The optimistic attempt failed as a whole (nothing written); the four tails were read then,
    // and the re-send at their revisions counts as a retry of the same request.
    expect(s3.status().tailReads).toBe(4);
    expect(requests).toEqual(mode === 'multi-stream' ? [[c, a, b, checkpointStreamName(assembler)]] : [[c], [a], [b], [checkpointStreamName(assembler)]]);
  });

  it('first touch: a replayed earlier unit that created a stream is skipped although the stream has later units of ours', async () => {
    const db = await server({ features });
    const id = unique();
    const assembler = `asm_${id}`;
    const a = `invoice-${id}-1`;
    const tx1 = tx(id, 1, [
      [a, 'InvoiceIssued'],
      [a, 'InvoiceLineAdded'],
    ]);
    const tx2 = tx(id, 2, [[a, 'InvoiceLineAdded']]);
    const tx3 = tx(id, 3, [[a, 'InvoicePaid']]);
    const s1 = await sink(db, { assembler });
    for (const unit of [tx1, tx2, tx3]) await s1.append(unit);
    await s1.close();

    // tx1's events sit at revisions 0..1, so `no_stream` with them is answered by idempotency
    // (revision 1) — yet the stream goes on to revision 3. The sink must not believe revision 1.
    const s2 = await sink(db, { assembler });
    const replay = await s2.append(tx1);
    expect(replay).toMatchObject({ appended: 0, skipped: 2, checkpoint: 'skipped' });
    expect(replay.streams).toEqual([{ stream: a, appended: 0, skipped: 2, revision: 3n }]);
    expect(await s2.append(tx2)).toMatchObject({ appended: 0, skipped: 1 });
    const tx4 = tx(id, 4, [[a, 'InvoiceClosed']]);
    expect(await s2.append(tx4)).toMatchObject({ appended: 1, skipped: 0, streams: [{ stream: a, appended: 1, skipped: 0, revision: 4n }] });
    expect(ids(db, a)).toEqual([...tx1.events, ...tx2.events, ...tx3.events, ...tx4.events].map((event) => event.id));
    expect(stored(db, a).map((event) => event.revision)).toEqual([0n, 1n, 2n, 3n, 4n]);
  });

  it('first touch: a stream another writer created is still a clear conflict, and nothing of the unit is written there', async () => {
    const db = await server({ features });
    const id = unique();
    const assembler = `asm_${id}`;
    const [foreign, fresh] = [`invoice-${id}-9`, `invoice-${id}-10`];
    const other = KurrentDBClient.connectionString(db.connectionString);
    cleanups.push(() => other.dispose());
    await other.appendToStream(foreign, jsonEvent({ type: 'SomethingElse', data: { by: 'someone else' } }));

    const s = await sink(db, { assembler });
    const unit = tx(id, 1, [
      [foreign, 'InvoiceIssued'],
      [fresh, 'InvoiceIssued'],
    ]);
    const error = (await s.append(unit).catch((e: unknown) => e)) as StreamConflictError;
    expect(error).toBeInstanceOf(StreamConflictError);
    expect(error.details).toMatchObject({ stream: foreign, actual: '0', reason: 'foreign-tail', theirs: null, tailEvent: { type: 'SomethingElse', revision: '0' } });
    expect(error.message).toContain(`expected a tail written by assembler "${assembler}", found revision 0`);
    expect(ids(db, foreign)).toHaveLength(1);
    expect(ids(db, fresh)).toHaveLength(0);
    expect(ids(db, checkpointStreamName(assembler))).toHaveLength(0);
    // And it stays a conflict on the next attempt (the tail is known now).
    await expect(s.append(unit)).rejects.toMatchObject({ code: 'SINK_STREAM_CONFLICT', details: { stream: foreign, reason: 'foreign-tail' } });
    expect(ids(db, foreign)).toHaveLength(1);
  });

  it('rejects an oversized event naming stream, type, size and limit, and writes nothing of the unit', async () => {
    const db = await server({ features, maxAppendSize: 4_000 });
    const id = unique();
    const a = `invoice-${id}-1`;
    const b = `document-${id}-1`;
    const s = await sink(db, { assembler: `asm_${id}`, maxAppendSize: 4_000 });
    const error = await s
      .append(
        tx(id, 1, [
          [a, 'InvoiceIssued'],
          [b, 'DocumentAttached', { blob: 'x'.repeat(5_000) }],
        ]),
      )
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OversizedEventError);
    const oversized = error as OversizedEventError;
    expect(oversized.code).toBe('SINK_EVENT_OVERSIZED');
    expect(oversized.details).toMatchObject({ stream: b, type: 'DocumentAttached', limit: 4_000 });
    expect(oversized.details.size).toBeGreaterThan(5_000);
    expect(oversized.message).toMatch(new RegExp(`DocumentAttached.*${b}.*\\d+ bytes.*4000 bytes`));
    expect(db.streamNames().filter((name) => name.includes(id))).toEqual([]);
  });

  it('splits one stream\'s share of a transaction across appends under the max append size, and resumes between parts', async () => {
    const db = await server({ features, maxAppendSize: 3_000 });
    const id = unique();
    const a = `invoice-${id}-1`;
    const assembler = `asm_${id}`;
    const lines = Array.from({ length: 10 }, (_, i) => [a, 'InvoiceLineAdded', { line: i, text: 'y'.repeat(600) }] as const);
    const batch = tx(id, 1, lines);
    let appends = 0;
    const crashing = await sink(db, {
      assembler,
      maxAppendSize: 3_000,
      hooks: {
        beforeAppend: () => {
          appends += 1;
          if (appends === 3) throw new Error('simulated crash between parts');
        },
      },
    });
    await expect(crashing.append(batch)).rejects.toThrow('simulated crash between parts');
    const written = ids(db, a).length;
    expect(written).toBeGreaterThan(0);
    expect(written).toBeLessThan(10);
    // The receipt at the tail carries the ordinal of the last event written.
    expect(receiptFromMetadata(stored(db, a).at(-1)!.metadata)).toMatchObject({ ordinal: written - 1, count: 10 });
    await crashing.close();

    const parts: number[] = [];
    const resumed = await sink(db, { assembler, maxAppendSize: 3_000, hooks: { beforeAppend: ({ events }) => void parts.push(events) } });
    const outcome = await resumed.append(batch);
    expect(outcome).toMatchObject({ appended: 10 - written, skipped: written, checkpoint: 'appended' });
    expect(parts.length).toBeGreaterThan(1);
    expect(ids(db, a)).toEqual(batch.events.map((event) => event.id));
    expect(stored(db, a).map((event) => event.revision)).toEqual(Array.from({ length: 10 }, (_, i) => BigInt(i)));
    expect(stored(db, a).map((event) => (event.data as { line: number }).line)).toEqual(Array.from({ length: 10 }, (_, i) => i));
  });
});

// ---- mode-specific ------------------------------------------------------------------------

describe('KurrentDB sink modes', () => {
  it('multi-stream: one atomic call carries every stream of the transaction and the checkpoint', async () => {
    const db = await server();
    const id = unique();
    const assembler = `asm_${id}`;
    const requests: Array<{ streams: readonly string[]; mode: string }> = [];
    const s = await sink(db, { assembler, retry: { initialDelayMs: 5, maxDelayMs: 5, maxAttempts: 1 }, hooks: { beforeAppend: (r) => void requests.push(r) } });
    const batch = tx(id, 1, [
      [`a-${id}`, 'A1'],
      [`b-${id}`, 'B1'],
      [`c-${id}`, 'C1'],
      [`a-${id}`, 'A2'],
    ]);

    // A failed call leaves nothing anywhere: the server applies it whole or not at all. (Its one
    // attempt is two server appends: hand-framed, then as a node:http2 request — both fail.)
    db.failNextAppends(2);
    await expect(s.append(batch)).rejects.toMatchObject({ code: 'SINK_RETRIES_EXHAUSTED' });
    expect(db.streamNames().filter((name) => name.includes(id))).toEqual([]);

    await s.append(batch);
    expect(requests.at(-1)).toEqual({ streams: [`a-${id}`, `b-${id}`, `c-${id}`, checkpointStreamName(assembler)], events: 5, mode: 'multi-stream' });
    expect(ids(db, `a-${id}`)).toHaveLength(2);
    expect(ids(db, checkpointStreamName(assembler))).toHaveLength(1);
  });

  it('multi-stream: a batch over the max append size is cut between transactions, never inside one', async () => {
    const db = await server({ maxAppendSize: 6_000 });
    const id = unique();
    const assembler = `asm_${id}`;
    const shared = `b-${id}`;
    // 12 transactions, each with one event in its own stream and one in a shared stream.
    const units = Array.from({ length: 12 }, (_, i) =>
      tx(id, i + 1, [
        [`a-${id}-${i}`, 'A', { n: i, pad: 'x'.repeat(300) }],
        [shared, 'B', { n: i, pad: 'y'.repeat(300) }],
      ]),
    );
    const landed = (i: number) => ids(db, `a-${id}-${i}`).length + ids(db, shared).filter((e) => e === units[i]!.events[1]!.id).length;
    const seen: number[][] = [];
    const s = await sink(db, {
      assembler,
      maxAppendSize: 6_000,
      checkpointStream: false,
      hooks: {
        // Before every request: each transaction is either wholly in the store or not at all.
        beforeAppend: () => void seen.push(units.map((_, i) => landed(i))),
      },
    });
    const outcomes = await s.appendMany(units);
    expect(outcomes.map((o) => o.appended)).toEqual(units.map(() => 2));
    expect(seen.length).toBeGreaterThan(2);
    for (const state of seen) expect(state.every((n) => n === 0 || n === 2), JSON.stringify(state)).toBe(true);
    expect(ids(db, shared)).toEqual(units.map((u) => u.events[1]!.id));
  });

  it('per-stream: streams in order of first appearance, the checkpoint stream last', async () => {
    const db = await server({ features: { multiStreamAppend: false, batchAppend: false } });
    const id = unique();
    const assembler = `asm_${id}`;
    const order: string[] = [];
    const logs: LogLine[] = [];
    const s = await sink(db, { assembler, hooks: { beforeAppend: ({ streams }) => void order.push(...streams) } }, logs);
    expect(s.mode).toBe('per-stream');
    expect(logs[0]).toMatchObject({ level: 'info', message: 'kurrentdb sink started', fields: { mode: 'per-stream', reason: 'server does not advertise multi-stream append' } });
    await s.append(
      tx(id, 1, [
        [`b-${id}`, 'B1'],
        [`a-${id}`, 'A1'],
        [`b-${id}`, 'B2'],
      ]),
    );
    expect(order).toEqual([`b-${id}`, `a-${id}`, checkpointStreamName(assembler)]);
    // Transaction-boundary metadata from the mapping rides along untouched.
    expect(stored(db, `b-${id}`).map((e) => [e.metadata['transaction.index'], e.metadata['transaction.count']])).toEqual([
      ['0', '3'],
      ['2', '3'],
    ]);
  });

  it('mode "multi-stream" refuses to start against a server without it; "per-stream" is honoured against one with it', async () => {
    const old = await server({ features: { multiStreamAppend: false } });
    await expect(createKurrentDBSink({ connectionString: old.connectionString, assembler: 'asm', mode: 'multi-stream' })).rejects.toMatchObject({
      code: 'SINK_MULTI_STREAM_UNSUPPORTED',
    });
    const modern = await server();
    const s = await sink(modern, { assembler: 'asm', mode: 'per-stream' });
    expect(s.mode).toBe('per-stream');
  });

  it('checks its options at start-up, naming the field', async () => {
    await expect(createKurrentDBSink({ connectionString: 'kurrentdb://127.0.0.1:1?tls=false', assembler: 'has space' })).rejects.toMatchObject({
      code: 'SINK_INVALID_CONFIG',
      message: expect.stringContaining('assembler:'),
    });
    await expect(
      createKurrentDBSink({ connectionString: 'kurrentdb://127.0.0.1:1?tls=false', assembler: 'ok', maxAppendSize: -1 }),
    ).rejects.toMatchObject({ code: 'SINK_INVALID_CONFIG', message: expect.stringContaining('maxAppendSize') });
  });

  it('rejects events the sink cannot carry faithfully', async () => {
    const db = await server();
    const id = unique();
    const s = await sink(db, { assembler: `asm_${id}` });
    const base = tx(id, 1, [[`a-${id}`, 'A1']]);
    const event = base.events[0]!;
    await expect(s.append({ ...base, events: [{ ...event, metadata: { nested: { no: 1 } as unknown as string } }] })).rejects.toMatchObject({
      code: 'SINK_INVALID_EVENT',
      details: { key: 'nested' },
    });
    await expect(s.append({ ...base, events: [{ ...event, metadata: { 'receipt.ordinal': '9' } }] })).rejects.toMatchObject({ code: 'SINK_INVALID_EVENT' });
    await expect(s.append({ ...base, events: [{ ...event, metadata: { receipt: 'r1|t|x||0/1|1|0|1' } }] })).rejects.toMatchObject({ code: 'SINK_INVALID_EVENT', details: { key: 'receipt' } });
    await expect(s.append({ ...base, events: [event, event] })).rejects.toMatchObject({ code: 'SINK_INVALID_EVENT' });
    await expect(s.append({ ...base, events: [{ ...event, id: 'not-a-uuid' }] })).rejects.toBeInstanceOf(SinkError);
    expect(await s.append({ ...base, events: [] })).toMatchObject({ appended: 0, skipped: 0, checkpoint: 'none' });
    expect(db.streamNames().filter((name) => name.includes(id))).toEqual([]);
  });
});

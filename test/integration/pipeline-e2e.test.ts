// The running pipeline end to end: the invoicing workload on PostgreSQL 17 through the
// assembler into the in-memory KurrentDB — every expected event once, in source order, no
// sensitive column; graceful stop acknowledges exactly what is durable; a replay from a second
// slot at the same start point adds nothing.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { checkpointStreamName } from '../../src/sink/index.js';
import { compareLsn } from '../../src/source/position.js';
import { createPipelineRig, workload, type PipelineRig } from './pipeline-rig.js';

describe('pipeline end to end (invoicing)', () => {
  let rig: PipelineRig;
  const running: Assembler[] = [];

  beforeAll(async () => {
    rig = await createPipelineRig('e2e', { slots: 2 });
  });
  afterAll(async () => {
    for (const a of running) await a.stop();
    await rig?.close();
  });

  const expected: Record<string, string[]> = {
    'customer-c1': ['CustomerRegistered'],
    'customer-c2': ['CustomerRegistered'],
    'invoice-i1': ['InvoiceDrafted', 'InvoiceIssued', 'InvoicePaid'],
    'invoice-i2': ['InvoiceDrafted', 'InvoiceIssued', 'InvoiceVoided'],
    'invoice-i3': ['InvoiceDrafted'],
  };

  it('appends each business event once, in source order, without sensitive columns; stop drains and acknowledges', async () => {
    const logger = rig.logger();
    const assembler = createAssembler(rig.config(), { logger });
    running.push(assembler);
    const run = assembler.run();
    const w = workload(rig);
    await w.customer('c1');
    await w.customer('c2');
    await w.draft('i1', 'c1');
    await w.draft('i2', 'c2');
    await w.draft('i3', 'c1');
    await w.issue('i1', 3);
    await w.issue('i2', 1);
    await w.pay('i1', 'p1');
    await w.void('i2');
    // No mapper wants this one (customers maps inserts only; email is not even visible): it still moves the slot.
    await rig.sql(`UPDATE customer SET email = 'new@secret.example' WHERE id = 'c2'`);

    await rig.until(() => {
      for (const [stream, types] of Object.entries(expected)) expect(rig.events(stream).map((e) => e.type), stream).toEqual(types);
      expect(assembler.status().transactions.skipped).toBe(1);
      // The store holds an event a moment before the pipeline's append promise settles and
      // counts it, so the counters are waited for too.
      expect(assembler.status().events.byType).toMatchObject({ CustomerRegistered: 2, InvoiceDrafted: 3, InvoiceIssued: 2, InvoicePaid: 1, InvoiceVoided: 1 });
    });
    expect(rig.businessStreams()).toEqual(Object.keys(expected).sort());

    // Source order within each stream: commit LSNs ascend.
    for (const stream of Object.keys(expected)) {
      const lsns = rig.events(stream).map((e) => e.metadata['source.commitLsn']!);
      expect([...lsns].sort(compareLsn), stream).toEqual(lsns);
    }
    const issued = rig.events('invoice-i1')[1]!;
    expect(issued.data).toMatchObject({ invoiceId: 'i1', number: 'N-i1', total: { amount: '60.00', currency: 'EUR' }, dueDate: '2026-02-01' });
    expect((issued.data['lines'] as unknown[]).length).toBe(3);
    expect(issued.metadata['contract']).toBe('InvoiceIssued@2');

    // Sensitive columns never leave: not in data, not in metadata, nowhere in the store.
    const everything = rig.kdb
      .streamNames()
      .flatMap((s) => rig.kdb.readStreamEvents(s))
      .map((e) => Buffer.from(e.data).toString() + Buffer.from(e.metadata).toString())
      .join('\n');
    expect(everything).not.toContain('@secret.example');
    expect(everything).not.toContain('4111-');
    expect(everything).not.toContain('"email"');

    const status = assembler.status();
    expect(status.state).toBe('running');
    expect(status.mode).toBe('multi-stream');
    expect(status.events.byType).toMatchObject({ CustomerRegistered: 2, InvoiceDrafted: 3, InvoiceIssued: 2, InvoicePaid: 1, InvoiceVoided: 1 });
    expect(logger.lines.find((l) => l.message === 'assembler started')?.fields).toMatchObject({ mode: 'multi-stream', slot: rig.slots[0] });

    await assembler.stop();
    const summary = await run;
    expect(summary.transactions.received).toBe(10);
    expect(summary.transactions.appended).toBe(9);
    expect(summary.transactions.skipped).toBe(1);
    expect(summary.events.appended).toBe(9);
    // The slot was told exactly the last durable transaction, recorded in the checkpoint stream first.
    const checkpoints = rig.events(checkpointStreamName('e2e'));
    const last = checkpoints[checkpoints.length - 1]!;
    expect((last.data['position'] as { endLsn: string }).endLsn).toBe(summary.acknowledgedLsn);
    await rig.until(async () => expect((await rig.slot(rig.slots[0]!)).confirmed_flush_lsn).toBe(summary.acknowledgedLsn));
    expect(logger.lines.find((l) => l.message === 'assembler stopped')?.fields).toMatchObject({ transactions: { received: 10, appended: 9, skipped: 1 } });
    // No secret in any log line.
    expect(JSON.stringify(logger.lines)).not.toContain(inject('postgres').password);
  });

  it('replays from a second slot at the same start point without adding a single event', async () => {
    const before = Object.fromEntries(Object.keys(expected).map((s) => [s, rig.events(s).map((e) => e.id)]));
    const assembler = createAssembler(rig.config({ slot: rig.slots[1]! }), { logger: rig.logger() });
    running.push(assembler);
    const run = assembler.run();
    // The second slot holds the same 10 transactions; all come back and are recognised.
    await rig.until(() => expect(assembler.status().transactions).toMatchObject({ appended: 9, skipped: 1 }));
    await assembler.stop();
    const summary = await run;
    expect(summary.events.appended).toBe(0);
    expect(summary.events.replaySkipped).toBe(9);
    for (const [stream, ids] of Object.entries(before)) expect(rig.events(stream).map((e) => e.id), stream).toEqual(ids);
    expect(rig.businessStreams()).toEqual(Object.keys(expected).sort());
  });
});

describe('pipeline against a server without multi-stream append', () => {
  let rig: PipelineRig;
  beforeAll(async () => {
    rig = await createPipelineRig('e2eps', { slots: 1, kurrent: { features: { multiStreamAppend: false } } });
  });
  afterAll(async () => {
    await rig?.close();
  });

  it('runs per-stream, says so at start, and events carry the transaction boundaries', async () => {
    const logger = rig.logger();
    const assembler = createAssembler(rig.config(), { logger });
    const run = assembler.run();
    run.catch(() => undefined);
    const w = workload(rig);
    await w.customer('q1');
    await w.draft('qi1', 'q1');
    await w.issue('qi1', 2);
    await rig.until(() => expect(rig.events('invoice-qi1').map((e) => e.type)).toEqual(['InvoiceDrafted', 'InvoiceIssued']));
    expect(logger.lines.find((l) => l.message === 'assembler started')?.fields).toMatchObject({ mode: 'per-stream' });
    expect(rig.events('invoice-qi1')[1]!.metadata).toMatchObject({ 'transaction.index': '0', 'transaction.count': '1' });
    await assembler.stop();
    const summary = await run;
    expect(summary.mode).toBe('per-stream');
    expect((await rig.slot(rig.slots[0]!)).confirmed_flush_lsn).toBe(summary.acknowledgedLsn);
  });
});

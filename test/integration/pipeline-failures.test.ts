// Failure policies of the running pipeline: a contract violation parks a failed record (never
// appended to the business stream) and the line goes on, or halts with a diagnosis and the
// slot is not acknowledged past it; a mapper with onError 'park' leaves a MapperFailed record.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failedRecordsStream } from '../../src/mapping/index.js';
import { ContractViolationHaltError, createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { compareLsn } from '../../src/source/position.js';
import { mappers } from '../../examples/invoicing/index.js';
import { createPipelineRig, workload, type PipelineRig } from './pipeline-rig.js';
import { fragilePayments } from '../support/fragile-payments.js';


describe('pipeline failure policies', () => {
  let rig: PipelineRig;
  const running: Assembler[] = [];

  beforeAll(async () => {
    rig = await createPipelineRig('fail', { slots: 0 });
  });
  afterAll(async () => {
    for (const a of running) await a.stop();
    await rig?.close();
  });

  it('parks a contract violation as a failed record, keeps going, and acknowledges past it', async () => {
    const slot = await rig.createSlot('park');
    const logger = rig.logger();
    const assembler = createAssembler(rig.config({ slot, name: 'park', mappers: [...mappers, fragilePayments], failurePolicy: { contractViolation: 'park' } }), { logger });
    running.push(assembler);
    const run = assembler.run();
    run.catch(() => undefined);
    const w = workload(rig);
    await w.customer('p1');
    await w.customer('p2', ''); // CustomerRegistered.name has minLength 1
    await w.customer('p3');
    await w.draft('pi1', 'p1');
    await w.issue('pi1', 1);
    await w.pay('pi1', 'pay1'); // InvoicePaid from `payments`, MapperFailed from `fragile-payments`

    const failedStream = failedRecordsStream('park');
    await rig.until(() => {
      expect(rig.events('customer-p3').map((e) => e.type)).toEqual(['CustomerRegistered']);
      expect(rig.events('invoice-pi1').map((e) => e.type)).toEqual(['InvoiceDrafted', 'InvoiceIssued', 'InvoicePaid']);
      expect(rig.events(failedStream).map((e) => e.type)).toEqual(['ContractViolation', 'MapperFailed']);
    });
    expect(rig.events('customer-p2')).toEqual([]); // never appended to the business stream
    const [violation, mapperFailed] = rig.events(failedStream);
    expect(violation!.data).toMatchObject({ event: { stream: 'customer-p2', type: 'CustomerRegistered', contract: 'CustomerRegistered@1' }, mapper: 'customers' });
    expect((violation!.data['violations'] as { path: string }[]).map((v) => v.path)).toContain('/name');
    expect(mapperFailed!.data).toMatchObject({ mapper: 'fragile-payments', cause: { message: 'cannot map payment pay1' } });
    expect(JSON.stringify(rig.events(failedStream).map((e) => [e.data, e.metadata]))).not.toContain('@secret.example');
    expect(logger.lines.filter((l) => l.message === 'record parked').map((l) => l.fields?.['type'])).toEqual(['ContractViolation', 'MapperFailed']);
    expect(assembler.status().parked).toEqual({ mapperFailures: 1, contractViolations: 1 });

    await assembler.stop();
    const summary = await run;
    const p3 = rig.events('customer-p3')[0]!.metadata['source.commitLsn']!;
    // The acknowledged position moved past the parked transaction (and everything after it).
    expect(compareLsn(summary.acknowledgedLsn!, p3)).toBeGreaterThan(0);
    expect((await rig.slot(slot)).confirmed_flush_lsn).toBe(summary.acknowledgedLsn);
  });

  it('halts on a contract violation with a diagnosis; nothing at or after it is appended or acknowledged', async () => {
    const slot = await rig.createSlot('halt');
    const logger = rig.logger();
    const assembler = createAssembler(rig.config({ slot, name: 'halt' }), { logger });
    running.push(assembler);
    const run = assembler.run();
    run.catch(() => undefined);
    const w = workload(rig);
    await w.customer('h1');
    await w.customer('h2', '');
    await w.customer('h3');

    const error = await run.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ContractViolationHaltError);
    const halt = error as ContractViolationHaltError;
    expect(halt.code).toBe('CONTRACT_VIOLATION_HALT');
    expect(halt.details).toMatchObject({ stream: 'customer-h2', contract: 'CustomerRegistered@1', mapper: 'customers' });
    expect(halt.details.violations.map((v) => v.path)).toContain('/name');
    expect(halt.message).toMatch(/CustomerRegistered@1 for stream "customer-h2" \(mapper customers\) at commitLsn \S+ xid \d+ .* violates its contract: \/name /);
    expect(assembler.status().state).toBe('failed');

    expect(rig.events('customer-h1')).toHaveLength(1);
    expect(rig.events('customer-h2')).toEqual([]);
    expect(rig.events('customer-h3')).toEqual([]);
    expect(rig.events(failedRecordsStream('halt'))).toEqual([]);
    // The slot stays before the violating transaction: it comes back on the next start.
    const confirmed = (await rig.slot(slot)).confirmed_flush_lsn;
    expect(compareLsn(confirmed, halt.details.position!.commitLsn!)).toBeLessThan(0);
    expect(compareLsn(confirmed, rig.events('customer-h1')[0]!.metadata['source.commitLsn']!)).toBeGreaterThan(0);
    expect(logger.lines.some((l) => l.level === 'error' && l.message.includes('fatal'))).toBe(true);
  });
});

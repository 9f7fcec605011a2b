// Mapping a large transaction in two runs (planLargeUnit): the same events as mapUnit, changes
// pulled as the mappers go (never listed by tx.each), counts known before the first event,
// failures found on the counting run, and a second run that differs stopped as impure.
import { describe, expect, it } from 'vitest';
import {
  defineMapper,
  MapperError,
  MapperPurityError,
  mapUnit,
  planLargeUnit,
  type AnyMapper,
  type LargeUnitPlan,
} from '../../src/mapping/index.js';
import { del, insert, transaction, update } from '../../src/testing/mapper-kit.js';
import { customers, invoiceLifecycle, payments, invoiceImport } from '../../examples/invoicing/index.js';
import type { Change, ChangeSequence, SourceTransaction } from '../../src/source/types.js';

const context = { assembler: 'invoicing', sourceIdentity: '7000000000000000001' };

function plan(mappers: readonly AnyMapper[], unit: SourceTransaction, step = 7): { plan: LargeUnitPlan; yields: number } {
  const run = planLargeUnit(mappers, unit, context, step);
  let yields = 0;
  for (let next = run.next(); ; next = run.next()) {
    if (next.done) return { plan: next.value, yields };
    yields += 1;
  }
}

/** A sequence made afresh on each iteration (as a spill file is read), counting the changes it handed out. */
function sequenceOf(make: () => Iterable<Change>, length: number): ChangeSequence & { pulled: number; iterations: number } {
  const sequence = {
    length,
    pulled: 0,
    iterations: 0,
    *[Symbol.iterator]() {
      sequence.iterations += 1;
      for (const change of make()) {
        sequence.pulled += 1;
        yield change;
      }
    },
  };
  return sequence;
}

const invoicing: readonly AnyMapper[] = [customers, invoiceLifecycle, payments, invoiceImport];

function invoicingChanges(n: number): Change[] {
  const changes: Change[] = [];
  for (let i = 0; i < n; i++) {
    changes.push(insert('public.customer', { id: `c${i}`, name: `Customer ${i}`, country: 'NL', email: 'x@y' }));
    changes.push(insert('public.invoice', { id: `inv${i}`, customer_id: `c${i}`, status: 'draft', currency: 'EUR', number: null, total: '0.00' }));
    if (i % 3 === 0) changes.push(update('public.invoice', { id: `inv${i}`, status: 'draft' }, { id: `inv${i}`, customer_id: `c${i}`, status: 'void', currency: 'EUR', void_reason: 'bulk', total: '0.00' }));
  }
  return changes;
}

describe('planLargeUnit', () => {
  it('makes the events mapUnit makes — ids, metadata, order — with the count known before the first', () => {
    const changes = invoicingChanges(40);
    const unit = transaction(changes, { commitLsn: '0/5000', xid: 900 });
    const whole = mapUnit(invoicing, unit, context);
    const sequence = sequenceOf(() => changes, changes.length);
    const { plan: p, yields } = plan(invoicing, { ...unit, changes: sequence });
    expect(p.events).toBe(whole.events.length);
    expect(p.failed).toEqual(whole.failed);
    expect([...p.produce()]).toEqual(whole.events);
    expect(yields).toBeGreaterThan(changes.length / 7 - 1);
    expect(whole.events.every((e) => e.metadata['transaction.count'] === String(whole.events.length))).toBe(true);
  });

  it('a generator over tx.each() pulls changes as it yields: a consumer that stops early read a few changes only', () => {
    const N = 100_000;
    const make = function* (): Generator<Change> {
      for (let i = 0; i < N; i++) yield update('public.orders', null, { id: String(i), status: 'paid' });
    };
    const orders = defineMapper({
      name: 'orders',
      tables: { 'public.orders': { columns: ['id', 'status'] } },
      *map(tx) {
        for (const change of tx.each('public.orders')) yield { stream: `order-${String(change.key.id)}`, type: 'OrderStatusChanged', version: 1, data: { status: change.after!.status } };
      },
    });
    const sequence = sequenceOf(make, N);
    const { plan: p } = plan([orders], { ...transaction([], { commitLsn: '0/6000', xid: 901 }), changes: sequence }, 10_000);
    expect(p.events).toBe(N);
    const passes = sequence.iterations;
    sequence.pulled = 0;
    const produced = p.produce();
    const first = [produced.next().value, produced.next().value];
    expect(first.map((e) => e!.stream)).toEqual(['order-0', 'order-1']);
    expect(first[1]!.metadata['transaction.index']).toBe('1');
    expect(first[1]!.metadata['transaction.count']).toBe(String(N));
    // Two events made: a handful of changes pulled from a new pass, not the 100,000.
    expect(sequence.iterations).toBe(passes + 1);
    expect(sequence.pulled).toBeLessThan(10);
  });

  it('a mapper that builds arrays (tx.changes, returning an array) still works on a sequence', () => {
    const changes = [insert('public.orders', { id: '1', status: 'new' }), del('public.orders', { id: '2' }), insert('public.orders', { id: '3', status: 'new' })];
    const arrays = defineMapper({
      name: 'arrays',
      tables: { 'public.orders': { columns: ['id', 'status'], before: 'key' } },
      map: (tx) => tx.changes('public.orders').map((c) => ({ stream: `order-${String(c.key.id)}`, type: c.op === 'delete' ? 'OrderRemoved' : 'OrderPlaced', version: 1, data: { tables: tx.tables.length } })),
    });
    const unit = transaction(changes, { commitLsn: '0/7000', xid: 902 });
    const { plan: p } = plan([arrays], { ...unit, changes: sequenceOf(() => changes, changes.length) });
    expect([...p.produce()]).toEqual(mapUnit([arrays], unit, context).events);
  });

  it('a mapper failing on the counting run halts before anything is produced, or is parked while the others go on', () => {
    const changes = invoicingChanges(5);
    const failing = (onError: 'halt' | 'park') =>
      defineMapper({
        name: 'failing',
        onError,
        tables: { 'public.invoice': { columns: ['id'] } },
        *map(tx) {
          let n = 0;
          for (const change of tx.each('public.invoice')) {
            if (++n === 3) throw new Error(`cannot map ${String(change.key.id)}`);
            yield { stream: `invoice-${String(change.key.id)}`, type: 'InvoiceSeen', version: 1, data: {} };
          }
        },
      });
    const unit = { ...transaction(changes, { commitLsn: '0/8000', xid: 903 }), changes: sequenceOf(() => changes, changes.length) };
    expect(() => plan([customers, failing('halt')], unit)).toThrow(MapperError);
    const parked = plan([customers, failing('park')], unit).plan;
    const whole = mapUnit([customers, failing('park')], transaction(changes, { commitLsn: '0/8000', xid: 903 }), context);
    expect(parked.failed).toEqual(whole.failed);
    expect(parked.failed[0]!.data).toMatchObject({ mapper: 'failing', cause: { message: 'cannot map inv1' } });
    expect([...parked.produce()]).toEqual(whole.events);
  });

  it('a mapper whose second run differs from the first is stopped as impure', () => {
    let runs = 0;
    const impure = defineMapper({
      name: 'impure',
      tables: { 'public.orders': { columns: ['id'] } },
      *map(tx) {
        runs += 1;
        for (const change of tx.each()) yield { stream: `order-${String(change.key.id)}`, type: 'OrderPlaced', version: 1, data: {} };
        if (runs === 2) yield { stream: 'order-extra', type: 'OrderPlaced', version: 1, data: {} };
      },
    });
    const changes = [insert('public.orders', { id: '1' })];
    const { plan: p } = plan([impure], { ...transaction(changes, { commitLsn: '0/9000', xid: 904 }), changes: sequenceOf(() => changes, 1) });
    const error = (() => {
      try {
        return [...p.produce()];
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(MapperPurityError);
    // It names the transaction both runs mapped, the difference and the fix.
    expect((error as MapperPurityError).details.position).toEqual({ commitLsn: '0/9000', xid: 904 });
    expect((error as Error).message).toMatch(/mapper "impure" is not pure: two runs over the transaction at commitLsn 0\/9000 xid 904 differ at events\[1\] .* — fix: derive events only from the transaction given/);
  });
});

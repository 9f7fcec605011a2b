// The invoicing workload's plan: deterministic for a seed, legal for the schema and the mappers.
import { describe, expect, it } from 'vitest';
import { createPrng, createWorkloadPlanner, laneOf, type WorkloadOperation } from '../../examples/invoicing/workload.js';

function plan(seed: number, count: number, seedCustomers = 0, idPrefix?: string) {
  const planner = createWorkloadPlanner({ seed, ...(idPrefix ? { idPrefix } : {}) });
  const seeded = planner.seedBatch(seedCustomers);
  const operations = Array.from({ length: count }, () => planner.next());
  return { seeded, operations };
}

const sum = (values: readonly string[]) => values.reduce((acc, v) => acc + Math.round(Number(v) * 100), 0);

describe('workload plan', () => {
  it('is the same for the same seed and different for another', () => {
    expect(plan(42, 500, 20)).toEqual(plan(42, 500, 20));
    expect(plan(42, 500, 20)).not.toEqual(plan(43, 500, 20));
    // A prefix of a longer plan is the shorter plan: a run stopped early did exactly the first n operations.
    expect(plan(42, 800).operations.slice(0, 500)).toEqual(plan(42, 500).operations);
  });

  it('keeps PRNG values in [0, 1) and repeatable', () => {
    const a = createPrng(9);
    const b = createPrng(9);
    const values = Array.from({ length: 1000 }, () => a());
    expect(values).toEqual(Array.from({ length: 1000 }, () => b()));
    expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
    expect(new Set(values).size).toBeGreaterThan(990);
  });

  it('only plans legal transitions: customers before their invoices, issue drafts, pay issued, void drafts or issued', () => {
    const { seeded, operations } = plan(5, 3000, 30);
    const customers = new Set(seeded.customers.map((c) => c.customerId));
    const status = new Map<string, string>(seeded.invoices.map((i) => [i.invoiceId, i.status]));
    const totals = new Map<string, string>(seeded.invoices.map((i) => [i.invoiceId, i.total]));
    for (const op of operations) {
      switch (op.kind) {
        case 'register-customer':
          expect(customers.has(op.customerId)).toBe(false);
          customers.add(op.customerId);
          break;
        case 'draft-invoice':
          expect(customers.has(op.customerId)).toBe(true);
          expect(status.has(op.invoiceId)).toBe(false);
          status.set(op.invoiceId, 'draft');
          break;
        case 'issue-invoice':
          expect(status.get(op.invoiceId)).toBe('draft');
          expect(op.lines.length).toBeGreaterThan(0);
          expect(op.lines.map((l) => l.lineNo)).toEqual(op.lines.map((_, i) => i + 1));
          for (const line of op.lines) expect(sum([line.amount])).toBe(line.quantity * sum([line.unitPrice]));
          expect(sum([op.total])).toBe(sum(op.lines.map((l) => l.amount)));
          status.set(op.invoiceId, 'issued');
          totals.set(op.invoiceId, op.total);
          break;
        case 'pay-invoice':
          expect(status.get(op.invoiceId)).toBe('issued');
          expect(op.amount).toBe(totals.get(op.invoiceId));
          status.set(op.invoiceId, 'paid');
          break;
        case 'void-invoice':
          expect(['draft', 'issued']).toContain(status.get(op.invoiceId));
          status.set(op.invoiceId, 'void');
          break;
      }
    }
    const kinds = new Set(operations.map((o) => o.kind));
    expect([...kinds].sort()).toEqual(['draft-invoice', 'issue-invoice', 'pay-invoice', 'register-customer', 'void-invoice']);
  });

  it('writes money as decimal strings with two digits and gives sensitive values to every customer', () => {
    const { seeded, operations } = plan(11, 1000, 10);
    const money = [
      ...operations.flatMap((o) => (o.kind === 'issue-invoice' ? [o.total, ...o.lines.flatMap((l) => [l.unitPrice, l.amount])] : o.kind === 'pay-invoice' ? [o.amount] : [])),
      ...seeded.invoices.map((i) => i.total),
    ];
    for (const m of money) expect(m).toMatch(/^-?\d+\.\d{2}$/);
    const registered = [...seeded.customers, ...operations.filter((o): o is Extract<WorkloadOperation, { kind: 'register-customer' }> => o.kind === 'register-customer')];
    for (const c of registered) {
      expect(c.email).toMatch(/@example\.com$/);
      expect(c.cardNumber).toMatch(/^\d{16}$/);
    }
  });

  it('seeds invoices in every state, consistent with their lines and payments', () => {
    const { seeded } = plan(3, 0, 200);
    expect(new Set(seeded.invoices.map((i) => i.status))).toEqual(new Set(['draft', 'issued', 'paid', 'void']));
    for (const invoice of seeded.invoices) {
      expect(invoice.number === null).toBe(invoice.status === 'draft');
      expect(invoice.paymentId !== null).toBe(invoice.status === 'paid');
      if (invoice.lines.length) expect(sum([invoice.total])).toBe(sum(invoice.lines.map((l) => l.amount)));
    }
  });

  it('prefixes every id when asked, so runs can share a database', () => {
    const { seeded, operations } = plan(1, 200, 5, 'run7');
    const ids = [...seeded.customers.map((c) => c.customerId), ...seeded.invoices.map((i) => i.invoiceId), ...operations.map((o) => ('invoiceId' in o ? o.invoiceId : o.customerId))];
    expect(ids.every((id) => id.startsWith('run7_'))).toBe(true);
  });

  it('sends every operation of a customer to the same connection', () => {
    const { operations } = plan(8, 500);
    const lanes = new Map<string, number>();
    for (const op of operations) {
      const lane = laneOf(op.customerId, 3);
      expect(lane).toBeGreaterThanOrEqual(0);
      expect(lane).toBeLessThan(3);
      expect(lanes.get(op.customerId) ?? lane).toBe(lane);
      lanes.set(op.customerId, lane);
    }
    expect(new Set(lanes.values()).size).toBe(3);
  });
});

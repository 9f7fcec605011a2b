/**
 * Compile-time tests of typed mappers (checked by `tsc -p tsconfig.json --noEmit`, part of
 * `npm run lint`). Each `@ts-expect-error` line must fail to compile; if one starts compiling,
 * tsc reports the unused directive.
 */
import { defineMapper, type EventFor } from '../../src/mapping/index.js';
import type { EventContracts } from '../../examples/invoicing/contracts.generated.js';

interface Tables {
  'public.invoice': { id: string; status: 'draft' | 'issued'; total: string; currency: string; customer_id: string };
}

// A correct mapper compiles.
export const ok = defineMapper<EventContracts, Tables>({
  name: 'ok',
  tables: { 'public.invoice': { columns: ['id', 'status', 'total', 'currency', 'customer_id'], before: ['status'] } },
  map: (tx) =>
    tx.inserts('public.invoice').map(({ after }) => ({
      stream: `invoice-${after.id}`,
      type: 'InvoiceDrafted',
      version: 1,
      data: { invoiceId: after.id, customerId: after.customer_id, currency: after.currency },
    })),
});

export const wrongFieldType = defineMapper<EventContracts>({
  name: 'wrong-field-type',
  tables: { 'public.invoice': { columns: ['id'] } },
  map: () => [
    // @ts-expect-error total of InvoiceIssued v2 is { amount, currency }, not a string (that was v1)
    { stream: 'invoice-1', type: 'InvoiceIssued', version: 2, data: { invoiceId: '1', customerId: 'c', number: 'n', total: '1.00', issuedAt: 't', dueDate: null, lines: [] } },
  ],
});

export const unknownField = defineMapper<EventContracts>({
  name: 'unknown-field',
  tables: { 'public.invoice': { columns: ['id'] } },
  map: () => [
    // @ts-expect-error `amount` is not a field of InvoiceDrafted v1 (it is one of InvoicePaid's)
    { stream: 'invoice-1', type: 'InvoiceDrafted', version: 1, data: { invoiceId: '1', customerId: 'c', currency: 'EUR', amount: '1.00' } },
  ],
});

export const missingField = defineMapper<EventContracts>({
  name: 'missing-field',
  tables: { 'public.invoice': { columns: ['id'] } },
  map: () => [
    // @ts-expect-error customerId is required by CustomerRegistered v1
    { stream: 'customer-1', type: 'CustomerRegistered', version: 1, data: { name: 'n', country: 'DE' } },
  ],
});

export const unknownVersion = defineMapper<EventContracts>({
  name: 'unknown-version',
  tables: { 'public.invoice': { columns: ['id'] } },
  map: () => [
    // @ts-expect-error there is no InvoicePaid v2
    { stream: 'invoice-1', type: 'InvoicePaid', version: 2, data: { invoiceId: '1', paymentId: 'p', amount: '1.00', currency: 'EUR', paidAt: 't' } },
  ],
});

export const unknownType = defineMapper<EventContracts>({
  name: 'unknown-type',
  tables: { 'public.invoice': { columns: ['id'] } },
  map: () => [
    // @ts-expect-error InvoiceChanged is not a contract
    { stream: 'invoice-1', type: 'InvoiceChanged', version: 1, data: {} },
  ],
});

// Through Array#map the contract still applies (inference from the return type).
export const viaArrayMap = defineMapper<EventContracts, Tables>({
  name: 'via-array-map',
  tables: { 'public.invoice': { columns: ['id', 'currency', 'customer_id'] } },
  map: (tx) =>
    // @ts-expect-error currency must be a string
    tx.inserts('public.invoice').map(({ after }) => ({
      stream: `invoice-${after.id}`,
      type: 'InvoiceDrafted',
      version: 1,
      data: { invoiceId: after.id, customerId: after.customer_id, currency: 42 },
    })),
});

export const notAllowlistable = defineMapper<EventContracts, Tables>({
  name: 'not-allowlistable',
  // @ts-expect-error a typed allowlist can only name the table's columns
  tables: { 'public.invoice': { columns: ['id', 'card_number'] } },
  map: () => [],
});

export const wrongBefore = defineMapper<EventContracts, Tables>({
  name: 'wrong-before',
  tables: { 'public.invoice': { columns: ['id', 'status'], before: ['status'] } },
  map: (tx) => {
    // @ts-expect-error transitions check the column's value type
    tx.transitions('public.invoice', 'status', 'draft', 'archived');
    return [];
  },
});

// Snapshot and change transactions narrow on isSnapshot.
export const narrowing = defineMapper<EventContracts, Tables>({
  name: 'narrowing',
  tables: { 'public.invoice': { columns: ['id'] } },
  map: (tx) => {
    if (tx.isSnapshot) {
      const generation: string = tx.snapshotGeneration;
      void generation;
      return [];
    }
    const time: string = tx.commitTime;
    void time;
    return [];
  },
});

// Without a contracts map, any event shape is accepted.
export const untyped = defineMapper({
  name: 'untyped',
  tables: { 'public.anything': { columns: ['id'] } },
  map: (tx) => tx.rows('public.anything').map((row) => ({ stream: `thing-${String(row.id)}`, type: 'ThingHappened', version: 3, data: { id: row.id } })),
});

export type _AllEvents = EventFor<EventContracts>;

// The bulk-transaction tests' domain: one table, one event per order per transaction. The mapper
// is a generator over `tx.each()`, so a transaction of any size is mapped in bounded memory.
// `note` is sensitive: it is not allowlisted, so it never reaches an event.
import { fileURLToPath } from 'node:url';
import { defineMapper } from '../../../src/mapping/index.js';

export const ORDERS_SCHEMA = `
create table orders (
  id       bigint primary key,
  customer text not null,
  status   text not null,
  amount   numeric(12,2) not null,
  note     text
);`;

export const ORDERS_TABLES = ['public.orders'];

/** The domain's JSON Schema contracts. */
export const ORDERS_CONTRACTS = fileURLToPath(new URL('./contracts', import.meta.url));

interface OrderRow {
  readonly id: bigint;
  readonly customer: string;
  readonly status: string;
  readonly amount: string;
}

/** OrderPlaced / OrderImported (snapshot) / OrderStatusChanged / OrderRemoved, one per changed order, stream `order-<id>`. */
export const orders = defineMapper<Record<string, unknown>, { 'public.orders': OrderRow }>({
  name: 'orders',
  tables: { 'public.orders': { columns: ['id', 'customer', 'status', 'amount'], before: 'key' } },
  *map(tx) {
    for (const change of tx.each('public.orders')) {
      const id = String(change.key.id);
      const stream = `order-${id}`;
      if (change.op === 'delete') yield { stream, type: 'OrderRemoved', version: 1, data: { orderId: id } };
      else if (change.op === 'update') yield { stream, type: 'OrderStatusChanged', version: 1, data: { orderId: id, status: change.after.status, amount: change.after.amount } };
      else {
        const { customer, status, amount } = change.after;
        yield { stream, type: change.op === 'read' ? 'OrderImported' : 'OrderPlaced', version: 1, data: { orderId: id, customer, status, amount } };
      }
    }
  },
});

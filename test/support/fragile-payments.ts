// A mapper that parks every payment (onError: 'park'): stands in for a mapper bug met in
// production, in the tests of failure policies, metrics and the status page.
import { defineMapper } from '../../src/mapping/index.js';

export const fragilePayments = defineMapper({
  name: 'fragile-payments',
  onError: 'park',
  tables: { 'public.payment': { columns: ['id', 'invoice_id'] } },
  map: (tx) => {
    const [payment] = tx.inserts('public.payment');
    throw new Error(`cannot map payment ${String(payment?.after.id)}`);
  },
});

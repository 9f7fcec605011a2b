/**
 * Types the invoicing mappers share: the event contracts (generated from `contracts/invoicing`)
 * and the source rows as the mappers see them (allowlisted columns, decoded values: numeric →
 * decimal string, timestamptz → ISO-8601 string, date → `YYYY-MM-DD`).
 */
export type { EventContracts } from '../contracts.generated.js';

export type InvoiceStatus = 'draft' | 'issued' | 'paid' | 'void';

export interface CustomerRow {
  id: string;
  name: string;
  country: string;
  // email and card_number are sensitive and deliberately absent: a typed allowlist cannot name them.
}

export interface InvoiceRow {
  id: string;
  customer_id: string;
  number: string | null;
  status: InvoiceStatus;
  currency: string;
  total: string;
  issued_at: string | null;
  due_date: string | null;
  void_reason: string | null;
}

export interface InvoiceLineRow {
  invoice_id: string;
  line_no: number;
  description: string;
  quantity: number;
  unit_price: string;
  amount: string;
}

export interface PaymentRow {
  id: string;
  invoice_id: string;
  amount: string;
  currency: string;
  paid_at: string;
}

/**
 * The source tables, kysely-style: table → row. Keyed by `<schema>.<table>` for any schema, so
 * the same types serve the mappers made for `public` and for another schema (see `tables.ts`).
 */
export interface InvoicingTables {
  [table: `${string}.customer`]: CustomerRow;
  [table: `${string}.invoice`]: InvoiceRow;
  [table: `${string}.invoice_line`]: InvoiceLineRow;
  [table: `${string}.payment`]: PaymentRow;
}

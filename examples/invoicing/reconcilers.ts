/**
 * The invoicing example's reconcilers (`event-assembler reconcile`, docs/reconcile.md): how the
 * `invoice` and `customer` rows should agree with the `invoice-<id>` and `customer-<id>` streams
 * the mappers write. They read only columns the mappers allowlist, so `customer.email` and
 * `customer.card_number` never reach a report.
 */
import { defineReconciler, type ReconcileEvent, type Reconciler } from '../../src/reconcile/define-reconciler.js';
import type { CustomerRegisteredV1, InvoiceDraftedV1, InvoiceImportedV1, InvoiceIssuedV1, InvoiceIssuedV2 } from './contracts.generated.js';
import { invoicingTables } from './mappers/tables.js';
import type { CustomerRow, InvoiceRow, InvoiceStatus } from './mappers/types.js';

/** The invoice columns reconcile reads. */
export type InvoiceReconcileRow = Pick<InvoiceRow, 'id' | 'customer_id' | 'status' | 'currency' | 'total'>;

/** A live invoice as its events describe it; `total` is the decimal string the events carry (`"123.40"`). */
export type LiveInvoiceState = Readonly<{ customerId: string; status: InvoiceStatus; currency: string; total: string }>;

/** An invoice's state: live, or deleted (a discarded draft). */
export type InvoiceState = LiveInvoiceState | Readonly<{ deleted: true }>;

/** The customer columns reconcile reads (never `email` or `card_number`). */
export type CustomerReconcileRow = Pick<CustomerRow, 'id' | 'name' | 'country'>;

export type CustomerState = Readonly<{ name: string; country: string }>;

const DISCARDED: InvoiceState = Object.freeze({ deleted: true });

function isLive(state: InvoiceState | null): state is LiveInvoiceState {
  return state !== null && !('deleted' in state);
}

/**
 * InvoiceIssued's data as v2. The `version` comes from the event's `contract` metadata; without
 * it (`null`) the shape decides: v1 carries `total` as a string beside `currency`, v2 as
 * `{ amount, currency }`.
 */
function issuedAsV2(event: ReconcileEvent): Pick<InvoiceIssuedV2, 'customerId' | 'total'> {
  const data = event.data as InvoiceIssuedV1 | InvoiceIssuedV2;
  const v1 = event.version === 1 || (event.version === null && typeof data.total === 'string');
  if (v1) {
    const { customerId, currency, total } = data as InvoiceIssuedV1;
    return { customerId, total: { amount: total, currency } };
  }
  return data as InvoiceIssuedV2;
}

/** An invoice's state after `event`. Exported for tests; the reconciler's `fold`. */
export function foldInvoice(state: InvoiceState | null, event: ReconcileEvent): InvoiceState | null {
  switch (event.type) {
    case 'InvoiceImported': {
      // A snapshot record is the row's state, not a change: it replaces whatever came before.
      const { customerId, status, currency, total } = event.data as InvoiceImportedV1;
      return { customerId, status, currency, total };
    }
    case 'InvoiceDrafted': {
      const { customerId, currency } = event.data as InvoiceDraftedV1;
      // The event carries no total: a draft's is the column default (`total numeric(12,2) not
      // null default 0` in schema.sql), which PostgreSQL prints as 0.00.
      return { customerId, status: 'draft', currency, total: '0.00' };
    }
    case 'InvoiceIssued': {
      const { customerId, total } = issuedAsV2(event);
      return { customerId, status: 'issued', currency: total.currency, total: total.amount };
    }
    // Status changes need the invoice's state: on a stream that never created the invoice (or
    // discarded it) they change nothing, so the report shows that break rather than half a state.
    case 'InvoicePaid':
      return isLive(state) ? { ...state, status: 'paid' } : state;
    case 'InvoiceVoided':
      return isLive(state) ? { ...state, status: 'void' } : state;
    case 'InvoiceDiscarded':
      return DISCARDED;
    default:
      return state;
  }
}

/** A customer's state after `event`. Exported for tests; the reconciler's `fold`. */
export function foldCustomer(state: CustomerState | null, event: ReconcileEvent): CustomerState | null {
  if (event.type !== 'CustomerRegistered') return state;
  const { name, country } = event.data as CustomerRegisteredV1;
  return { name, country };
}

/**
 * Invoices: customer, status, currency and total. The line count is left out: `InvoiceImported`
 * (a snapshot of the invoice row) carries no lines, so an imported invoice's lines cannot be
 * folded from its stream.
 */
export function createInvoiceReconciler(schema = 'public'): Reconciler<InvoiceReconcileRow, InvoiceState> {
  return defineReconciler<InvoiceReconcileRow, InvoiceState>({
    table: invoicingTables(schema).invoice,
    columns: ['id', 'customer_id', 'status', 'currency', 'total'],
    streamPrefix: 'invoice-',
    stream: (row) => `invoice-${row.id}`,
    // numeric arrives as PostgreSQL prints it (`123.40`, two digits for numeric(12,2)): the events' decimal string.
    expected: (row) => ({ customerId: row.customer_id, status: row.status, currency: row.currency, total: row.total }),
    fold: foldInvoice,
    deleted: (state) => !isLive(state),
  });
}

/** Customers: name and country (the name is personal data: reports show it masked). */
export function createCustomerReconciler(schema = 'public'): Reconciler<CustomerReconcileRow, CustomerState> {
  return defineReconciler<CustomerReconcileRow, CustomerState>({
    table: invoicingTables(schema).customer,
    columns: ['id', 'name', 'country'],
    streamPrefix: 'customer-',
    stream: (row) => `customer-${row.id}`,
    expected: (row) => ({ name: row.name, country: row.country }),
    fold: foldCustomer,
    mask: ['name'],
  });
}

export type InvoicingReconcilers = readonly [Reconciler<InvoiceReconcileRow, InvoiceState>, Reconciler<CustomerReconcileRow, CustomerState>];

/** `[invoices, customers]` for the example's tables in `schema` (where `schema.sql` was applied). Default: `public`. */
export function createInvoicingReconcilers(schema = 'public'): InvoicingReconcilers {
  return [createInvoiceReconciler(schema), createCustomerReconciler(schema)];
}

/** The example's reconcilers for its tables in `public`. */
export const reconcilers: InvoicingReconcilers = createInvoicingReconcilers();

// The invoicing example, loaded at run time from the checkout: it lives outside src/ (it is not
// part of the package), in TypeScript, so the demo runs through tsx as `npm start` does. These
// are the parts of it the demo uses, typed here because src/ cannot import examples/.
import { readFile } from 'node:fs/promises';
import type { Upcaster } from '../../../contracts/upcasters.js';
import type { Projection } from '../../../consumer/index.js';
import type { AnyMapper } from '../../../mapping/index.js';
import type { AnyReconciler } from '../../../reconcile/index.js';

export const EXAMPLE = new URL('../../../../examples/invoicing/', import.meta.url);

export interface WorkloadCounts {
  transactions: number;
  operations: Record<string, number>;
  seeded: { customers: number; invoices: number; lines: number; payments: number };
  changeEvents: Record<string, number>;
}

export interface Workload {
  seed(customers: number): Promise<WorkloadCounts>;
  run(options: { durationMs?: number; transactions?: number; signal?: AbortSignal }): Promise<WorkloadCounts>;
  counts(): WorkloadCounts;
  close(): Promise<void>;
}

export interface InvoicingExample {
  /** The example's mappers for its tables in `schema`. */
  createInvoicingMappers(schema: string): readonly AnyMapper[];
  /** The example's reconcilers (invoices, customers) for its tables in `schema`. */
  createInvoicingReconcilers(schema: string): readonly AnyReconciler[];
  createInvoicingWorkload(options: {
    connection: string;
    schema: string;
    seed: number;
    rate: number | 'unlimited';
    concurrency: number;
    idPrefix?: string;
  }): Workload;
  /** The example's projections (examples/invoicing/projections); `idPrefix` keeps them to one run's invoices. */
  createInvoicingProjections(options: { idPrefix?: string }): { invoices: Projection<any>; customerSummary: Projection<any> };
  /** InvoiceIssued v1 → v2, for the projections' contracts. */
  readonly invoicingUpcasters: readonly Upcaster[];
}

export async function loadExample(): Promise<InvoicingExample> {
  try {
    const { createInvoicingMappers, createInvoicingReconcilers } = (await import(new URL('index.ts', EXAMPLE).href)) as Pick<InvoicingExample, 'createInvoicingMappers' | 'createInvoicingReconcilers'>;
    const { createInvoicingWorkload } = (await import(new URL('workload.ts', EXAMPLE).href)) as Pick<InvoicingExample, 'createInvoicingWorkload'>;
    const { createInvoicingProjections } = (await import(new URL('projections/index.ts', EXAMPLE).href)) as Pick<InvoicingExample, 'createInvoicingProjections'>;
    const { invoicingUpcasters } = (await import(new URL('upcasters.ts', EXAMPLE).href)) as Pick<InvoicingExample, 'invoicingUpcasters'>;
    return { createInvoicingMappers, createInvoicingReconcilers, createInvoicingWorkload, createInvoicingProjections, invoicingUpcasters };
  } catch (error) {
    throw new Error(
      `the demo needs the invoicing example from a checkout of event-assembler (examples/invoicing, loaded through tsx); run it there with npm start. (${error instanceof Error ? error.message : String(error)})`,
      { cause: error },
    );
  }
}

/** examples/invoicing/schema.sql (it names no schema: applied under a search_path). */
export function exampleSchemaSql(): Promise<string> {
  return readFile(new URL('schema.sql', EXAMPLE), 'utf8');
}

// The example's projections after the assembler: the consumer kit's runner for `invoices` and
// `customerSummary` against the demo's PostgreSQL (tables and the kit's state in a schema of the
// demo's own, `<schema>_projections`) and its KurrentDB; waits until both have applied the last
// invoice event the assembler appended, then checks their balances against the source tables.
import { BACKWARDS, END, KurrentDBClient, streamNameFilter } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { createProjectionRunner, type AllPosition, type Projection, type ProjectionRunner } from '../../../consumer/index.js';
import { createLogger } from '../../../pipeline/index.js';
import { CONTRACTS_DIR } from './assembler.js';
import type { Cleanups } from './cleanups.js';
import { withClient } from './connections.js';
import type { InvoicingExample } from './example.js';
import type { DemoNames } from './names.js';
import { checkProjections } from './projection-check.js';
import type { ProjectionsReport, Say } from './types.js';
import { Interrupted, waitFor } from './wait.js';

export interface ProjectionSettings {
  readonly names: DemoNames;
  readonly admin: string;
  readonly kurrentdb: string;
  readonly example: InvoicingExample;
  readonly verbose: boolean;
}

/** The schema of the projections' tables and of the kit's state. */
export function projectionSchema(names: DemoNames): string {
  return `${names.schema}_projections`;
}

/** The `$all` position of the last event in this run's invoice streams (`null`: none). */
async function lastInvoiceEvent(kurrentdb: string, names: DemoNames): Promise<AllPosition | null> {
  const client = KurrentDBClient.connectionString(kurrentdb);
  try {
    const prefix = names.idPrefix ? `invoice-${names.idPrefix}_` : 'invoice-';
    for await (const resolved of client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, filter: streamNameFilter({ prefixes: [prefix] }) })) {
      const position = resolved.event?.position;
      if (position) return { commit: position.commit, prepare: position.prepare };
    }
    return null;
  } finally {
    await client.dispose();
  }
}

const reached = (position: AllPosition | null, target: AllPosition | null): boolean =>
  target === null || (position !== null && (position.commit > target.commit || (position.commit === target.commit && position.prepare >= target.prepare)));

/** Runs both projections until caught up, stops them, and checks their tables. Never throws: a failure is in the report. */
export async function runProjections(settings: ProjectionSettings, cleanups: Cleanups, say: Say, signal: AbortSignal): Promise<ProjectionsReport> {
  const { names, example } = settings;
  const schema = projectionSchema(names);
  const projections = example.createInvoicingProjections(names.idPrefix ? { idPrefix: names.idPrefix } : {});
  const pretty = createLogger({ format: 'pretty', write: say });
  const logger = { info: settings.verbose ? pretty.info : () => undefined, warn: pretty.warn, error: pretty.error };
  if (names.shared) cleanups.push(`schema ${schema}`, () => withClient(settings.admin, (c) => c.query(`DROP SCHEMA IF EXISTS ${pg.escapeIdentifier(schema)} CASCADE`)));
  const started = performance.now();
  const runners: Array<{ projection: Projection<any>; runner: ProjectionRunner; failure: unknown }> = [];
  try {
    const target = await lastInvoiceEvent(settings.kurrentdb, names);
    say(`projections: invoices and customerSummary (examples/invoicing/projections) through the consumer kit, tables and kit state in schema ${schema}, until the last invoice event`);
    for (const projection of [projections.invoices, projections.customerSummary]) {
      const runner = createProjectionRunner({
        projection,
        postgres: settings.admin,
        kurrentdb: settings.kurrentdb,
        schema,
        stateSchema: schema,
        contracts: { dir: CONTRACTS_DIR, upcasters: example.invoicingUpcasters },
        logger,
      });
      const entry = { projection, runner, failure: null as unknown };
      runner.run().catch((error: unknown) => (entry.failure = error ?? new Error('projection failed')));
      runners.push(entry);
    }
    await waitFor(
      () => runners.every(({ runner }) => reached(runner.status().position, target)),
      `the projections to apply every invoice event (up to ${target ? `commit position ${target.commit}` : 'none'})`,
      signal,
      () => runners.find((r) => r.failure)?.failure ?? null,
      () => runners.map(({ runner }) => runner.status().position?.commit ?? -1n).join(),
    );
    const seconds = (performance.now() - started) / 1000;
    await Promise.all(runners.map(({ runner }) => runner.stop()));
    return { ...(await checkProjections(settings.admin, names.schema, schema)), seconds, error: null };
  } catch (error) {
    if (error instanceof Interrupted) throw error;
    return { invoices: null, customers: null, seconds: (performance.now() - started) / 1000, ok: false, error: error instanceof Error ? error.message : String(error) };
  } finally {
    await Promise.all(runners.map(({ runner }) => runner.stop().catch(() => undefined)));
  }
}

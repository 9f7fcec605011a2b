/**
 * The assembler's front half without a destination: capture (pgoutput decoding, transaction
 * buffer), mapping (the invoicing mappers) and contract validation, acknowledging each
 * transaction as soon as it is mapped. Shows what the stages before the sink cost.
 */
import { fileURLToPath } from 'node:url';
import type pg from 'pg';
import { createPostgresSource, loadContractRegistry, mapUnit, withChanges } from './subject.js';
import { mappers } from '../../examples/invoicing/index.js';
import { TABLES } from './invoicing-db.js';

export interface SourceOnlyResult {
  readonly transactions: number;
  readonly events: number;
  /** From start to the expected transaction mapped and acknowledged. */
  readonly seconds: number;
  /** Time at which the `markAt`-th transaction was acknowledged (seconds since start). */
  readonly markSeconds: number;
}

export async function drainSourceOnly(
  connection: pg.ClientConfig,
  slot: string,
  publication: string,
  expectedTransactions: number,
  markAt: number,
): Promise<SourceOnlyResult> {
  const registry = await loadContractRegistry(fileURLToPath(new URL('../../contracts', import.meta.url)));
  const started = process.hrtime.bigint();
  const source = createPostgresSource({
    connection,
    slot,
    publication,
    tables: TABLES.map((table) => (table === 'public.invoice' ? { table, needsOldValues: true } : table)),
    feedbackDelayMs: 50,
  });
  let transactions = 0;
  let events = 0;
  let markSeconds = 0;
  try {
    for await (const tx of source.transactions()) {
      const changes = await tx.toArray();
      // Same map context as the pipeline: the source identity is the system identifier.
      const result = mapUnit(mappers, withChanges(tx, changes), { assembler: 'bench', sourceIdentity: tx.position.systemId });
      for (const event of result.events) registry.assertValid(event.type, event.version, event.data);
      events += result.events.length;
      source.acknowledge(tx);
      await tx.release();
      transactions += 1;
      if (transactions === markAt) markSeconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (transactions >= expectedTransactions) break;
    }
  } finally {
    await source.close();
  }
  return { transactions, events, seconds: Number(process.hrtime.bigint() - started) / 1e9, markSeconds };
}

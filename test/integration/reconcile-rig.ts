// Shared by the reconciliation tests: the invoicing line running in-process on a pipeline rig
// with a live workload writing all along, the faulty mappers a deploy might bring (one drops
// `total`, one ignores deletes), redeploys (stop, start with other mappers), an ad hoc snapshot
// through the real CLI, `reconcile` from code, and writes behind the assembler's back.
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { expect } from 'vitest';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { defineMapper, type AnyMapper } from '../../src/mapping/index.js';
import { reconcile, type ReconcileReport } from '../../src/reconcile/index.js';
import { createInvoicingReconcilers, createInvoiceLifecycleMapper, mappers } from '../../examples/invoicing/index.js';
import { createInvoicingWorkload, type InvoicingWorkload } from '../../examples/invoicing/workload.js';
import { rigEnv, startCli, writeRigConfig, type PipelineRig } from './pipeline-rig.js';

export const reconcilers = createInvoicingReconcilers();

/** The lifecycle mapper with a bug: `total` emitted as null for the invoices `drop` picks (the contract let it through). */
export function droppingTotal(drop: (invoiceId: string) => boolean): AnyMapper {
  const real = createInvoiceLifecycleMapper();
  return defineMapper({
    name: real.name,
    tables: real.tables,
    map: (tx) =>
      [...real.map(tx)].map((e) =>
        e.type === 'InvoiceIssued' && drop((e.data as { invoiceId: string }).invoiceId) ? { ...e, data: { ...e.data, total: { ...(e.data as { total: object }).total, amount: null } } } : e,
      ) as ReturnType<typeof real.map>,
  });
}

/** The lifecycle mapper with the other bug: deletes make no event. */
export function ignoringDeletes(): AnyMapper {
  const real = createInvoiceLifecycleMapper();
  return defineMapper({ name: real.name, tables: real.tables, map: (tx) => [...real.map(tx)].filter((e) => e.type !== 'InvoiceDiscarded') as ReturnType<typeof real.map> });
}

/** A copy of the invoicing contracts where InvoiceIssued v2's amount may be null: the contract that "lost" its guard. */
export function looseContracts(dir: string): string {
  const copy = join(dir, 'contracts-loose');
  cpSync('contracts/invoicing', copy, { recursive: true });
  const file = join(copy, 'InvoiceIssued.v2.schema.json');
  const schema = JSON.parse(readFileSync(file, 'utf8')) as { $defs: { money: { properties: { amount: Record<string, unknown> } } } };
  schema.$defs.money.properties.amount = { type: ['string', 'null'] };
  writeFileSync(file, JSON.stringify(schema, null, 2));
  return copy;
}

export interface ReconcileLine {
  readonly rig: PipelineRig;
  readonly name: string;
  readonly kurrent: KurrentDBClient;
  readonly live: InvoicingWorkload;
  assembler(): Assembler;
  /** Stops the running assembler gracefully and starts one with these mappers (a deploy). */
  deploy(options?: { mappers?: readonly AnyMapper[]; contracts?: string }): Promise<void>;
  stop(): Promise<void>;
  /** Starts the live workload in the background (if not running). */
  resumeLive(): void;
  /** Stops the live workload and waits for its started transactions. */
  pauseLive(): Promise<void>;
  /** Waits until the assembler's slot is acknowledged at or past the current WAL position (all written so far is durable). */
  caughtUp(): Promise<void>;
  reconcile(): Promise<ReconcileReport>;
  /** `event-assembler snapshot --tables public.invoice --wait` through the CLI: exits 0 when the generation is done. */
  snapshotInvoices(): Promise<void>;
  /** `event-assembler reconcile` through the CLI with `args`. */
  cli(args: readonly string[]): Promise<{ code: number | null | 'timeout'; stdout: string; stderr: string }>;
  /** Appends an event to `stream` directly (behind the assembler's back). */
  appendBehind(stream: string, type: string, data: Record<string, unknown>, metadata?: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

export async function createReconcileLine(rig: PipelineRig, dir: string): Promise<ReconcileLine> {
  const name = rig.name;
  const kurrent = KurrentDBClient.connectionString(rig.kdb.connectionString);
  const live = createInvoicingWorkload({ connection: rig.db.connectionConfig(), seed: 7, idPrefix: 'live', concurrency: 2, rate: 40 });
  const file = writeRigConfig(dir, rig, { name, envPrefix: 'EA_RECON', reconcilers: true });
  let current: Assembler | null = null;
  let running: Promise<unknown> | null = null;
  let liveRun: { abort: AbortController; done: Promise<unknown> } | null = null;

  const start = async (options: { mappers?: readonly AnyMapper[]; contracts?: string } = {}) => {
    const assembler = createAssembler(rig.config({ name, mappers: options.mappers ?? mappers, contracts: { dir: options.contracts ?? 'contracts/invoicing' } }));
    current = assembler;
    running = assembler.run();
    running.catch(() => undefined);
    await rig.until(() => expect(assembler.status().state).toBe('running'), 30_000);
  };
  const stop = async () => {
    if (!current) return;
    await current.stop();
    await running;
    current = null;
  };
  await start();

  const line: ReconcileLine = {
    rig,
    name,
    kurrent,
    live,
    assembler: () => current!,
    async deploy(options) {
      await stop();
      await start(options);
    },
    stop,
    resumeLive() {
      if (liveRun) return;
      const abort = new AbortController();
      liveRun = { abort, done: live.run({ signal: abort.signal }) };
    },
    async pauseLive() {
      if (!liveRun) return;
      liveRun.abort.abort();
      await liveRun.done;
      liveRun = null;
    },
    async caughtUp() {
      const target = await rig.currentWalLsn();
      await rig.sql('SELECT pg_logical_emit_message(true, $1, $2)', ['test.nudge', 'x']);
      await rig.until(async () => {
        const [row] = (await rig.sql(`SELECT confirmed_flush_lsn >= $2::pg_lsn AS done FROM pg_replication_slots WHERE slot_name = $1`, [rig.slots[0], target])) as { done: boolean }[];
        expect(row?.done).toBe(true);
      }, 30_000);
    },
    reconcile: () =>
      reconcile({
        assembler: name,
        source: { connection: rig.captureUrl, publications: [rig.publication] },
        destination: { connectionString: rig.kdb.connectionString },
        reconcilers,
        waitTimeoutMs: 30_000,
        show: 100,
      }),
    async snapshotInvoices() {
      const cli = startCli(['snapshot', '--config', file, '--tables', 'public.invoice', '--wait', '--timeout', '120'], rigEnv(rig, 'EA_RECON'));
      expect(await cli.exit(150_000), cli.output()).toBe(0);
    },
    async cli(args) {
      const cli = startCli(['reconcile', '--config', file, ...args], rigEnv(rig, 'EA_RECON'));
      const code = await cli.exit(120_000);
      return { code, stdout: cli.stdout(), stderr: cli.stderr() };
    },
    async appendBehind(stream, type, data, metadata = {}) {
      await kurrent.appendToStream(stream, jsonEvent({ type, data, metadata }));
    },
    async close() {
      await line.pauseLive().catch(() => undefined);
      await stop().catch(() => undefined);
      await live.close().catch(() => undefined);
      await kurrent.dispose().catch(() => undefined);
    },
  };
  return line;
}

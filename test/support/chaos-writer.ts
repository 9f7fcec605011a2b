// The chaos run's writer: the invoicing workload on several tables, written across PostgreSQL
// restarts, with a history of exactly what committed.
//
// - Plan lanes: the invoicing plan (examples/invoicing/workload.ts: register a customer, draft,
//   issue — lines + invoice in one transaction —, pay — payment + invoice —, void), one
//   connection per lane, each customer on one lane so an entity's operations commit in plan
//   order. The plan issues, pays and voids seeded invoices too: started while an initial snapshot
//   is unfinished, it changes rows the snapshot has not read yet (chaos-run.ts: why that is exact).
// - The side lane: operations of its own on entities of its own (ids `chaos_…`): customers
//   registered, renamed and deleted, bulk statements (a few hundred customers registered by one
//   INSERT … SELECT, every side customer renamed by one UPDATE), drafts discarded (DELETE), a customer registered with a draft in one transaction, and every
//   open side draft discarded by one DELETE.
//
// Every transaction runs through resilient-transaction.ts: retried after a lost connection, a
// COMMIT in doubt resolved by its marker row. Only what committed enters the history, with the
// events the invoicing mappers make of it (counted per type, to cross-check the destination).
import pg from 'pg';
import { createPrng, createWorkloadPlanner, laneOf, seedRows, writeOperation, type WorkloadOperation } from '../../examples/invoicing/workload.js';
import { createResilientConnection, type ResilientConnection, type ResilientStats, type WriteResult } from './resilient-transaction.js';

export interface ChaosWriterOptions {
  readonly connection: pg.ClientConfig;
  readonly seed: number;
  /** Plan lanes (connections). Default 2. */
  readonly lanes?: number;
  /** Plan transactions per second, all lanes together. */
  readonly rate: number;
  /** Side-lane transactions per second. */
  readonly sideRate: number;
}

export interface WriterHistory {
  /** Committed transactions that changed rows of captured tables. */
  readonly transactions: number;
  /** Committed transactions per operation kind. */
  readonly byKind: Readonly<Record<string, number>>;
  /** Events the committed transactions make, per type. */
  readonly events: Readonly<Record<string, number>>;
  readonly stats: Readonly<ResilientStats>;
}

export interface ChaosWriter {
  /** Writes `customers` customers with invoices, lines and payments (before capture starts): the snapshot's rows. */
  seed(customers: number, batch?: number): Promise<{ customers: number; invoices: number; lines: number; payments: number }>;
  /** Starts the plan lanes and the side lane. */
  start(): void;
  /** The ids of the invoices `seed()` wrote (the snapshot's invoice rows). */
  seededInvoiceIds(): readonly string[];
  /** What committed so far. */
  history(): WriterHistory;
  /** Stops after the transactions in progress; rethrows what a lane hit. */
  stop(): Promise<WriterHistory>;
}

const EVENT_OF: Record<WorkloadOperation['kind'], string> = {
  'register-customer': 'CustomerRegistered',
  'draft-invoice': 'InvoiceDrafted',
  'issue-invoice': 'InvoiceIssued',
  'pay-invoice': 'InvoicePaid',
  'void-invoice': 'InvoiceVoided',
};
const LANE_QUEUE_LIMIT = 16;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function createChaosWriter(options: ChaosWriterOptions): ChaosWriter {
  const planner = createWorkloadPlanner({ seed: options.seed });
  const stats: ResilientStats = { retries: 0, unknownCommitted: 0, unknownAborted: 0 };
  const byKind: Record<string, number> = {};
  const events: Record<string, number> = {};
  let transactions = 0;
  let stopping = false;
  let failure: unknown = null;
  const running: Promise<void>[] = [];
  const connections: ResilientConnection[] = [];

  function record(kind: string, result: WriteResult): void {
    if (result.rows === 0) return;
    transactions += 1;
    byKind[kind] = (byKind[kind] ?? 0) + 1;
    for (const [type, n] of Object.entries(result.events)) if (n > 0) events[type] = (events[type] ?? 0) + n;
  }
  const fail = (error: unknown) => {
    failure ??= error;
    stopping = true;
  };
  const open = (name: string) => {
    const c = createResilientConnection(options.connection, stats, name);
    connections.push(c);
    return c;
  };

  function startPlanLanes(): void {
    const lanes = Array.from({ length: options.lanes ?? 2 }, (_, i) => ({ conn: open(`chaos-plan-${i}`), queue: [] as WorkloadOperation[], wake: null as (() => void) | null }));
    let wakeDispatcher: (() => void) | null = null;
    const laneLoop = async (lane: (typeof lanes)[number]) => {
      for (;;) {
        const op = lane.queue.shift();
        if (!op) {
          if (stopping) return;
          await new Promise<void>((resolve) => (lane.wake = resolve));
          continue;
        }
        wakeDispatcher?.();
        const result = await lane.conn.transaction(async (client) => {
          await writeOperation(client, op);
          return { rows: 1, events: { [EVENT_OF[op.kind]]: 1 } };
        });
        record(op.kind, result);
      }
    };
    const dispatcher = async () => {
      const started = performance.now();
      for (let issued = 0; !stopping; ) {
        const due = started + (issued * 1000) / options.rate;
        if (due > performance.now()) {
          await sleep(due - performance.now());
          continue;
        }
        const op = planner.next();
        const lane = lanes[laneOf(op.customerId, lanes.length)]!;
        while (lane.queue.length >= LANE_QUEUE_LIMIT && !stopping) {
          await new Promise<void>((resolve) => (wakeDispatcher = resolve));
          wakeDispatcher = null;
        }
        // A stop may leave a planned operation unwritten: the plan is only ever followed in order, never skipped.
        if (stopping) break;
        lane.queue.push(op);
        lane.wake?.();
        lane.wake = null;
        issued += 1;
      }
      for (const lane of lanes) lane.wake?.();
    };
    running.push(dispatcher().catch(fail), ...lanes.map((lane) => laneLoop(lane).catch(fail)));
    stopHooks.push(() => {
      wakeDispatcher?.();
      for (const lane of lanes) lane.wake?.();
    });
  }
  const stopHooks: (() => void)[] = [];

  const side = createSideLane(options.seed);
  const seededInvoiceIds: string[] = [];
  function startSideLane(): void {
    const conn = open('chaos-side');
    const loop = async () => {
      const random = createPrng(options.seed + 101);
      while (!stopping) {
        const op = side.next();
        const result = await conn.transaction(op.write);
        op.committed(result);
        record(op.kind, result);
        await sleep((1000 / options.sideRate) * (0.5 + random()));
      }
    };
    running.push(loop().catch(fail));
  }

  const history = (): WriterHistory => ({ transactions, byKind: { ...byKind }, events: { ...events }, stats: { ...stats } });

  return {
    async seed(customers, batch = 200) {
      const conn = open('chaos-seed');
      const rows = { customers: 0, invoices: 0, lines: 0, payments: 0 };
      for (let done = 0; done < customers; done += batch) {
        const seedBatch = planner.seedBatch(Math.min(batch, customers - done));
        await conn.transaction(async (client) => {
          await seedRows(client, seedBatch);
          return { rows: 1, events: {} };
        });
        rows.customers += seedBatch.customers.length;
        for (const invoice of seedBatch.invoices) {
          rows.invoices += 1;
          seededInvoiceIds.push(invoice.invoiceId);
          rows.lines += invoice.lines.length;
          if (invoice.paymentId) rows.payments += 1;
        }
      }
      await conn.close();
      return rows;
    },
    start() {
      startPlanLanes();
      startSideLane();
    },
    seededInvoiceIds: () => seededInvoiceIds,
    history,
    async stop() {
      stopping = true;
      for (const hook of stopHooks) hook();
      await Promise.all(running);
      await Promise.all(connections.map((c) => c.close()));
      if (failure) throw failure;
      return history();
    },
  };
}

interface SideOperation {
  readonly kind: string;
  write(client: pg.Client): Promise<WriteResult>;
  /** Updates the side lane's model once the transaction committed. */
  committed(result: WriteResult): void;
}

/**
 * The side lane's model and its operations: customers it registered (deletable while they hold
 * no invoice), customers that hold drafts, open drafts. One connection runs them in order, so the
 * model is exact: an operation is chosen from the committed state, and tried again unchanged when
 * it did not commit.
 */
function createSideLane(seed: number) {
  const random = createPrng(seed + 202);
  const pad = (n: number, width = 6) => String(n).padStart(width, '0');
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  let customerSeq = 0;
  let bulkSeq = 0;
  let invoiceSeq = 0;
  /** Customers without invoices (may be deleted). */
  let free: string[] = [];
  /** Customers that hold (or held) a draft: never deleted (invoice rows reference them). */
  const holding: string[] = [];
  let drafts: string[] = [];
  const registered = (id: string) => `INSERT INTO customer (id, name, email, card_number, country) VALUES ('${id}', 'Chaos ${id}', '${id}@example.com', NULL, 'SE')`;

  const ops = {
    register(): SideOperation {
      const id = `chaos_cus_${pad(customerSeq + 1)}`;
      return {
        kind: 'side: register customer',
        write: async (c) => ({ rows: (await c.query(registered(id))).rowCount ?? 0, events: { CustomerRegistered: 1 } }),
        committed: () => void (customerSeq += 1, free.push(id)),
      };
    },
    rename(): SideOperation {
      const id = pick([...free, ...holding]);
      return { kind: 'side: rename customer', write: async (c) => ({ rows: (await c.query(`UPDATE customer SET name = name || '.' WHERE id = $1`, [id])).rowCount ?? 0, events: {} }), committed: () => undefined };
    },
    remove(): SideOperation {
      const id = pick(free);
      return {
        kind: 'side: delete customer',
        write: async (c) => ({ rows: (await c.query('DELETE FROM customer WHERE id = $1', [id])).rowCount ?? 0, events: {} }),
        committed: () => void (free = free.filter((f) => f !== id)),
      };
    },
    bulkRegister(): SideOperation {
      const count = 100 + Math.floor(random() * 300);
      const first = bulkSeq + 1;
      return {
        kind: 'side: bulk register (INSERT … SELECT)',
        write: async (c) => {
          const r = await c.query(
            `INSERT INTO customer (id, name, email, card_number, country)
             SELECT 'chaos_blk_' || lpad(g::text, 7, '0'), 'Bulk ' || g, 'chaos.blk.' || g || '@example.com', NULL, 'NL' FROM generate_series($1::int, $2::int) g`,
            [first, first + count - 1],
          );
          return { rows: r.rowCount ?? 0, events: { CustomerRegistered: r.rowCount ?? 0 } };
        },
        committed: () => {
          for (let g = first; g < first + count; g++) free.push(`chaos_blk_${pad(g, 7)}`);
          bulkSeq += count;
        },
      };
    },
    bulkRename(): SideOperation {
      return { kind: 'side: bulk rename (UPDATE of every side customer)', write: async (c) => ({ rows: (await c.query(`UPDATE customer SET name = name || '+' WHERE id LIKE 'chaos\\_%'`)).rowCount ?? 0, events: {} }), committed: () => undefined };
    },
    draft(withNewCustomer: boolean): SideOperation {
      const invoiceId = `chaos_inv_${pad(invoiceSeq + 1)}`;
      const customerId = withNewCustomer ? `chaos_cus_${pad(customerSeq + 1)}` : pick(free);
      return {
        kind: withNewCustomer ? 'side: register customer + draft (two tables)' : 'side: draft invoice',
        write: async (c) => {
          if (withNewCustomer) await c.query(registered(customerId));
          const r = await c.query(`INSERT INTO invoice (id, customer_id, status, currency) VALUES ($1, $2, 'draft', 'EUR')`, [invoiceId, customerId]);
          const events: Record<string, number> = withNewCustomer ? { CustomerRegistered: 1, InvoiceDrafted: 1 } : { InvoiceDrafted: 1 };
          return { rows: r.rowCount ?? 0, events };
        },
        committed: () => {
          invoiceSeq += 1;
          if (withNewCustomer) customerSeq += 1;
          else free = free.filter((f) => f !== customerId);
          holding.push(customerId);
          drafts.push(invoiceId);
        },
      };
    },
    discard(all: boolean): SideOperation {
      const ids = all ? [...drafts] : [pick(drafts)];
      return {
        kind: all ? 'side: bulk discard (DELETE of every open side draft)' : 'side: discard draft',
        write: async (c) => {
          const r = await c.query(`DELETE FROM invoice WHERE id = ANY($1::text[]) AND status = 'draft'`, [ids]);
          if (r.rowCount !== ids.length) throw new Error(`chaos writer: discarding ${ids.length} drafts deleted ${r.rowCount} rows; the model and the database disagree`);
          return { rows: r.rowCount, events: { InvoiceDiscarded: r.rowCount } };
        },
        committed: () => void (drafts = drafts.filter((d) => !ids.includes(d))),
      };
    },
  };

  return {
    /** The next operation. */
    next(): SideOperation {
      for (;;) {
        const roll = random() * 100;
        if (roll < 25) return ops.register();
        if (roll < 40 && free.length + holding.length > 0) return ops.rename();
        if (roll < 50 && free.length > 0) return ops.remove();
        if (roll < 53) return ops.bulkRegister();
        if (roll < 56 && free.length + holding.length > 0) return ops.bulkRename();
        if (roll < 72 && free.length > 0) return ops.draft(false);
        if (roll < 82) return ops.draft(true);
        if (roll < 97 && drafts.length > 0) return ops.discard(false);
        if (roll >= 97 && drafts.length > 1) return ops.discard(true);
      }
    },
  };
}

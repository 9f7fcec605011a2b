/**
 * A deterministic business workload on the invoicing schema (the demo's and the tests' load).
 *
 * Two halves:
 * - the **plan** (`createWorkloadPlanner`): a seeded PRNG and a model of what exists, producing
 *   one business operation per source transaction — register a customer, draft an invoice,
 *   issue it (lines + status draft→issued + number/issued_at/total in ONE transaction, as the
 *   invoice-lifecycle mapper requires), pay it (payment + status issued→paid in one
 *   transaction), or void it. Pure: same seed and same calls, same operations.
 * - the **runner** (`createInvoicingWorkload`): executes a prefix of that plan against a
 *   database over `concurrency` connections at `rate` transactions per second.
 *
 * Concurrency keeps the plan's meaning: every operation belongs to one customer (an invoice's
 * operations to its customer's), and each customer is served by one connection, so the
 * operations on one entity commit in plan order while different customers run in parallel.
 *
 * ```ts
 * const workload = createInvoicingWorkload({ connection, seed: 42, concurrency: 2, rate: 200 });
 * await workload.seed(100);                         // 100 customers with invoices in all states
 * await workload.run({ transactions: 1_000 });      // or { durationMs: 10_000 } / { signal }
 * console.log(workload.counts());
 * await workload.close();
 * ```
 */
import pg from 'pg';

// ── The plan ────────────────────────────────────────────────────────────────────────────────

export interface PlannedLine {
  readonly lineNo: number;
  readonly description: string;
  readonly quantity: number;
  /** Decimal string with two digits, e.g. `12.50`. */
  readonly unitPrice: string;
  readonly amount: string;
}

export type WorkloadOperation =
  | {
      readonly kind: 'register-customer';
      readonly customerId: string;
      readonly name: string;
      /** Sensitive: must never reach an event. */
      readonly email: string;
      /** Sensitive: must never reach an event. */
      readonly cardNumber: string;
      readonly country: string;
    }
  | { readonly kind: 'draft-invoice'; readonly customerId: string; readonly invoiceId: string; readonly currency: string }
  | {
      readonly kind: 'issue-invoice';
      readonly customerId: string;
      readonly invoiceId: string;
      readonly number: string;
      readonly dueDate: string;
      readonly total: string;
      readonly lines: readonly PlannedLine[];
    }
  | {
      readonly kind: 'pay-invoice';
      readonly customerId: string;
      readonly invoiceId: string;
      readonly paymentId: string;
      readonly amount: string;
      readonly currency: string;
    }
  | { readonly kind: 'void-invoice'; readonly customerId: string; readonly invoiceId: string; readonly reason: string };

export type WorkloadOperationKind = WorkloadOperation['kind'];

/** Rows for `seed()`: existing business state written in a few large transactions. */
export interface SeedBatch {
  readonly customers: readonly Extract<WorkloadOperation, { kind: 'register-customer' }>[];
  readonly invoices: readonly SeedInvoice[];
}

export interface SeedInvoice {
  readonly invoiceId: string;
  readonly customerId: string;
  readonly status: 'draft' | 'issued' | 'paid' | 'void';
  readonly currency: string;
  /** Set when issued, paid, or voided after issue. */
  readonly number: string | null;
  readonly total: string;
  readonly lines: readonly PlannedLine[];
  readonly paymentId: string | null;
  readonly voidReason: string | null;
}

export interface WorkloadPlannerOptions {
  /** PRNG seed. Default: 1. */
  readonly seed?: number;
  /** Prefix of every generated id, so several runs can share a database. Default: none. */
  readonly idPrefix?: string;
}

export interface WorkloadPlanner {
  /** The next operation (one source transaction). */
  next(): WorkloadOperation;
  /** `customers` new customers, each with 0–3 invoices in every state (for `seed()`). */
  seedBatch(customers: number): SeedBatch;
}

const COUNTRIES = ['DE', 'FR', 'NL', 'SE', 'PL', 'ES', 'IT', 'US'];
const CURRENCIES = ['EUR', 'EUR', 'EUR', 'USD', 'SEK', 'PLN'];
const FIRST = ['Ada', 'Grace', 'Alan', 'Edsger', 'Barbara', 'Ken', 'Donald', 'Frances', 'Leslie', 'Radia'];
const LAST = ['Lovelace', 'Hopper', 'Turing', 'Dijkstra', 'Liskov', 'Thompson', 'Knuth', 'Allen', 'Lamport', 'Perlman'];
const PRODUCTS = ['consulting hour', 'licence seat', 'support plan', 'training day', 'hosting month', 'audit', 'migration', 'workshop'];
const VOID_REASONS = ['duplicate', 'customer cancelled', 'wrong amount', 'test invoice'];

/** mulberry32: small, fast, and the same on every platform. Returns [0, 1). */
export function createPrng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function cents(value: number): string {
  const sign = value < 0 ? '-' : '';
  const abs = Math.abs(value);
  return `${sign}${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

interface ModelInvoice {
  readonly id: string;
  readonly customerId: string;
  readonly currency: string;
  total: string;
}

/**
 * The pure plan. The model tracks drafts and issued invoices so every operation is legal
 * (issue only drafts, pay only issued, void drafts or issued, invoices only for existing customers).
 */
export function createWorkloadPlanner(options: WorkloadPlannerOptions = {}): WorkloadPlanner {
  const random = createPrng(options.seed ?? 1);
  const prefix = options.idPrefix ? `${options.idPrefix}_` : '';
  const pad = (n: number) => String(n).padStart(6, '0');
  let customerSeq = 0;
  let invoiceSeq = 0;
  let paymentSeq = 0;
  let numberSeq = 0;
  const customers: string[] = [];
  const drafts: ModelInvoice[] = [];
  const issued: ModelInvoice[] = [];

  const int = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  /** Removes and returns a random element (order of the rest is kept, so the model stays deterministic). */
  const take = <T>(items: T[]): T => items.splice(Math.floor(random() * items.length), 1)[0] as T;

  function customer(): Extract<WorkloadOperation, { kind: 'register-customer' }> {
    const n = ++customerSeq;
    const customerId = `${prefix}cus_${pad(n)}`;
    const first = pick(FIRST);
    const last = pick(LAST);
    const card = Array.from({ length: 16 }, () => int(0, 9)).join('');
    customers.push(customerId);
    return {
      kind: 'register-customer',
      customerId,
      name: `${first} ${last}`,
      email: `${first}.${last}.${n}@example.com`.toLowerCase(),
      cardNumber: card,
      country: pick(COUNTRIES),
    };
  }

  function newInvoice(customerId: string): ModelInvoice {
    return { id: `${prefix}inv_${pad(++invoiceSeq)}`, customerId, currency: pick(CURRENCIES), total: '0.00' };
  }

  function lines(): { lines: PlannedLine[]; total: string } {
    const count = int(1, 4);
    let total = 0;
    const planned: PlannedLine[] = [];
    for (let lineNo = 1; lineNo <= count; lineNo++) {
      const quantity = int(1, 5);
      const unit = int(500, 50_000);
      total += quantity * unit;
      planned.push({ lineNo, description: pick(PRODUCTS), quantity, unitPrice: cents(unit), amount: cents(quantity * unit) });
    }
    return { lines: planned, total: cents(total) };
  }

  function issue(invoice: ModelInvoice): Extract<WorkloadOperation, { kind: 'issue-invoice' }> {
    const { lines: planned, total } = lines();
    invoice.total = total;
    const due = new Date(Date.UTC(2026, 0, 1) + int(0, 364) * 86_400_000).toISOString().slice(0, 10);
    return {
      kind: 'issue-invoice',
      customerId: invoice.customerId,
      invoiceId: invoice.id,
      number: `${prefix}INV-${pad(++numberSeq)}`,
      dueDate: due,
      total,
      lines: planned,
    };
  }

  function next(): WorkloadOperation {
    // Weights: register 10, draft 30, issue 25, pay 25, void 10; a choice with nothing to act on becomes a draft.
    const roll = customers.length === 0 ? 0 : random() * 100;
    let kind: WorkloadOperationKind = roll < 10 ? 'register-customer' : roll < 40 ? 'draft-invoice' : roll < 65 ? 'issue-invoice' : roll < 90 ? 'pay-invoice' : 'void-invoice';
    if ((kind === 'issue-invoice' && drafts.length === 0) || (kind === 'pay-invoice' && issued.length === 0) || (kind === 'void-invoice' && drafts.length + issued.length === 0)) {
      kind = 'draft-invoice';
    }
    switch (kind) {
      case 'register-customer':
        return customer();
      case 'draft-invoice': {
        const invoice = newInvoice(pick(customers));
        drafts.push(invoice);
        return { kind, customerId: invoice.customerId, invoiceId: invoice.id, currency: invoice.currency };
      }
      case 'issue-invoice': {
        const invoice = take(drafts);
        issued.push(invoice);
        return issue(invoice);
      }
      case 'pay-invoice': {
        const invoice = take(issued);
        return { kind, customerId: invoice.customerId, invoiceId: invoice.id, paymentId: `${prefix}pay_${pad(++paymentSeq)}`, amount: invoice.total, currency: invoice.currency };
      }
      case 'void-invoice': {
        const fromDrafts = issued.length === 0 || (drafts.length > 0 && random() < 0.5);
        const invoice = take(fromDrafts ? drafts : issued);
        return { kind, customerId: invoice.customerId, invoiceId: invoice.id, reason: pick(VOID_REASONS) };
      }
    }
  }

  function seedBatch(count: number): SeedBatch {
    const batch: { customers: Extract<WorkloadOperation, { kind: 'register-customer' }>[]; invoices: SeedInvoice[] } = { customers: [], invoices: [] };
    for (let i = 0; i < count; i++) {
      const c = customer();
      batch.customers.push(c);
      const invoices = int(0, 3);
      for (let j = 0; j < invoices; j++) {
        const invoice = newInvoice(c.customerId);
        const roll = random();
        const status: SeedInvoice['status'] = roll < 0.3 ? 'draft' : roll < 0.6 ? 'issued' : roll < 0.9 ? 'paid' : 'void';
        const issuedParts = status === 'draft' ? null : lines();
        if (issuedParts) invoice.total = issuedParts.total;
        if (status === 'draft') drafts.push(invoice);
        if (status === 'issued') issued.push(invoice);
        batch.invoices.push({
          invoiceId: invoice.id,
          customerId: c.customerId,
          status,
          currency: invoice.currency,
          number: issuedParts ? `${prefix}INV-${pad(++numberSeq)}` : null,
          total: invoice.total,
          lines: issuedParts?.lines ?? [],
          paymentId: status === 'paid' ? `${prefix}pay_${pad(++paymentSeq)}` : null,
          voidReason: status === 'void' ? pick(VOID_REASONS) : null,
        });
      }
    }
    return batch;
  }

  return { next, seedBatch };
}

// ── Counts ──────────────────────────────────────────────────────────────────────────────────

export interface WorkloadCounts {
  /** Source transactions committed (seed transactions included). */
  transactions: number;
  /** Operations committed, by kind (seeded rows are not operations: see `seeded`). */
  operations: Record<WorkloadOperationKind, number>;
  /** Rows written by `seed()`. */
  seeded: { customers: number; invoices: number; lines: number; payments: number };
  /**
   * Events the invoicing mappers make of what was committed, when it is captured as changes
   * (not by a snapshot). Seeded invoices that start issued/void make none; seeded drafts make
   * InvoiceDrafted, seeded payments InvoicePaid.
   */
  changeEvents: Record<'CustomerRegistered' | 'InvoiceDrafted' | 'InvoiceIssued' | 'InvoicePaid' | 'InvoiceVoided', number>;
}

export function emptyCounts(): WorkloadCounts {
  return {
    transactions: 0,
    operations: { 'register-customer': 0, 'draft-invoice': 0, 'issue-invoice': 0, 'pay-invoice': 0, 'void-invoice': 0 },
    seeded: { customers: 0, invoices: 0, lines: 0, payments: 0 },
    changeEvents: { CustomerRegistered: 0, InvoiceDrafted: 0, InvoiceIssued: 0, InvoicePaid: 0, InvoiceVoided: 0 },
  };
}

const EVENT_OF: Record<WorkloadOperationKind, keyof WorkloadCounts['changeEvents']> = {
  'register-customer': 'CustomerRegistered',
  'draft-invoice': 'InvoiceDrafted',
  'issue-invoice': 'InvoiceIssued',
  'pay-invoice': 'InvoicePaid',
  'void-invoice': 'InvoiceVoided',
};

// ── The runner ──────────────────────────────────────────────────────────────────────────────

export interface InvoicingWorkloadOptions extends WorkloadPlannerOptions {
  /** Connection of a role that may write the invoicing tables: a connection string or `pg` settings. */
  readonly connection: string | pg.ClientConfig;
  /** Transactions per second across all connections; `'unlimited'` (or 0) for as fast as possible. Default: 'unlimited'. */
  readonly rate?: number | 'unlimited';
  /** Connections writing in parallel. Default: 2. */
  readonly concurrency?: number;
  /** Customers per seed transaction. Default: 100. */
  readonly seedBatchSize?: number;
  /** The schema holding the invoicing tables (each connection's `search_path`). Default: the connection's own `search_path` (`public`). */
  readonly schema?: string;
}

export interface WorkloadRunOptions {
  /** Stop after this many transactions. Default: no limit (then give `durationMs` or `signal`). */
  readonly transactions?: number;
  /** Stop starting new transactions after this long. Default: no limit. */
  readonly durationMs?: number;
  /** Stop starting new transactions when aborted; the ones already started still commit. */
  readonly signal?: AbortSignal;
}

export interface InvoicingWorkload {
  /** Writes `customers` customers with invoices in every state, in transactions of `seedBatchSize` customers. */
  seed(customers: number): Promise<WorkloadCounts>;
  /** Runs the plan until a limit is reached; resolves when every started transaction has committed. */
  run(options?: WorkloadRunOptions): Promise<WorkloadCounts>;
  /** What has been committed so far (a copy). */
  counts(): WorkloadCounts;
  close(): Promise<void>;
}

/** One transaction per operation; the SQL an application would run. */
async function execute(client: pg.Client, op: WorkloadOperation): Promise<void> {
  await client.query('BEGIN');
  try {
    await writeOperation(client, op);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/**
 * The statements of one operation, inside a transaction the caller opened (and commits): for a
 * writer of its own — e.g. one that retries across server restarts (test/support/chaos-writer.ts).
 */
export async function writeOperation(client: pg.Client, op: WorkloadOperation): Promise<void> {
  switch (op.kind) {
    case 'register-customer':
      await client.query('INSERT INTO customer (id, name, email, card_number, country) VALUES ($1, $2, $3, $4, $5)', [op.customerId, op.name, op.email, op.cardNumber, op.country]);
      break;
    case 'draft-invoice':
      await client.query(`INSERT INTO invoice (id, customer_id, status, currency) VALUES ($1, $2, 'draft', $3)`, [op.invoiceId, op.customerId, op.currency]);
      break;
    case 'issue-invoice':
      await insertLines(client, op.invoiceId, op.lines);
      await client.query(
        `UPDATE invoice SET status = 'issued', number = $2, issued_at = now(), due_date = $3, total = $4, updated_at = now() WHERE id = $1 AND status = 'draft'`,
        [op.invoiceId, op.number, op.dueDate, op.total],
      ).then(expectOneRow(op));
      break;
    case 'pay-invoice':
      await client.query('INSERT INTO payment (id, invoice_id, amount, currency, paid_at) VALUES ($1, $2, $3, $4, now())', [op.paymentId, op.invoiceId, op.amount, op.currency]);
      await client.query(`UPDATE invoice SET status = 'paid', updated_at = now() WHERE id = $1 AND status = 'issued'`, [op.invoiceId]).then(expectOneRow(op));
      break;
    case 'void-invoice':
      await client.query(`UPDATE invoice SET status = 'void', void_reason = $2, updated_at = now() WHERE id = $1 AND status IN ('draft', 'issued')`, [op.invoiceId, op.reason]).then(expectOneRow(op));
      break;
  }
}

function expectOneRow(op: WorkloadOperation) {
  return (result: pg.QueryResult) => {
    if (result.rowCount !== 1) throw new Error(`workload: ${op.kind} of ${'invoiceId' in op ? op.invoiceId : op.customerId} changed ${result.rowCount} rows; the plan and the database disagree`);
  };
}

async function insertLines(client: pg.Client, invoiceId: string, lines: readonly PlannedLine[]): Promise<void> {
  if (lines.length === 0) return;
  const values: unknown[] = [];
  const tuples = lines.map((line, i) => {
    values.push(invoiceId, line.lineNo, line.description, line.quantity, line.unitPrice, line.amount);
    const b = i * 6;
    return `($${b + 1}, $${b + 2}, $${b + 3}, $${b + 4}, $${b + 5}, $${b + 6})`;
  });
  await client.query(`INSERT INTO invoice_line (invoice_id, line_no, description, quantity, unit_price, amount) VALUES ${tuples.join(', ')}`, values);
}

/** Which connection serves a customer (FNV-1a of the id): all of one customer's operations stay in order. */
export function laneOf(customerId: string, lanes: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < customerId.length; i++) {
    hash ^= customerId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % lanes;
}

/** Operations queued per connection before the dispatcher waits. */
const LANE_QUEUE_LIMIT = 16;

export function createInvoicingWorkload(options: InvoicingWorkloadOptions): InvoicingWorkload {
  const planner = createWorkloadPlanner(options);
  const concurrency = options.concurrency ?? 2;
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`workload: concurrency must be a positive integer, got ${concurrency}`);
  const rate = options.rate === 'unlimited' || options.rate === undefined || options.rate === 0 ? null : options.rate;
  if (rate !== null && !(rate > 0 && Number.isFinite(rate))) throw new RangeError(`workload: rate must be a positive number of transactions per second or 'unlimited', got ${String(options.rate)}`);
  const seedBatchSize = options.seedBatchSize ?? 100;
  const config: pg.ClientConfig = typeof options.connection === 'string' ? { connectionString: options.connection } : options.connection;
  const counts = emptyCounts();
  let clients: pg.Client[] | null = null;
  let running = false;

  async function connect(): Promise<pg.Client[]> {
    if (clients) return clients;
    const made: pg.Client[] = [];
    try {
      for (let i = 0; i < concurrency; i++) {
        const client = new pg.Client({ ...config, application_name: `invoicing-workload-${i}` });
        // A lost connection surfaces as the failing query; the 'error' event must not crash the process.
        client.on('error', () => undefined);
        await client.connect();
        made.push(client);
        if (options.schema !== undefined) await client.query(`SET search_path TO ${pg.escapeIdentifier(options.schema)}`);
      }
    } catch (error) {
      await Promise.all(made.map((c) => c.end().catch(() => undefined)));
      throw error;
    }
    clients = made;
    return made;
  }

  const copy = (): WorkloadCounts => structuredClone(counts);

  async function seed(customers: number): Promise<WorkloadCounts> {
    if (!Number.isInteger(customers) || customers < 0) throw new RangeError(`workload: seed needs a non-negative number of customers, got ${customers}`);
    const [client] = await connect();
    for (let done = 0; done < customers; done += seedBatchSize) {
      const batch = planner.seedBatch(Math.min(seedBatchSize, customers - done));
      await client!.query('BEGIN');
      try {
        await seedRows(client!, batch);
        await client!.query('COMMIT');
      } catch (error) {
        await client!.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
      counts.transactions += 1;
      counts.seeded.customers += batch.customers.length;
      counts.changeEvents.CustomerRegistered += batch.customers.length;
      for (const invoice of batch.invoices) {
        counts.seeded.invoices += 1;
        counts.seeded.lines += invoice.lines.length;
        if (invoice.status === 'draft') counts.changeEvents.InvoiceDrafted += 1;
        if (invoice.paymentId) {
          counts.seeded.payments += 1;
          counts.changeEvents.InvoicePaid += 1;
        }
      }
    }
    return copy();
  }

  async function run(runOptions: WorkloadRunOptions = {}): Promise<WorkloadCounts> {
    if (running) throw new Error('workload: run() is already running');
    const limit = runOptions.transactions ?? Number.POSITIVE_INFINITY;
    if (limit === Number.POSITIVE_INFINITY && runOptions.durationMs === undefined && runOptions.signal === undefined) {
      throw new RangeError('workload: give transactions, durationMs or signal — otherwise run() never ends');
    }
    running = true;
    const lanes = await connect();
    const started = performance.now();
    const deadline = runOptions.durationMs === undefined ? Number.POSITIVE_INFINITY : started + runOptions.durationMs;
    const queues: WorkloadOperation[][] = lanes.map(() => []);
    const wakeLane: Array<(() => void) | null> = lanes.map(() => null);
    let wakeDispatcher: (() => void) | null = null;
    let dispatching = true;
    let failure: unknown = null;

    const laneLoop = async (index: number) => {
      const client = lanes[index]!;
      const queue = queues[index]!;
      while (true) {
        const op = queue.shift();
        if (!op) {
          if (!dispatching || failure) return;
          await new Promise<void>((resolve) => (wakeLane[index] = resolve));
          continue;
        }
        wakeDispatcher?.();
        if (failure) return;
        try {
          await execute(client, op);
        } catch (error) {
          failure ??= error;
          wakeDispatcher?.();
          return;
        }
        counts.transactions += 1;
        counts.operations[op.kind] += 1;
        counts.changeEvents[EVENT_OF[op.kind]] += 1;
      }
    };
    const workers = lanes.map((_, i) => laneLoop(i));

    try {
      let issued = 0;
      while (issued < limit && !failure && !runOptions.signal?.aborted) {
        const now = performance.now();
        if (now >= deadline) break;
        if (rate !== null) {
          // Open-loop pacing: transaction n starts no earlier than n / rate seconds after the start.
          const due = started + (issued * 1000) / rate;
          if (due > now) {
            await sleepUntil(Math.min(due, deadline), runOptions.signal);
            continue;
          }
        }
        const op = planner.next();
        const lane = laneOf(op.customerId, lanes.length);
        while (queues[lane]!.length >= LANE_QUEUE_LIMIT && !failure) {
          await new Promise<void>((resolve) => (wakeDispatcher = resolve));
          wakeDispatcher = null;
        }
        queues[lane]!.push(op);
        wakeLane[lane]?.();
        wakeLane[lane] = null;
        issued += 1;
      }
    } finally {
      dispatching = false;
      wakeLane.forEach((wake) => wake?.());
      await Promise.all(workers);
      running = false;
    }
    if (failure) throw failure;
    return copy();
  }

  return {
    seed,
    run,
    counts: copy,
    async close() {
      const open = clients ?? [];
      clients = null;
      await Promise.all(open.map((c) => c.end().catch(() => undefined)));
    },
  };
}

/** The rows of a seed batch, inside a transaction the caller opened (`seed()` commits one per batch). */
export async function seedRows(client: pg.Client, batch: SeedBatch): Promise<void> {
  const insertMany = async (table: string, columns: string[], rows: unknown[][]) => {
    // At most ~30 000 parameters per statement (PostgreSQL allows 65 535).
    const perStatement = Math.max(1, Math.floor(30_000 / columns.length));
    for (let at = 0; at < rows.length; at += perStatement) {
      const chunk = rows.slice(at, at + perStatement);
      const values: unknown[] = [];
      const tuples = chunk.map((row) => {
        const base = values.length;
        values.push(...row);
        return `(${row.map((_, i) => `$${base + i + 1}`).join(', ')})`;
      });
      await client.query(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${tuples.join(', ')}`, values);
    }
  };
  await insertMany('customer', ['id', 'name', 'email', 'card_number', 'country'], batch.customers.map((c) => [c.customerId, c.name, c.email, c.cardNumber, c.country]));
  await insertMany(
    'invoice',
    ['id', 'customer_id', 'number', 'status', 'currency', 'total', 'issued_at', 'void_reason'],
    batch.invoices.map((i) => [i.invoiceId, i.customerId, i.number, i.status, i.currency, i.total, i.number ? new Date() : null, i.voidReason]),
  );
  await insertMany(
    'invoice_line',
    ['invoice_id', 'line_no', 'description', 'quantity', 'unit_price', 'amount'],
    batch.invoices.flatMap((i) => i.lines.map((l) => [i.invoiceId, l.lineNo, l.description, l.quantity, l.unitPrice, l.amount])),
  );
  await insertMany(
    'payment',
    ['id', 'invoice_id', 'amount', 'currency', 'paid_at'],
    batch.invoices.filter((i) => i.paymentId).map((i) => [i.paymentId, i.invoiceId, i.total, i.currency, new Date()]),
  );
}

function sleepUntil(at: number, signal?: AbortSignal): Promise<void> {
  const ms = Math.max(0, at - performance.now());
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

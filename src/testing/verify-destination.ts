/**
 * "Does the destination hold exactly what the source history says it must?"
 *
 * The expected events are computed independently of the assembler under test: a **reference
 * slot**, created at the same start point as the assembler's slot (right after it, before any
 * write the assembler should capture), is read from the beginning with `createPostgresSource` —
 * no crash, no restart — and every transaction is mapped with `mapUnit` over the same mappers
 * and the assembler's map context. That yields the exact event ids per stream, in source order.
 * The destination is then read with the real KurrentDB client (`$all`, forwards) and compared:
 * nothing missing, nothing duplicated, nothing extra, the same order in every stream, and the
 * same type and data for every id.
 *
 * ```ts
 * await setupCapture({ connection: admin, publication, slot, tables });   // the assembler's slot
 * await createReferenceSlot(admin, 'verify_ref');                          // same start point
 * // … writes, the assembler runs, stops gracefully …
 * const report = await verifyDestination({
 *   source: { connection: admin, slot: 'verify_ref', publication },
 *   destination: { connectionString },
 *   mappers, assembler: 'invoicing',
 * });
 * console.log(formatDestinationReport(report));
 * await dropReferenceSlot(admin, 'verify_ref');
 * ```
 *
 * The reference is read up to a marker the verifier writes first (a transactional
 * `pg_logical_emit_message`), so everything committed before the call is included and nothing
 * later. The reference slot is never acknowledged: verifying twice gives the same expectation.
 * Snapshot records are not part of the reference (a slot's history holds changes only): compare
 * a destination filled by an initial snapshot with `expectedBefore` or leave snapshot streams out
 * with `ignoreStream`.
 */
import { randomUUID } from 'node:crypto';
import { FORWARDS, KurrentDBClient, START } from '@kurrent/kurrentdb-client';
import pg from 'pg';
import { readChanges, withChanges } from '../buffer/index.js';
import { mapUnit, mapperRequirements, type AnyMapper, type MapContext } from '../mapping/index.js';
import { createPostgresSource, type PostgresSourceTable } from '../source/index.js';
import { createSlotWithSnapshot, readInitialSnapshot } from '../source/snapshot/index.js';
import { stateStreamName } from '../sink/index.js';

/** Prefix of the marker message the verifier writes into the WAL. */
export const VERIFY_MARKER_PREFIX = 'event-assembler.verify';

export interface VerifyDestinationOptions {
  readonly source: {
    /** A role that may stream from the reference slot (REPLICATION) and call pg_logical_emit_message. */
    readonly connection: string | pg.ClientConfig;
    /** The reference slot (see {@link createReferenceSlot}). */
    readonly slot: string;
    /** The assembler's publication(s). */
    readonly publication: string | readonly string[];
    /** Captured tables. Default: those the mappers declare (`mapperRequirements`). */
    readonly tables?: readonly (string | PostgresSourceTable)[];
  };
  readonly destination: {
    /** KurrentDB connection string. */
    readonly connectionString: string;
  };
  /** The assembler's mappers, in its order. */
  readonly mappers: readonly AnyMapper[];
  /** The assembler's name (part of every event id). */
  readonly assembler: string;
  /**
   * The source identity the assembler maps with (part of every event id). Default: the
   * PostgreSQL system identifier read from the reference slot's session — what the pipeline uses.
   */
  readonly sourceIdentity?: string;
  /**
   * Events expected before the reference's, per stream (e.g. what an initial snapshot wrote).
   * Default: none.
   */
  readonly expectedBefore?: readonly ExpectedEvent[];
  /**
   * Destination streams left out of the comparison. Default: system streams (`$…`), the
   * assembler's checkpoint stream (`event-assembler.checkpoint-<assembler>`), its snapshot
   * progress stream (`event-assembler.snapshot-<assembler>`) and the stream states it carries
   * over a stop (`event-assembler.streams-<assembler>`). The failed-records
   * stream is compared: parked records are expected only where the reference parks them too.
   */
  readonly ignoreStream?: (stream: string) => boolean;
  /** Longest wait for the reference to reach the marker. Default: 60 000 ms. */
  readonly timeoutMs?: number;
}

/** One expected event: its id, stream and type, and its data for the content comparison. */
export interface ExpectedEvent {
  readonly id: string;
  readonly stream: string;
  readonly type: string;
  readonly data: unknown;
}

/** An event named in a report. */
export interface EventRef {
  readonly stream: string;
  readonly id: string;
  readonly type: string;
}

export interface DestinationReport {
  /** True when nothing is missing, duplicated, extra, out of order or different. */
  readonly ok: boolean;
  readonly expectedEvents: number;
  /** Events read from the compared destination streams (duplicates counted each time). */
  readonly actualEvents: number;
  readonly expectedStreams: number;
  readonly actualStreams: number;
  /** Source transactions with row changes read from the reference slot. */
  readonly referenceTransactions: number;
  /** Expected per event type, and found. */
  readonly byType: Readonly<Record<string, { readonly expected: number; readonly actual: number }>>;
  /** Expected and absent from their stream. */
  readonly missing: readonly EventRef[];
  /** Present more than once (in any streams); `count` is how often. */
  readonly duplicated: readonly (EventRef & { readonly count: number })[];
  /** Present and not expected in that stream. */
  readonly extra: readonly EventRef[];
  /** Streams whose common events are in a different order than the source's. */
  readonly outOfOrder: readonly { readonly stream: string; readonly index: number; readonly expectedId: string; readonly actualId: string }[];
  /** Same id in the expected stream, different type or data. */
  readonly mismatched: readonly (EventRef & { readonly reason: string })[];
}

/**
 * Creates the reference slot (pgoutput) now. Call it right after the assembler's slot is
 * created and before any write the comparison should cover. Returns its start LSN.
 */
export async function createReferenceSlot(connection: string | pg.ClientConfig, slot: string): Promise<{ readonly slot: string; readonly lsn: string }> {
  const rows = await query<{ lsn: string }>(connection, `SELECT lsn::text AS lsn FROM pg_create_logical_replication_slot($1, 'pgoutput')`, [slot]);
  return { slot, lsn: rows[0]!.lsn };
}

/**
 * Creates the reference slot WITH an exported snapshot and maps what that snapshot holds, for a
 * destination filled by an initial snapshot (`snapshot.mode: 'initial'`): the returned
 * `expectedBefore` are the events the assembler's snapshot must have written, provided nothing
 * commits between this call and the creation of the assembler's slot (both snapshots then hold
 * exactly the same commits, and both streams start after them). Pass `generation` and
 * `assembler` as the assembler uses them: snapshot event ids come from (assembler, generation,
 * table, key, mapper, ordinal). `connection` must be allowed to create slots (REPLICATION).
 */
export async function createReferenceSlotWithSnapshot(
  connection: string,
  slot: string,
  options: { readonly mappers: readonly AnyMapper[]; readonly assembler: string; readonly generation: string; readonly tables?: readonly string[]; readonly sourceIdentity?: string },
): Promise<{ readonly slot: string; readonly lsn: string; readonly expectedBefore: ExpectedEvent[]; readonly rows: number }> {
  const exported = await createSlotWithSnapshot({ connection, slot });
  try {
    const tables = options.tables ?? Object.keys(mapperRequirements(options.mappers));
    const context: MapContext = { assembler: options.assembler, sourceIdentity: options.sourceIdentity ?? 'reference' };
    const expectedBefore: ExpectedEvent[] = [];
    let rows = 0;
    for await (const batch of readInitialSnapshot({ connection, snapshotName: exported.snapshotName, tables, snapshotGeneration: options.generation })) {
      for (const record of batch.records) {
        rows += 1;
        const result = mapUnit(options.mappers, record, context);
        for (const e of result.events) expectedBefore.push({ id: e.id, stream: e.stream, type: e.type, data: e.data });
        for (const f of result.failed) expectedBefore.push({ id: f.id, stream: f.stream, type: f.type, data: f.data });
      }
    }
    return { slot: exported.slot, lsn: exported.consistentPoint, expectedBefore, rows };
  } finally {
    await exported.close();
  }
}

/** Drops the reference slot (terminating a reader still attached). Idempotent. */
export async function dropReferenceSlot(connection: string | pg.ClientConfig, slot: string): Promise<void> {
  await query(connection, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL`, [slot]);
  const deadline = Date.now() + 10_000;
  for (;;) {
    const [row] = await query<{ active: boolean }>(connection, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, [slot]);
    if (!row) return;
    if (!row.active) {
      await query(connection, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active`, [slot]);
      continue;
    }
    if (Date.now() > deadline) throw new Error(`reference slot ${slot} is still in use after 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The expectation: every event the reference slot's history maps to, in source order. */
export async function expectedFromReference(options: VerifyDestinationOptions): Promise<{ events: ExpectedEvent[]; transactions: number }> {
  const tables =
    options.source.tables ??
    Object.entries(mapperRequirements(options.mappers)).map(([table, req]): PostgresSourceTable => ({ table, needsOldValues: req.needsOldValues }));
  const token = randomUUID();
  const timeoutMs = options.timeoutMs ?? 60_000;
  // The marker commits after everything committed before this call: reading up to it covers exactly that.
  await query(options.source.connection, `SELECT pg_logical_emit_message(true, $1, $2)`, [VERIFY_MARKER_PREFIX, token]);

  const source = createPostgresSource({
    connection: options.source.connection,
    slot: options.source.slot,
    publication: options.source.publication,
    tables,
    statusIntervalMs: 1_000,
    // The reference is never acknowledged (so a second verification sees the same history):
    // without these, backpressure would pause reading after the default 1000 transactions.
    maxInFlightTransactions: Number.MAX_SAFE_INTEGER,
    maxInFlightBytes: Number.MAX_SAFE_INTEGER,
  });
  const events: ExpectedEvent[] = [...(options.expectedBefore ?? [])];
  let transactions = 0;
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new Error(`verify-destination: the reference slot ${options.source.slot} did not reach the marker within ${timeoutMs} ms (read ${transactions} transactions)`));
      void source.close();
    }, timeoutMs);
  });
  const read = (async () => {
    let context: MapContext | null = null;
    for await (const tx of source.transactions()) {
      const changes = await readChanges(tx);
      if (changes.some((c) => c.op === 'message' && c.prefix === VERIFY_MARKER_PREFIX && c.content.toString('utf8') === token)) return;
      if (changes.some((c) => c.op === 'insert' || c.op === 'update' || c.op === 'delete' || c.op === 'truncate')) transactions += 1;
      context ??= mapContext(options, source.status().systemId);
      const result = mapUnit(options.mappers, withChanges(tx, changes), context);
      for (const e of result.events) events.push({ id: e.id, stream: e.stream, type: e.type, data: e.data });
      for (const f of result.failed) events.push({ id: f.id, stream: f.stream, type: f.type, data: f.data });
    }
    if (!timedOut) throw new Error(`verify-destination: the reference slot ${options.source.slot} ended before the marker`);
  })();
  try {
    await Promise.race([read, timeout]);
  } finally {
    clearTimeout(timer);
    await source.close();
    await read.catch(() => undefined);
  }
  return { events, transactions };
}

function mapContext(options: VerifyDestinationOptions, systemId: string | null): MapContext {
  if (options.sourceIdentity) return { assembler: options.assembler, sourceIdentity: options.sourceIdentity };
  if (!systemId) throw new Error('verify-destination: the reference session reported no system id');
  return { assembler: options.assembler, sourceIdentity: systemId };
}

/** One event read from the destination. */
export interface DestinationEvent {
  readonly id: string;
  readonly stream: string;
  readonly type: string;
  readonly data: unknown;
}

/** Every event of the destination's non-ignored streams, in `$all` order (per stream: revision order). */
export async function readDestination(connectionString: string, ignoreStream: (stream: string) => boolean): Promise<DestinationEvent[]> {
  const client = KurrentDBClient.connectionString(connectionString);
  const events: DestinationEvent[] = [];
  try {
    for await (const resolved of client.readAll({ direction: FORWARDS, fromPosition: START, resolveLinkTos: false })) {
      const event = resolved.event;
      if (!event || ignoreStream(event.streamId)) continue;
      const data = event.isJson ? event.data : Buffer.from(event.data as Uint8Array).toString('base64');
      events.push({ id: event.id, stream: event.streamId, type: event.type, data });
    }
  } finally {
    await client.dispose();
  }
  return events;
}

/** Compares the expectation with what the destination holds. Pure. */
export function compareEvents(expected: readonly ExpectedEvent[], actual: readonly DestinationEvent[], referenceTransactions = 0): DestinationReport {
  const byType: Record<string, { expected: number; actual: number }> = {};
  const typeEntry = (type: string) => (byType[type] ??= { expected: 0, actual: 0 });
  const expectedByStream = groupByStream(expected);
  const actualByStream = groupByStream(actual);
  expected.forEach((e) => typeEntry(e.type).expected++);
  actual.forEach((e) => typeEntry(e.type).actual++);

  const occurrences = new Map<string, { ref: EventRef; count: number }>();
  for (const e of actual) {
    const seen = occurrences.get(e.id);
    if (seen) seen.count++;
    else occurrences.set(e.id, { ref: { stream: e.stream, id: e.id, type: e.type }, count: 1 });
  }
  const duplicated = [...occurrences.values()].filter((o) => o.count > 1).map((o) => ({ ...o.ref, count: o.count }));

  const missing: EventRef[] = [];
  const extra: EventRef[] = [];
  const outOfOrder: DestinationReport['outOfOrder'][number][] = [];
  const mismatched: (EventRef & { reason: string })[] = [];
  for (const stream of new Set([...expectedByStream.keys(), ...actualByStream.keys()])) {
    const want = expectedByStream.get(stream) ?? [];
    const have = actualByStream.get(stream) ?? [];
    const wantById = new Map(want.map((e) => [e.id, e]));
    const haveIds = new Set(have.map((e) => e.id));
    for (const e of want) if (!haveIds.has(e.id)) missing.push({ stream, id: e.id, type: e.type });
    for (const e of have) if (!wantById.has(e.id)) extra.push({ stream, id: e.id, type: e.type });
    // Order: the common events, first occurrences only, must follow the source order.
    const seen = new Set<string>();
    const haveCommon = have.filter((e) => wantById.has(e.id) && !seen.has(e.id) && seen.add(e.id));
    const wantCommon = want.filter((e) => haveIds.has(e.id));
    const index = wantCommon.findIndex((e, i) => haveCommon[i]?.id !== e.id);
    if (index >= 0) outOfOrder.push({ stream, index, expectedId: wantCommon[index]!.id, actualId: haveCommon[index]?.id ?? '(none)' });
    for (const e of haveCommon) {
      const w = wantById.get(e.id)!;
      if (w.type !== e.type) mismatched.push({ stream, id: e.id, type: e.type, reason: `type ${e.type}, expected ${w.type}` });
      else if (stableJson(w.data) !== stableJson(e.data)) mismatched.push({ stream, id: e.id, type: e.type, reason: 'data differs from the reference mapping' });
    }
  }
  return {
    ok: missing.length + duplicated.length + extra.length + outOfOrder.length + mismatched.length === 0,
    expectedEvents: expected.length,
    actualEvents: actual.length,
    expectedStreams: expectedByStream.size,
    actualStreams: actualByStream.size,
    referenceTransactions,
    byType,
    missing,
    duplicated,
    extra,
    outOfOrder,
    mismatched,
  };
}

/**
 * Reads the reference slot up to now, maps it, reads the destination, compares. Call it after
 * the assembler has delivered everything (e.g. after a graceful stop).
 */
export async function verifyDestination(options: VerifyDestinationOptions): Promise<DestinationReport> {
  const checkpointStream = `event-assembler.checkpoint-${options.assembler}`;
  const snapshotProgressStream = `event-assembler.snapshot-${options.assembler}`;
  const stateStream = stateStreamName(options.assembler);
  const ignoreStream = options.ignoreStream ?? ((stream: string) => stream.startsWith('$') || stream === checkpointStream || stream === snapshotProgressStream || stream === stateStream);
  const { events, transactions } = await expectedFromReference(options);
  const actual = await readDestination(options.destination.connectionString, ignoreStream);
  return compareEvents(
    events.filter((e) => !ignoreStream(e.stream)),
    actual,
    transactions,
  );
}

/** A few lines for people: the verdict, the counts, and the first problems of each kind. */
export function formatDestinationReport(report: DestinationReport, options: { readonly maxListed?: number } = {}): string {
  const max = options.maxListed ?? 5;
  const lines = [
    `destination check: ${report.ok ? 'OK' : 'FAILED'} — ${report.expectedEvents} events expected from ${report.referenceTransactions} source transactions, ` +
      `${report.actualEvents} found in ${report.actualStreams} streams (${report.expectedStreams} expected)`,
    `  missing ${report.missing.length}, duplicated ${report.duplicated.length}, extra ${report.extra.length}, ` +
      `out of order ${report.outOfOrder.length} streams, different ${report.mismatched.length}`,
  ];
  const list = <T>(title: string, items: readonly T[], show: (item: T) => string) => {
    if (items.length === 0) return;
    lines.push(`  ${title}:`);
    for (const item of items.slice(0, max)) lines.push(`    ${show(item)}`);
    if (items.length > max) lines.push(`    … and ${items.length - max} more`);
  };
  if (report.expectedEvents > 0 && report.missing.length === report.expectedEvents && report.extra.length > 0) {
    lines.push('  hint: not one expected id was found, but other events were: are `assembler` and `sourceIdentity` the assembler\'s? They are part of every event id.');
  }
  list('missing', report.missing, (e) => `${e.stream} ${e.type} ${e.id}`);
  list('duplicated', report.duplicated, (e) => `${e.stream} ${e.type} ${e.id} ×${e.count}`);
  list('extra', report.extra, (e) => `${e.stream} ${e.type} ${e.id}`);
  list('out of order', report.outOfOrder, (o) => `${o.stream} at ${o.index}: expected ${o.expectedId}, found ${o.actualId}`);
  list('different', report.mismatched, (e) => `${e.stream} ${e.type} ${e.id}: ${e.reason}`);
  return lines.join('\n');
}

function groupByStream<T extends { readonly stream: string }>(events: readonly T[]): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const e of events) {
    const list = out.get(e.stream);
    if (list) list.push(e);
    else out.set(e.stream, [e]);
  }
  return out;
}

/** JSON with sorted keys, so two equal objects compare equal whatever their key order. */
function stableJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

async function query<R = unknown>(connection: string | pg.ClientConfig, sql: string, params: unknown[]): Promise<R[]> {
  const client = new pg.Client(typeof connection === 'string' ? { connectionString: connection } : connection);
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query(sql, params)).rows as R[];
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * The Prometheus metrics: one prom-client registry per assembler (never the global default one:
 * several assemblers may share a process), set from the status document right before each
 * scrape so every value of a scrape comes from the same moment. Base units (`_bytes`,
 * `_seconds`), `_total` for counters; a value that is not known (no slot reading, nothing
 * durable yet) is left out rather than shown as 0. docs/operations.md lists them all.
 *
 * Cumulative values that PostgreSQL or the pipeline keep (`pg_stat_replication_slots`, this run's
 * counts) are exposed as counters: they only grow, and a reset (a restart, or
 * `pg_stat_reset_replication_slot()`) is what `rate()`/`increase()` already handle as a counter reset.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { parseLsn } from '../source/position.js';
import type { Lsn } from '../source/types.js';
import { WAL_STATUSES } from './slot-reading.js';
import type { StatusDocument } from './types.js';

const P = 'event_assembler_';

export interface AssemblerMetrics {
  readonly registry: Registry;
  /** Sets every metric from the document (call right before reading the registry). */
  update(doc: StatusDocument): void;
  /** One append call took `seconds` (the appender's hook; retries inside the call included). */
  observeAppend(seconds: number): void;
}

type Value = number | null | undefined;

function setGauge(gauge: Gauge, value: Value, labels: Record<string, string> = {}): void {
  if (value === null || value === undefined || !Number.isFinite(value)) gauge.remove(labels);
  else gauge.set(labels, value);
}

/** A counter showing a cumulative value kept elsewhere: replaced, not incremented. */
function setCounter(counter: Counter, value: Value, labels: Record<string, string> = {}): void {
  counter.remove(labels);
  if (value !== null && value !== undefined && Number.isFinite(value)) counter.inc(labels, value);
}

const lsnNumber = (lsn: Lsn | null): number | null => (lsn === null ? null : Number(parseLsn(lsn)));

export function createAssemblerMetrics(options: { readonly mappers: readonly string[] }): AssemblerMetrics {
  const registry = new Registry();
  const registers = [registry];
  const gauge = (name: string, help: string, labelNames: readonly string[] = []): Gauge => new Gauge({ name: P + name, help, labelNames, registers });
  const counter = (name: string, help: string, labelNames: readonly string[] = []): Counter => new Counter({ name: P + name, help, labelNames, registers });

  const m = {
    retained: gauge('slot_retained_wal_bytes', 'WAL the replication slot makes PostgreSQL keep: pg_current_wal_lsn() - restart_lsn, in bytes.'),
    walStatus: gauge('slot_wal_status', "The slot's wal_status: 1 for the current one of reserved|extended|unreserved|lost, 0 for the others.", ['status']),
    safeWal: gauge('slot_safe_wal_size_bytes', "Bytes of WAL that can still be written before the slot is in danger of being lost (absent when max_slot_wal_keep_size = -1, unlimited)."),
    slotActive: gauge('slot_active', 'Whether a process is streaming the slot (1) or not (0).'),
    probeUp: gauge('slot_probe_up', 'Whether the last reading of the slot from PostgreSQL succeeded (1) or failed (0); slot metrics are absent while it fails.'),
    spillTxns: counter('slot_spill_txns_total', 'pg_stat_replication_slots.spill_txns: transactions the walsender spilled to disk while decoding.'),
    spillCount: counter('slot_spill_count_total', 'pg_stat_replication_slots.spill_count: times the walsender spilled transactions to disk.'),
    spillBytes: counter('slot_spill_bytes_total', 'pg_stat_replication_slots.spill_bytes: bytes the walsender spilled to disk.'),
    streamTxns: counter('slot_stream_txns_total', 'pg_stat_replication_slots.stream_txns: in-progress transactions streamed to the assembler.'),
    streamCount: counter('slot_stream_count_total', 'pg_stat_replication_slots.stream_count: times in-progress transactions were streamed.'),
    streamBytes: counter('slot_stream_bytes_total', 'pg_stat_replication_slots.stream_bytes: bytes streamed for in-progress transactions.'),
    decodedTxns: counter('slot_decoded_txns_total', 'pg_stat_replication_slots.total_txns: transactions decoded and sent through the slot.'),
    decodedBytes: counter('slot_decoded_bytes_total', 'pg_stat_replication_slots.total_bytes: bytes decoded and sent through the slot.'),
    lagBytes: gauge('source_lag_bytes', "WAL between the source's current position and what the slot has acknowledged (pg_current_wal_lsn() - confirmed_flush_lsn), in bytes."),
    lagSeconds: gauge('source_lag_seconds', 'Seconds the oldest received, not yet durable transaction has waited since its commit (0 when none waits).'),
    position: gauge('position_lsn', 'WAL positions as numbers: received (read from the slot), durable (end of the durable prefix), acknowledged (told to the slot).', ['stage']),
    sourceConnected: gauge('source_connected', 'Whether the replication connection is streaming (1) or not (0).'),
    reconnects: counter('source_reconnects_total', 'Replication connections lost and re-opened since start.'),
    freshness: gauge('freshness_seconds', 'Seconds since the newest durable source commit (a heartbeat on an idle database); grows while the pipeline is stuck.'),
    heartbeatsSent: counter('heartbeats_sent_total', 'Heartbeat messages written into the WAL.'),
    heartbeatFailures: counter('heartbeat_failures_total', 'Heartbeat writes that failed.'),
    heartbeatsReceived: counter('heartbeats_received_total', 'Heartbeat transactions received back through the slot.'),
    failed: counter('failed_records_total', 'Failed records parked (transactions whose mapper failed or whose event broke its contract), by mapper and kind.', ['mapper', 'kind']),
    failedLast: gauge('failed_record_last_timestamp_seconds', 'Unix time of the latest parked failed record (absent: none in this run).'),
    checkpointAge: gauge('checkpoint_age_seconds', 'Seconds since this run last recorded a durable checkpoint (absent: none yet).'),
    leader: gauge('leader', '1 while this process streams the slot (leader), 0 otherwise (standby).'),
    role: gauge('role', '1 for the current role of leader|standby, 0 for the other.', ['role']),
    ready: gauge('ready', 'Whether /readyz answers 200 (1) or 503 (0).'),
    destinationUp: gauge('destination_up', 'Whether KurrentDB accepts appends (1) or the sink is retrying through an outage (0).'),
    appendDuration: new Histogram({
      name: `${P}append_duration_seconds`,
      help: 'Duration of append calls to KurrentDB (a group of transactions), retries within the call included.',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    appendRetries: counter('append_retries_total', 'Append attempts retried after a transient destination failure.'),
    appendCalls: counter('append_calls_total', 'Append calls completed.'),
    txReceived: counter('transactions_received_total', 'Source transactions received (heartbeats excluded).'),
    txAppended: counter('transactions_appended_total', 'Source transactions whose events (or failed records) are durable.'),
    txSkipped: counter('transactions_skipped_total', 'Source transactions no mapper produced anything for (acknowledged all the same).'),
    eventsAppended: counter('events_appended_total', 'Events written to KurrentDB by this run.'),
    eventsReplaySkipped: counter('events_replay_skipped_total', 'Events found already applied (replays after a restart).'),
    snapshotRows: gauge('snapshot_rows', 'Snapshot rows read and durable so far in the current generation, by table.', ['table']),
    snapshotEstimated: gauge('snapshot_rows_estimated', 'Estimated rows of a table being snapshotted (pg_class.reltuples when it started).', ['table']),
    snapshotRate: gauge('snapshot_rows_per_second', 'Snapshot rows per second over the last 30 s of readings, by table.', ['table']),
    bufferMemory: gauge('buffer_memory_bytes', 'Estimated bytes of decoded changes the transaction buffer holds in memory.'),
    bufferSpilled: gauge('buffer_spilled_bytes', 'Bytes of large transactions in spill files on disk now.'),
    bufferSpills: counter('buffer_spilled_transactions_total', 'Transactions spilled to disk by the transaction buffer.'),
    inFlightTx: gauge('in_flight_transactions', 'Transactions received and not yet durable.'),
    inFlightBytes: gauge('in_flight_bytes', 'pgoutput bytes received and not yet acknowledged.'),
  };
  for (const mapper of options.mappers) for (const kind of ['MapperFailed', 'ContractViolation']) m.failed.inc({ mapper, kind }, 0);

  function updateSlot(doc: StatusDocument): void {
    const slot = doc.slot;
    m.probeUp.set(doc.slotError === null ? 1 : 0);
    const known = slot !== null && slot.exists;
    setGauge(m.retained, known ? slot.retainedWalBytes : null);
    for (const status of WAL_STATUSES) setGauge(m.walStatus, known ? (slot.walStatus === status ? 1 : 0) : null, { status });
    setGauge(m.safeWal, known ? slot.safeWalSizeBytes : null);
    setGauge(m.slotActive, known ? (slot.active ? 1 : 0) : null);
    const d = known ? slot.decoding : null;
    setCounter(m.spillTxns, d?.spillTxns);
    setCounter(m.spillCount, d?.spillCount);
    setCounter(m.spillBytes, d?.spillBytes);
    setCounter(m.streamTxns, d?.streamTxns);
    setCounter(m.streamCount, d?.streamCount);
    setCounter(m.streamBytes, d?.streamBytes);
    setCounter(m.decodedTxns, d?.totalTxns);
    setCounter(m.decodedBytes, d?.totalBytes);
    setGauge(m.lagBytes, doc.lag.bytes);
  }

  function updateSnapshot(doc: StatusDocument): void {
    m.snapshotRows.reset();
    m.snapshotEstimated.reset();
    m.snapshotRate.reset();
    for (const t of doc.snapshot?.tables ?? []) {
      setGauge(m.snapshotRows, t.rows, { table: t.table });
      setGauge(m.snapshotEstimated, t.estimatedRows, { table: t.table });
      setGauge(m.snapshotRate, t.rowsPerSecond, { table: t.table });
    }
  }

  function update(doc: StatusDocument): void {
    updateSlot(doc);
    updateSnapshot(doc);
    setGauge(m.lagSeconds, doc.lag.seconds);
    setGauge(m.position, lsnNumber(doc.positions.receivedLsn), { stage: 'received' });
    setGauge(m.position, lsnNumber(doc.positions.durableLsn), { stage: 'durable' });
    setGauge(m.position, lsnNumber(doc.positions.acknowledgedLsn), { stage: 'acknowledged' });
    m.sourceConnected.set(doc.source.connected ? 1 : 0);
    setCounter(m.reconnects, doc.source.reconnects);
    setGauge(m.freshness, doc.freshness.seconds);
    setCounter(m.heartbeatsSent, doc.heartbeat.sent);
    setCounter(m.heartbeatFailures, doc.heartbeat.failures);
    setCounter(m.heartbeatsReceived, doc.heartbeat.received);
    for (const [mapper, kinds] of Object.entries(doc.failed.byMapper)) for (const [kind, n] of Object.entries(kinds)) setCounter(m.failed, n, { mapper, kind });
    setGauge(m.failedLast, doc.failed.lastAt === null ? null : Date.parse(doc.failed.lastAt) / 1000);
    setGauge(m.checkpointAge, doc.checkpoint.ageSeconds);
    m.leader.set(doc.role === 'leader' ? 1 : 0);
    m.role.set({ role: 'leader' }, doc.role === 'leader' ? 1 : 0);
    m.role.set({ role: 'standby' }, doc.role === 'standby' ? 1 : 0);
    m.ready.set(doc.ready.ok ? 1 : 0);
    m.destinationUp.set(doc.destination.up ? 1 : 0);
    setCounter(m.appendRetries, doc.appends.retries);
    setCounter(m.appendCalls, doc.appends.calls);
    setCounter(m.txReceived, doc.throughput.transactionsReceived);
    setCounter(m.txAppended, doc.throughput.transactionsAppended);
    setCounter(m.txSkipped, doc.throughput.transactionsSkipped);
    setCounter(m.eventsAppended, doc.throughput.eventsAppended);
    setCounter(m.eventsReplaySkipped, doc.throughput.eventsReplaySkipped);
    setGauge(m.bufferMemory, doc.buffer.memoryBytes);
    setGauge(m.bufferSpilled, doc.buffer.spilledBytes);
    setCounter(m.bufferSpills, doc.buffer.spilledTransactions);
    setGauge(m.inFlightTx, doc.buffer.inFlightTransactions);
    setGauge(m.inFlightBytes, doc.buffer.inFlightBytes);
  }

  return {
    registry,
    update,
    observeAppend: (seconds) => m.appendDuration.observe(seconds),
  };
}

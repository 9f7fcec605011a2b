// The metrics registry and the status document, without a server: which value each metric
// shows for a given state of the pipeline and the slot, that unknown values are left out
// rather than shown as 0, readiness reasons, and snapshot rates.
import { describe, expect, it } from 'vitest';
import { createAssemblerMetrics, createRateTracker, readiness, statusDocument, type StatusDocument } from '../../src/observability/index.js';
import type { AssemblerStatus } from '../../src/pipeline/index.js';
import type { SourceStatus } from '../../src/source/index.js';
import { parseMetrics } from '../support/prometheus.js';

const NOW = Date.parse('2026-03-01T12:00:00Z');

const SOURCE: SourceStatus = {
  state: 'streaming', receivedLsn: '0/3000', durableLsn: '0/2000', inFlightTransactions: 2, inFlightBytes: 4096, openTransactions: 0, pendingMessages: 0, paused: false, reconnects: 1,
  bufferMemoryBytes: 1234, spilledBytes: 5678, spilledTransactions: 3, systemId: '7', timeline: 1, lastError: null,
};

function status(overrides: Partial<AssemblerStatus> = {}): AssemblerStatus {
  return {
    name: 'inv', state: 'running', slotHolder: null, mode: 'multi-stream', concurrentAppends: 4,
    batching: { calls: 10, unitsPerCall: 1.5, largestBatch: 3 },
    transactions: { received: 15, appended: 12, skipped: 1, inFlight: 2, sliced: 0, heartbeats: 4 },
    events: { appended: 20, replaySkipped: 2, byType: {} },
    parked: { mapperFailures: 1, contractViolations: 2 },
    failed: { byMapper: { payments: { MapperFailed: 1 }, customers: { ContractViolation: 2 } }, lastAt: '2026-03-01T11:59:00.000Z', latest: null },
    role: 'leader',
    freshness: { newestDurableCommitTime: '2026-03-01T11:59:58.000000Z', oldestPendingCommitTime: '2026-03-01T11:59:55.500000Z' },
    checkpoint: { recordedLsn: '0/2000', recordedAt: '2026-03-01T11:59:59.000Z' },
    lag: { receivedLsn: '0/3000', durableLsn: '0/2000', acknowledgedLsn: '0/1000', bytes: 8192, commitToAppendMs: 5, commitToAppendAvgMs: 5, commitToAppendPercentiles: null },
    source: SOURCE,
    sink: { mode: 'multi-stream', state: 'connected', attempts: 0, retries: 7, lastError: null, cachedStreams: 1, appendedEvents: 20, skippedEvents: 2 },
    lastError: null,
    snapshot: null,
    ...overrides,
  };
}

const SLOT = {
  at: '2026-03-01T12:00:00.000Z', slot: 'inv', exists: true, currentWalLsn: '0/5000', restartLsn: '0/1000', confirmedFlushLsn: '0/1000',
  retainedWalBytes: 16384, lagBytes: 16384, walStatus: 'extended' as const, safeWalSizeBytes: null, active: true, activePid: 42,
  decoding: { spillTxns: 1, spillCount: 2, spillBytes: 300, streamTxns: 4, streamCount: 5, streamBytes: 600, totalTxns: 70, totalBytes: 8000, statsReset: null },
};

function doc(s: AssemblerStatus = status(), slot: typeof SLOT | null = SLOT): StatusDocument {
  return statusDocument({
    status: s, probe: slot ? { reading: slot, error: null } : { reading: null, error: 'connection refused' },
    heartbeat: { intervalMs: 10_000, sent: 5, failures: 1, lastSentAt: null, lastLsn: null, lastError: null },
    maxFreshnessMs: 60_000, rates: createRateTracker(30_000), now: NOW,
  });
}

async function exposition(d: StatusDocument, mappers: string[] = ['payments', 'customers']) {
  const metrics = createAssemblerMetrics({ mappers });
  metrics.update(d);
  metrics.observeAppend(0.003);
  return parseMetrics(await metrics.registry.metrics());
}

describe('observability metrics', () => {
  it('shows the slot, positions, lag, freshness, failures, role and buffer as numbers in base units', async () => {
    const m = await exposition(doc());
    expect(m.value('event_assembler_slot_retained_wal_bytes')).toBe(16384);
    expect(['reserved', 'extended', 'unreserved', 'lost'].map((status) => m.value('event_assembler_slot_wal_status', { status }))).toEqual([0, 1, 0, 0]);
    expect(m.value('event_assembler_slot_safe_wal_size_bytes')).toBeUndefined(); // unlimited: absent, not 0
    expect(m.value('event_assembler_slot_active')).toBe(1);
    expect(m.value('event_assembler_slot_spill_bytes_total')).toBe(300);
    expect(m.value('event_assembler_slot_stream_txns_total')).toBe(4);
    expect(m.value('event_assembler_slot_decoded_bytes_total')).toBe(8000);
    expect(m.value('event_assembler_source_lag_bytes')).toBe(16384);
    expect(m.value('event_assembler_source_lag_seconds')).toBeCloseTo(4.5);
    expect(m.value('event_assembler_position_lsn', { stage: 'received' })).toBe(0x3000);
    expect(m.value('event_assembler_position_lsn', { stage: 'durable' })).toBe(0x2000);
    expect(m.value('event_assembler_position_lsn', { stage: 'acknowledged' })).toBe(0x1000);
    expect(m.value('event_assembler_freshness_seconds')).toBeCloseTo(2);
    expect(m.value('event_assembler_checkpoint_age_seconds')).toBeCloseTo(1);
    expect(m.value('event_assembler_failed_records_total', { mapper: 'payments', kind: 'MapperFailed' })).toBe(1);
    expect(m.value('event_assembler_failed_records_total', { mapper: 'payments', kind: 'ContractViolation' })).toBe(0);
    expect(m.value('event_assembler_failed_records_total', { mapper: 'customers', kind: 'ContractViolation' })).toBe(2);
    expect(m.value('event_assembler_failed_record_last_timestamp_seconds')).toBe(Date.parse('2026-03-01T11:59:00Z') / 1000);
    expect(m.value('event_assembler_leader')).toBe(1);
    expect(m.value('event_assembler_role', { role: 'standby' })).toBe(0);
    expect(m.value('event_assembler_destination_up')).toBe(1);
    expect(m.value('event_assembler_append_retries_total')).toBe(7);
    expect(m.value('event_assembler_append_duration_seconds_count')).toBe(1);
    expect(m.value('event_assembler_append_duration_seconds_bucket', { le: '0.005' })).toBe(1);
    expect(m.value('event_assembler_buffer_memory_bytes')).toBe(1234);
    expect(m.value('event_assembler_buffer_spilled_bytes')).toBe(5678);
    expect(m.value('event_assembler_buffer_spilled_transactions_total')).toBe(3);
    expect(m.value('event_assembler_heartbeats_received_total')).toBe(4);
    expect(m.value('event_assembler_transactions_received_total')).toBe(15);
    expect(m.value('event_assembler_ready')).toBe(1);
    // Every metric has help text and a type.
    for (const name of new Set(m.samples.map((s) => s.name.replace(/_(bucket|sum|count)$/, '')))) {
      expect(m.text).toMatch(new RegExp(`^# HELP ${name} \\S.*\\n# TYPE ${name} (gauge|counter|histogram)$`, 'm'));
    }
  });

  it('leaves slot metrics out (probe_up 0) when the slot cannot be read, and freshness out before anything is durable', async () => {
    const m = await exposition(doc(status({ freshness: { newestDurableCommitTime: null, oldestPendingCommitTime: null } }), null));
    expect(m.value('event_assembler_slot_probe_up')).toBe(0);
    for (const name of ['event_assembler_slot_retained_wal_bytes', 'event_assembler_slot_active', 'event_assembler_slot_spill_bytes_total', 'event_assembler_source_lag_bytes', 'event_assembler_freshness_seconds']) {
      expect(m.value(name), name).toBeUndefined();
    }
    expect(m.value('event_assembler_slot_wal_status', { status: 'reserved' })).toBeUndefined();
    expect(m.value('event_assembler_source_lag_seconds')).toBe(0); // running, nothing waits
  });

  it('shows snapshot progress per table with a rate from successive readings', async () => {
    const progress = (rows: number) => ({
      version: 1 as const, generation: 'g1', kind: 'initial' as const, mode: 'initial', slot: 'inv', consistentPoint: '0/100', reason: 'first start',
      startedAt: '2026-03-01T11:00:00Z', updatedAt: '2026-03-01T11:00:00Z',
      tables: [{ table: 'public.invoice', status: 'running' as const, lastKey: null, maxKey: null, rowsDone: rows, estimatedRows: 1000, chunksDone: 1 }],
    });
    const snapshot = (rows: number): AssemblerStatus['snapshot'] => ({ action: 'initial-snapshot', code: 'X', reason: 'r', generation: 'g1', rows, events: rows, finished: false, consistentPoint: '0/100', progress: progress(rows) });
    const rates = createRateTracker(30_000);
    const at = (s: AssemblerStatus, now: number) => statusDocument({ status: s, probe: null, heartbeat: { intervalMs: 1, sent: 0, failures: 0, lastSentAt: null, lastLsn: null, lastError: null }, maxFreshnessMs: 60_000, rates, now });
    expect(at(status({ snapshot: snapshot(100) }), NOW).snapshot!.tables[0]!.rowsPerSecond).toBeNull();
    const second = at(status({ snapshot: snapshot(300) }), NOW + 2_000);
    expect(second.snapshot!.tables[0]).toEqual({ table: 'public.invoice', status: 'running', rows: 300, estimatedRows: 1000, rowsPerSecond: 100 });
    const m = await exposition(second);
    expect(m.value('event_assembler_snapshot_rows', { table: 'public.invoice' })).toBe(300);
    expect(m.value('event_assembler_snapshot_rows_estimated', { table: 'public.invoice' })).toBe(1000);
    expect(m.value('event_assembler_snapshot_rows_per_second', { table: 'public.invoice' })).toBe(100);
  });

  it('readiness names every failing condition', () => {
    const ready = doc().ready;
    expect(ready).toEqual({ ok: true, reasons: [] });
    const stale = doc(status({ freshness: { newestDurableCommitTime: '2026-03-01T11:58:00Z', oldestPendingCommitTime: null }, sink: { ...status().sink!, state: 'retrying', lastError: { message: 'UNAVAILABLE', code: null, at: new Date(NOW) } } }));
    expect(stale.ready.ok).toBe(false);
    expect(stale.ready.reasons).toEqual(['destination retrying: UNAVAILABLE', 'freshness 120.0 s is above 60 s']);
    expect(stale.health).toEqual({ ok: true, reason: null });
    const standby = readiness({ ...doc(), role: 'standby', source: { ...doc().source, connected: false, state: 'reconnecting' } });
    expect(standby.reasons).toEqual(['not streaming the slot (standby)', 'source reconnecting']);
    const failed = doc(status({ state: 'failed' }));
    expect(failed.health.ok).toBe(false);
    expect(failed.ready.reasons[0]).toBe('state is failed, not running');
  });
});

/**
 * The signals as one document (`/status.json`), made from the pipeline's `status()`, the slot's
 * reading and the heartbeat writer's status. Pure, apart from the rate tracker's memory of past
 * readings. `/metrics`, `/healthz` and `/readyz` all read this document, so they agree.
 */
import type { AssemblerStatus } from '../pipeline/types.js';
import type { HeartbeatStatus } from './heartbeat.js';
import type { RateTracker } from './rates.js';
import { health, readiness } from './readiness.js';
import type { SlotProbeResult } from './slot-probe.js';
import type { SnapshotTableSignal, StatusDocument } from './types.js';

export interface SignalInputs {
  readonly status: AssemblerStatus;
  readonly probe: SlotProbeResult | null;
  readonly heartbeat: HeartbeatStatus;
  readonly maxFreshnessMs: number;
  readonly rates: RateTracker;
  readonly now: number;
}

/** Seconds from an ISO time to `now` (never negative: clocks of two hosts may disagree a little). */
function secondsSince(iso: string | null, now: number): number | null {
  if (iso === null) return null;
  const at = Date.parse(iso);
  return Number.isFinite(at) ? Math.max(0, (now - at) / 1000) : null;
}

function snapshotSignal(status: AssemblerStatus, rates: RateTracker, now: number): StatusDocument['snapshot'] {
  const snapshot = status.snapshot;
  if (!snapshot) return null;
  const generation = snapshot.progress?.generation ?? snapshot.generation;
  const tables: SnapshotTableSignal[] = (snapshot.progress?.tables ?? []).map((t) => ({
    table: t.table,
    status: t.status,
    rows: t.rowsDone,
    estimatedRows: t.estimatedRows,
    rowsPerSecond: rates.sample(`${generation ?? ''}/${t.table}`, t.rowsDone, now),
  }));
  return { generation, action: snapshot.action, finished: snapshot.finished, tables };
}

function failedSignal(status: AssemblerStatus): StatusDocument['failed'] {
  const total: Record<string, number> = { MapperFailed: 0, ContractViolation: 0 };
  for (const kinds of Object.values(status.failed.byMapper)) for (const [kind, n] of Object.entries(kinds)) total[kind] = (total[kind] ?? 0) + n;
  return { total, byMapper: status.failed.byMapper, lastAt: status.failed.lastAt, latest: status.failed.latest };
}

export function statusDocument(input: SignalInputs): StatusDocument {
  const { status, now } = input;
  const source = status.source;
  const sink = status.sink;
  const slot = input.probe?.reading ?? null;
  const running = status.state === 'running';
  const waitedSince = status.freshness.oldestPendingCommitTime;
  const freshness = { seconds: secondsSince(status.freshness.newestDurableCommitTime, now), maxSeconds: input.maxFreshnessMs / 1000, newestDurableCommitTime: status.freshness.newestDurableCommitTime };
  const doc: Omit<StatusDocument, 'ready'> = {
    version: 1,
    name: status.name,
    at: new Date(now).toISOString(),
    state: status.state,
    // Metrics know two roles: a process starting up does not lead (yet).
    role: status.role === 'leader' ? 'leader' : 'standby',
    health: health(status.state),
    source: { connected: source?.state === 'streaming', state: source?.state ?? null, reconnects: source?.reconnects ?? 0, paused: source?.paused ?? false, lastError: source?.lastError?.message ?? null },
    destination: {
      // A custom sink (deps.sink) reports no state: it is up while the pipeline runs.
      up: sink ? sink.state === 'connected' : running,
      state: sink?.state ?? null,
      mode: status.mode,
      retries: sink?.retries ?? 0,
      lastError: sink?.lastError?.message ?? null,
    },
    positions: { receivedLsn: status.lag.receivedLsn, durableLsn: status.lag.durableLsn, acknowledgedLsn: status.lag.acknowledgedLsn },
    slot,
    slotError: input.probe?.error ?? null,
    lag: { bytes: slot?.lagBytes ?? null, seconds: waitedSince !== null ? secondsSince(waitedSince, now) : running ? 0 : null },
    freshness,
    heartbeat: { ...input.heartbeat, received: status.transactions.heartbeats },
    checkpoint: { recordedLsn: status.checkpoint.recordedLsn, recordedAt: status.checkpoint.recordedAt, ageSeconds: secondsSince(status.checkpoint.recordedAt, now) },
    throughput: {
      transactionsReceived: status.transactions.received,
      transactionsAppended: status.transactions.appended,
      transactionsSkipped: status.transactions.skipped,
      eventsAppended: status.events.appended,
      eventsReplaySkipped: status.events.replaySkipped,
    },
    failed: failedSignal(status),
    snapshot: snapshotSignal(status, input.rates, now),
    buffer: {
      memoryBytes: source?.bufferMemoryBytes ?? 0,
      spilledBytes: source?.spilledBytes ?? 0,
      spilledTransactions: source?.spilledTransactions ?? 0,
      inFlightTransactions: status.transactions.inFlight,
      inFlightBytes: source?.inFlightBytes ?? 0,
    },
    appends: { calls: status.batching.calls, unitsPerCall: status.batching.unitsPerCall, retries: sink?.retries ?? 0 },
  };
  return { ...doc, ready: readiness(doc) };
}

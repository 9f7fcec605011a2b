/**
 * What the run shows: `status()` while it runs and the summary when it ends, assembled from the
 * steps' own state (counters, lag, checkpoints, sinks, source, snapshots). Pure: reads only.
 */
import type { KurrentDBSink, Sink, SinkMode, SinkStatus } from '../sink/index.js';
import type { SlotHolder, SourceStatus } from '../source/index.js';
import { lsnDistance } from '../source/position.js';
import type { Lsn } from '../source/types.js';
import type { Appender } from './appender.js';
import { errorInfo } from './run-control.js';
import type { RunStats } from './run-stats.js';
import { snapshotSummary, type SnapshotState } from './snapshot-state.js';
import type { AssemblerRole, AssemblerState, AssemblerStatus, RunSummary } from './types.js';

/** The appender's sink and the checkpoint writer as one: retrying when either is. */
export function aggregateSinkStatus(sinks: readonly (Sink | null)[]): SinkStatus | null {
  const all = sinks
    .filter((sink): sink is KurrentDBSink => sink !== null && typeof (sink as Partial<KurrentDBSink>).status === 'function')
    .map((sink) => sink.status());
  if (all.length === 0) return null;
  const lastError = all.map((s) => s.lastError).filter((e) => e !== null).sort((a, b) => b.at.getTime() - a.at.getTime())[0] ?? null;
  const sum = (pick: (s: SinkStatus) => number | undefined): number => all.reduce((n, s) => n + (pick(s) ?? 0), 0);
  return {
    mode: all[0]!.mode,
    state: all.some((s) => s.state === 'retrying') ? 'retrying' : all.every((s) => s.state === 'closed') ? 'closed' : 'connected',
    attempts: Math.max(...all.map((s) => s.attempts)),
    retries: sum((s) => s.retries),
    lastError,
    cachedStreams: sum((s) => s.cachedStreams),
    appendedEvents: sum((s) => s.appendedEvents),
    skippedEvents: sum((s) => s.skippedEvents),
    tailReads: sum((s) => s.tailReads),
    logHeadReads: sum((s) => s.logHeadReads),
    ...(all.some((s) => s.prefetchHits !== undefined) ? { prefetchHits: sum((s) => s.prefetchHits) } : {}),
    ...(all.some((s) => s.framedTailReads !== undefined) ? { framedTailReads: sum((s) => s.framedTailReads) } : {}),
    ...(all.some((s) => s.framedAppends !== undefined) ? { framedAppends: sum((s) => s.framedAppends) } : {}),
    // The appender's sink decides first touches (the checkpoint writer touches one stream).
    ...(all[0]!.firstTouch ? { firstTouch: all[0]!.firstTouch } : {}),
    splitCalls: sum((s) => s.splitCalls),
  };
}

export function batchingStatus(appender: Appender | null): AssemblerStatus['batching'] {
  const stats = appender?.stats ?? { calls: 0, units: 0, largestBatch: 0 };
  return { calls: stats.calls, unitsPerCall: stats.calls > 0 ? Math.round((stats.units / stats.calls) * 10) / 10 : null, largestBatch: stats.largestBatch };
}

export function runSummary(reason: RunSummary['reason'], run: { stats: RunStats; acknowledgedLsn: Lsn | null; mode: SinkMode | null; startedAt: number; snapshots: SnapshotState }): RunSummary {
  const { counts, byType } = run.stats;
  return {
    reason,
    transactions: { received: counts.received, appended: counts.appended, skipped: counts.skipped, parked: counts.parkedTx },
    events: { appended: counts.eventsAppended, replaySkipped: counts.replaySkipped, byType: { ...byType } },
    parked: { mapperFailures: counts.mapperFailures, contractViolations: counts.contractViolations },
    acknowledgedLsn: run.acknowledgedLsn,
    mode: run.mode,
    durationMs: Date.now() - run.startedAt,
    snapshot: snapshotSummary(run.snapshots),
  };
}

export interface StatusInputs {
  readonly name: string;
  readonly state: AssemblerState;
  readonly role: AssemblerRole;
  readonly slotHolder: SlotHolder | null;
  readonly mode: SinkMode | null;
  readonly concurrentAppends: number;
  readonly appender: Appender | null;
  readonly stats: RunStats;
  readonly inFlight: number;
  readonly receivedLsn: Lsn | null;
  readonly durableLsn: Lsn | null;
  readonly acknowledgedLsn: Lsn | null;
  readonly source: SourceStatus | null;
  readonly sinks: readonly (Sink | null)[];
  readonly fatal: unknown;
  readonly snapshots: SnapshotState;
  readonly newestDurableCommitTime: string | null;
  readonly oldestPendingCommitTime: string | null;
  readonly recordedLsn: Lsn | null;
  readonly recordedAt: number | null;
}

function failedStatus(stats: RunStats): AssemblerStatus['failed'] {
  const { byMapper, lastAt, latest } = stats.failed;
  const copy: Record<string, Record<string, number>> = {};
  for (const [mapper, kinds] of Object.entries(byMapper)) copy[mapper] = { ...kinds };
  return { byMapper: copy, lastAt: lastAt === null ? null : new Date(lastAt).toISOString(), latest };
}

export function assemblerStatus(input: StatusInputs): AssemblerStatus {
  const { counts, byType } = input.stats;
  const s = input.source;
  const received = s?.receivedLsn ?? input.receivedLsn;
  let bytes: number | null = null;
  try {
    if (received && input.acknowledgedLsn) bytes = Math.max(0, lsnDistance(input.acknowledgedLsn, received));
  } catch {
    bytes = null;
  }
  const lag = input.stats.lag();
  const summary = snapshotSummary(input.snapshots);
  return {
    name: input.name,
    state: input.state,
    role: input.role,
    slotHolder: input.slotHolder ? { pid: input.slotHolder.pid, client: input.slotHolder.client, applicationName: input.slotHolder.applicationName } : null,
    mode: input.mode,
    concurrentAppends: input.concurrentAppends,
    batching: batchingStatus(input.appender),
    transactions: { received: counts.received, appended: counts.appended, skipped: counts.skipped, inFlight: input.inFlight, sliced: counts.sliced, heartbeats: input.stats.heartbeats },
    events: { appended: counts.eventsAppended, replaySkipped: counts.replaySkipped, byType: { ...byType } },
    parked: { mapperFailures: counts.mapperFailures, contractViolations: counts.contractViolations },
    failed: failedStatus(input.stats),
    freshness: { newestDurableCommitTime: input.newestDurableCommitTime, oldestPendingCommitTime: input.oldestPendingCommitTime },
    checkpoint: { recordedLsn: input.recordedLsn, recordedAt: input.recordedAt === null ? null : new Date(input.recordedAt).toISOString() },
    lag: {
      receivedLsn: received ?? null,
      durableLsn: input.durableLsn,
      acknowledgedLsn: input.acknowledgedLsn,
      bytes,
      commitToAppendMs: lag.lastMs,
      commitToAppendAvgMs: lag.avgMs,
      commitToAppendPercentiles: lag.percentiles,
    },
    source: s,
    sink: aggregateSinkStatus(input.sinks),
    lastError: input.fatal ? errorInfo(input.fatal) : s?.lastError ? errorInfo(s.lastError) : null,
    snapshot: summary ? { ...summary, progress: input.snapshots.progress } : null,
  };
}

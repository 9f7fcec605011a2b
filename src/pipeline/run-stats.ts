/**
 * What a run counts: transactions and events by outcome, parked records, and the commit → durable
 * lag (last, average, and percentiles over a window). The steps move the counters; `status()`
 * and the run summary read them.
 */
import type { UnitCounts } from './large-units.js';
import type { FailedRecordSummary } from './types.js';

export interface RunCounts extends UnitCounts {
  received: number;
  appended: number;
  skipped: number;
}

export interface LagPercentiles {
  readonly samples: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** Failed records parked by this run, by mapper and kind, and when the latest was parked. */
export interface FailedRecordCounts {
  /** mapper → kind (`MapperFailed` | `ContractViolation`) → records. */
  readonly byMapper: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** Epoch milliseconds of the latest parked record (`null`: none yet). */
  readonly lastAt: number | null;
  /** The latest parked record's diagnosis, for people (`null`: none yet). */
  readonly latest: FailedRecordSummary | null;
}


export interface RunStats {
  readonly counts: RunCounts;
  /** Durable events (written or found applied) by type. */
  readonly byType: Record<string, number>;
  /** Heartbeat transactions received (they carry no changes; not counted in `counts.received`). */
  heartbeats: number;
  /** A failed record (`kind`: its event type) of `mapper` was parked. Off the hot path: failures only. */
  recordFailed(kind: string, mapper: string, summary?: FailedRecordSummary): void;
  readonly failed: FailedRecordCounts;
  /** A transaction committed at `commitTime` (ISO) is durable now. */
  recordLag(commitTime: string): void;
  lag(): { readonly lastMs: number | null; readonly avgMs: number | null; readonly percentiles: LagPercentiles | null };
}

/** Commit → durable samples kept for the percentiles. */
export const LAG_WINDOW = 10_000;

export function createRunStats(): RunStats {
  const counts: RunCounts = { received: 0, appended: 0, skipped: 0, parkedTx: 0, sliced: 0, eventsAppended: 0, replaySkipped: 0, mapperFailures: 0, contractViolations: 0 };
  const window = createLagWindow(LAG_WINDOW);
  let last: number | null = null;
  let sum = 0;
  let n = 0;
  const byMapper: Record<string, Record<string, number>> = {};
  let lastFailedAt: number | null = null;
  let latest: FailedRecordSummary | null = null;
  return {
    counts,
    byType: {},
    heartbeats: 0,
    recordFailed(kind, mapper, summary) {
      if (summary) latest = summary;
      const kinds = (byMapper[mapper] ??= {});
      kinds[kind] = (kinds[kind] ?? 0) + 1;
      lastFailedAt = Date.now();
    },
    get failed() {
      return { byMapper, lastAt: lastFailedAt, latest };
    },
    recordLag(commitTime) {
      const commitMs = Date.parse(commitTime);
      if (!Number.isFinite(commitMs)) return;
      last = Math.max(0, Date.now() - commitMs);
      sum += last;
      n += 1;
      window.add(last);
    },
    lag() {
      return { lastMs: last, avgMs: n > 0 ? Math.round(sum / n) : null, percentiles: window.percentiles() };
    },
  };
}

/** The last `size` commit → append samples (a ring), with percentiles computed on demand. */
export function createLagWindow(size: number, now: () => number = Date.now) {
  const samples: number[] = [];
  let next = 0;
  // status() may be polled often: sort at most every 250 ms (and only when samples came in).
  let cached: LagPercentiles | null = null;
  let cachedAt = 0;
  let fresh = false;
  return {
    add(ms: number): void {
      fresh = true;
      if (samples.length < size) samples.push(ms);
      else {
        samples[next] = ms;
        next = (next + 1) % size;
      }
    },
    percentiles(): LagPercentiles | null {
      if (samples.length === 0) return null;
      const at = now();
      if (cached && (!fresh || at - cachedAt < 250)) return cached;
      fresh = false;
      cachedAt = at;
      // A typed array sorts numerically without a comparator: ~10× faster than Array#sort with one.
      const sorted = Float64Array.from(samples).sort();
      const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
      cached = { samples: sorted.length, p50Ms: Math.round(q(0.5)), p99Ms: Math.round(q(0.99)), maxMs: Math.round(sorted[sorted.length - 1]!) };
      return cached;
    },
  };
}

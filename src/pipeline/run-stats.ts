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
      const commitMs = parseCommitTime(commitTime);
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

/** The UTC day of the last commit time parsed: its `YYYY-MM-DDT` and its first millisecond. */
let dayPrefix = '';
let dayStartMs = Number.NaN;

/** The decimal digit of `text` at `i` (NaN when not a digit). */
function digit(text: string, i: number): number {
  const d = text.charCodeAt(i) - 48;
  return d >= 0 && d <= 9 ? d : Number.NaN;
}

/**
 * Epoch milliseconds of a commit time as the decoder writes it (`YYYY-MM-DDTHH:MM:SS.ffffffZ`):
 * the time of day from its digits, the day from the last one parsed — `Date.parse` per durable
 * transaction was 1.6 % of the streaming line's main thread (a CPU profile, 2026-12-07). Any
 * other form (another day, `infinity`) goes through `Date.parse`.
 */
export function parseCommitTime(text: string): number {
  if (dayPrefix.length === 11 && text.length === 27 && text.startsWith(dayPrefix) && text.charCodeAt(13) === 58 && text.charCodeAt(16) === 58 && text.charCodeAt(19) === 46 && text.charCodeAt(26) === 90) {
    const hours = digit(text, 11) * 10 + digit(text, 12);
    const minutes = digit(text, 14) * 10 + digit(text, 15);
    const seconds = digit(text, 17) * 10 + digit(text, 18);
    const millis = digit(text, 20) * 100 + digit(text, 21) * 10 + digit(text, 22);
    // Checked, not used: Date.parse gives whole milliseconds.
    const micros = digit(text, 23) + digit(text, 24) + digit(text, 25);
    const ms = ((hours * 60 + minutes) * 60 + seconds) * 1000 + millis;
    if (hours < 24 && minutes < 60 && seconds < 60 && Number.isFinite(ms + micros)) return dayStartMs + ms;
  }
  const parsed = Date.parse(text);
  if (Number.isFinite(parsed) && text.length === 27 && text.charCodeAt(10) === 84) {
    dayPrefix = text.slice(0, 11);
    dayStartMs = Date.parse(`${dayPrefix}00:00:00Z`);
  }
  return parsed;
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

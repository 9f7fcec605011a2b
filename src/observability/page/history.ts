// The status page's memory: selected metrics sampled from the registry at a fixed interval and
// kept for an hour, so the page opened now still plots the last hour (served as /history.json).
import type { Registry } from 'prom-client';

/** The series the page plots, by metric name; labelled series are summed. */
export const HISTORY_METRICS = [
  'event_assembler_slot_retained_wal_bytes',
  'event_assembler_source_lag_bytes',
  'event_assembler_freshness_seconds',
  'event_assembler_transactions_appended_total',
  'event_assembler_events_appended_total',
] as const;

export interface HistorySnapshot {
  readonly intervalMs: number;
  /** Sample times, milliseconds since the epoch. */
  readonly times: readonly number[];
  /** Per metric, one value per time (`null`: the metric had no value then). */
  readonly series: Readonly<Record<string, readonly (number | null)[]>>;
}

export interface MetricsHistory {
  snapshot(): HistorySnapshot;
  /** Takes one sample now (the timer does it every `intervalMs`). */
  sample(): Promise<void>;
  close(): void;
}

/** Sums a metric's values from the registry (all label sets; for a histogram, nothing). */
async function valueOf(registry: Registry, name: string): Promise<number | null> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return null;
  const { values } = await metric.get();
  if (values.length === 0) return null;
  let sum = 0;
  for (const v of values) sum += Number(v.value);
  return Number.isFinite(sum) ? sum : null;
}

/** Samples `metrics` every `intervalMs`, keeping `keepMs` of history (default: an hour at 5 s). */
export function createMetricsHistory(
  registry: Registry,
  options: { intervalMs?: number; keepMs?: number; metrics?: readonly string[]; refresh?: () => Promise<void> } = {},
): MetricsHistory {
  const intervalMs = options.intervalMs ?? 5_000;
  const keep = Math.max(1, Math.ceil((options.keepMs ?? 3_600_000) / intervalMs));
  const metrics = options.metrics ?? HISTORY_METRICS;
  const times: number[] = [];
  const series: Record<string, (number | null)[]> = Object.fromEntries(metrics.map((m) => [m, []]));
  const sample = async () => {
    // The registry is set from the status document right before it is read (metrics.ts).
    await options.refresh?.().catch(() => undefined);
    const values = await Promise.all(metrics.map((m) => valueOf(registry, m).catch(() => null)));
    times.push(Date.now());
    metrics.forEach((m, i) => series[m]!.push(values[i]!));
    if (times.length > keep) {
      times.shift();
      for (const m of metrics) series[m]!.shift();
    }
  };
  const timer = setInterval(() => void sample(), intervalMs);
  timer.unref();
  return {
    snapshot: () => ({ intervalMs, times: [...times], series: Object.fromEntries(metrics.map((m) => [m, [...series[m]!]])) }),
    sample,
    close: () => clearInterval(timer),
  };
}

// This process's garbage collections over one bench run, by kind: the minor ones (scavenges) and
// the major ones (mark-compacts), with their pause time. A run can settle into a slow GC mode for
// its whole length — for a 550,000-row initial snapshot 55 mark-compacts over the run instead of 7–8
// as this watch counts them (41–63 instead of 10–14 in the whole process's `--trace-gc`), a quarter
// more CPU per row (bench/results/2026-12-07-passing-share.md) — and one such run decides a
// three-pair A/B on its own. Printed with each run so that such runs can be named.
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

export interface RunGc {
  readonly scavenges: number;
  readonly scavengeMs: number;
  readonly markCompacts: number;
  readonly markCompactMs: number;
}

export interface GcWatch {
  /** Stops watching; what was collected since the watch began. */
  stop(): RunGc;
}

export function watchGc(): GcWatch {
  const counts = { scavenges: 0, scavengeMs: 0, markCompacts: 0, markCompactMs: 0 };
  const count = (entries: readonly PerformanceEntry[]): void => {
    for (const entry of entries) {
      const kind = (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind;
      if (kind === constants.NODE_PERFORMANCE_GC_MINOR) {
        counts.scavenges += 1;
        counts.scavengeMs += entry.duration;
      } else if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        counts.markCompacts += 1;
        counts.markCompactMs += entry.duration;
      }
    }
  };
  const observer = new PerformanceObserver((list) => count(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return {
    stop() {
      count(observer.takeRecords());
      observer.disconnect();
      return { ...counts };
    },
  };
}

/** `scavenges 245 (1.24 s), mark-compacts 11 (0.11 s)`. */
export function describeGc(gc: RunGc): string {
  return `scavenges ${gc.scavenges} (${(gc.scavengeMs / 1000).toFixed(2)} s), mark-compacts ${gc.markCompacts} (${(gc.markCompactMs / 1000).toFixed(2)} s)`;
}

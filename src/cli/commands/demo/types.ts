// The demo's options, what it writes to and what it returns: the types its files share.
import type { DemoReconciliation } from './reconcile-check.js';
import type { RunSummary } from '../../../pipeline/index.js';
import type { DestinationReport } from '../../../testing/verify-destination.js';
import type { WorkloadCounts } from './example.js';

export interface DemoOptions {
  /** Seconds of live workload. Default: 10. */
  readonly duration: number;
  /** Workload transactions per second, or `unlimited`. Default: 200. */
  readonly rate: number | 'unlimited';
  /** Workload connections. Default: 2. */
  readonly concurrency: number;
  /** Workload PRNG seed. Default: 1. */
  readonly seed: number;
  /** Customers written before the live workload (with their invoices). Default: 200. */
  readonly customers: number;
  /** Administrator connection to an existing database (wal_level=logical). Default: an embedded PostgreSQL 17. */
  readonly source?: string;
  /** An existing KurrentDB. Default: the in-memory KurrentDB. */
  readonly kurrentdb?: string;
  /** Leave the servers running after the summary, until Ctrl-C. */
  readonly keep: boolean;
  /** Also print the assembler's info logs. */
  readonly verbose: boolean;
}

export interface DemoIo {
  /** Writes text as is (lines end with "\n"). */
  write(text: string): void;
  /** One line redrawn in place for progress (else plain lines every few seconds). */
  readonly isTTY: boolean;
  /** Aborted on Ctrl-C: the demo stops what runs and cleans up. */
  readonly signal: AbortSignal;
}

export interface DemoResult {
  /** True when the destination check holds and no sensitive value reached the destination. */
  readonly ok: boolean;
  readonly report: DestinationReport;
  readonly summary: RunSummary;
  readonly workload: WorkloadCounts;
  /** The live workload (after seeding): transactions committed and wall time. */
  readonly live: LiveWorkload;
  readonly latency: LatencySummary | null;
  readonly sensitive: { readonly checkedValues: number; readonly found: number };
  /** The example's projections, run after the assembler and checked against the source tables. */
  readonly projections: ProjectionsReport;
  /** `event-assembler reconcile`'s comparison, made while the assembler ran. */
  readonly reconciliation: DemoReconciliation;
}

/** One projection table against what the source tables say it must hold. */
export interface ProjectionComparison {
  /** Rows in the projection's table. */
  readonly rows: number;
  /** Source rows (invoices, customers with invoices) compared. */
  readonly checked: number;
  readonly missing: number;
  readonly extra: number;
  readonly different: number;
  /** Up to 3 keys that are missing, extra or different. */
  readonly samples: readonly string[];
}

export interface ProjectionsReport {
  /** `null` when the projections failed before the check. */
  readonly invoices: ProjectionComparison | null;
  readonly customers: ProjectionComparison | null;
  /** From the runners' start until both had applied the last invoice event. */
  readonly seconds: number;
  /** Caught up, and every balance agrees with the source. */
  readonly ok: boolean;
  /** Why the projections did not run to the check. */
  readonly error: string | null;
}

export interface LiveWorkload {
  readonly transactions: number;
  readonly seconds: number;
}

export interface LatencySummary {
  readonly transactions: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** Writes one line. */
export type Say = (line: string) => void;

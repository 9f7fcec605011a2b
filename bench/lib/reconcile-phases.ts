/**
 * Where reconcile's time goes: one run in this process (production build), its phases timed by
 * the progress callback. The cut (slot, marker, describe, checkpoint wait) ends at the first
 * progress of either read; both reads run at the same time; the comparison follows; what is left
 * is removing the spill files and closing.
 */
import { createInvoiceReconciler } from '../../examples/invoicing/index.js';
import { reconcile } from './subject.js';

export interface Phases {
  readonly totalSeconds: number;
  readonly cutSeconds: number;
  readonly waitedSeconds: number;
  readonly destinationSeconds: number;
  readonly sourceSeconds: number;
  readonly compareSeconds: number;
  readonly restSeconds: number;
  readonly ranges: number;
  readonly lines: readonly string[];
}

export async function measurePhases(options: { assembler: string; captureUrl: string; publication: string; kurrentdb: string; rangeSize?: number }): Promise<Phases> {
  const started = performance.now();
  const at = () => (performance.now() - started) / 1000;
  let readsFrom = 0;
  let destinationDone = 0;
  let sourceDone = 0;
  let compareDone = 0;
  const report = await reconcile({
    assembler: options.assembler,
    source: { connection: options.captureUrl, publications: [options.publication] },
    destination: { connectionString: options.kurrentdb },
    reconcilers: [createInvoiceReconciler()],
    ...(options.rangeSize ? { rangeSize: options.rangeSize } : {}),
    onProgress(p) {
      if ((p.phase === 'destination' || p.phase === 'source') && readsFrom === 0) readsFrom = at();
      if (p.phase === 'destination') destinationDone = at();
      if (p.phase === 'source') sourceDone = at();
      if (p.phase === 'compare') compareDone = at();
    },
  });
  if (!report.ok) throw new Error(`the phases' reconcile found differences: ${JSON.stringify(report.summaries)}`);
  const totalSeconds = at();
  const readsDone = Math.max(destinationDone, sourceDone);
  const phases = {
    totalSeconds,
    cutSeconds: readsFrom,
    waitedSeconds: report.cut.waitedMs / 1000,
    destinationSeconds: destinationDone - readsFrom,
    sourceSeconds: sourceDone - readsFrom,
    compareSeconds: compareDone - readsDone,
    restSeconds: totalSeconds - compareDone,
    ranges: report.ranges.total,
  };
  const s = (n: number) => `${n.toFixed(2)} s`;
  return {
    ...phases,
    lines: [
      `total ${s(totalSeconds)}`,
      `cut ${s(phases.cutSeconds)} (of which checkpoint wait ${s(phases.waitedSeconds)})`,
      `destination read + spill ${s(phases.destinationSeconds)}`,
      `source COPY + spill ${s(phases.sourceSeconds)} (at the same time)`,
      `compare ${s(phases.compareSeconds)} (${phases.ranges} ranges)`,
      `spill removal and close ${s(phases.restSeconds)}`,
    ],
  };
}

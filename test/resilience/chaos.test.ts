// The chaos run at the scale of `npm test` (CHAOS_SCALE, default 1; CHAOS_SEED repeats a run).
// What it does: chaos-run.ts. The large run: `npm run chaos` (chaos-main.ts, default scale 10),
// figures in docs/reliability.md.
import { describe, expect, it } from 'vitest';
import { runChaos } from './chaos-run.js';

const SCALE = Number(process.env.CHAOS_SCALE ?? 1);
const SEED = Number(process.env.CHAOS_SEED ?? Date.now() % 2_147_483_647);

describe('the chaos run', () => {
  it(`kills, PostgreSQL restarts, KurrentDB outages and slow appends under a live workload and an initial snapshot: every event exactly once, in order (scale ${SCALE})`, { timeout: 600_000 * SCALE }, async () => {
    const result = await runChaos({ scale: SCALE, seed: SEED });
    const { report, tally, selfCheck, beginnings } = result;

    expect(report.ok, result.summary).toBe(true);
    expect([report.missing.length, report.duplicated.length, report.extra.length, report.outOfOrder.length, report.mismatched.length]).toEqual([0, 0, 0, 0, 0]);
    expect(report.actualEvents).toBe(report.expectedEvents);
    expect(report.byType['InvoiceImported']).toEqual({ expected: result.seeded.invoices, actual: result.seeded.invoices });
    // Entity streams begin at their beginning, though invoices were written throughout the
    // interrupted snapshot: each seeded invoice's stream begins with its one InvoiceImported, and
    // no InvoiceImported follows another event anywhere.
    expect(beginnings.seeded).toBe(result.seeded.invoices);
    expect([beginnings.beginWithImport, beginnings.exactlyOneImport]).toEqual([result.seeded.invoices, result.seeded.invoices]);
    expect([beginnings.badBeginning, beginnings.importAfterOther, beginnings.importOfUnseeded, beginnings.withoutStream]).toEqual([[], [], [], []]);
    expect(beginnings.changedAfterImport).toBeGreaterThan(0);
    // Every import accounted for: by the exported snapshot, by a resumed chunk, or from the
    // before-image of a first change the resumed snapshot met before reading the row.
    const { origins } = result;
    expect(origins.unknown).toBe(0);
    expect(origins.exportedSnapshot + origins.resumedChunk + origins.beforeImage).toBe(result.seeded.invoices);
    expect(origins.exportedSnapshot).toBeGreaterThan(0);
    if (result.killedWhileReadingInvoices) {
      // The SIGKILL cut the invoice table's reading: the resumed snapshot read the rest in chunks,
      // and met first changes of rows it had not read yet (their records from before-images).
      expect(origins.resumedChunk, JSON.stringify(origins)).toBeGreaterThan(0);
      expect(origins.beforeImage, JSON.stringify(origins)).toBeGreaterThan(0);
    }
    // Every fault happened: a kill and a PostgreSQL restart mid-snapshot, and per round of the
    // schedule two kills, a fast and an immediate restart, an outage and a slow period.
    expect(tally.midSnapshotKills).toBeGreaterThanOrEqual(1);
    expect(tally.pgMidSnapshot).toBeGreaterThanOrEqual(1);
    expect(tally.kills).toBe(1 + 2 * SCALE);
    expect(tally.pgFast + tally.pgImmediate).toBe(1 + 2 * SCALE);
    expect([Math.min(tally.pgFast, tally.pgImmediate), tally.outages, tally.slowPeriods]).toEqual([SCALE, SCALE, SCALE]);
    // Every PostgreSQL restart was noticed by the running assembler (its log) and lived through (same process).
    expect(tally.pgNoticed).toBe(tally.pgFast + tally.pgImmediate);
    // The workload went through the restarts: its transactions were cut and written again.
    expect(result.history.stats.retries).toBeGreaterThan(0);

    // The comparison fails on a doctored destination: one event removed, one duplicated, two swapped.
    expect(selfCheck.removed.ok).toBe(false);
    expect(selfCheck.removed.missing).toHaveLength(1);
    expect(selfCheck.duplicated.duplicated).toHaveLength(1);
    expect(selfCheck.swapped.outOfOrder).toHaveLength(1);
    expect(selfCheck.importMoved.ok).toBe(false);
    expect(selfCheck.importMoved.importAfterOther).toHaveLength(1);
    expect(selfCheck.importMoved.badBeginning).toHaveLength(1);
  });
});

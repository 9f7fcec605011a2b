/**
 * The machine's speed right now: the time of one fixed piece of CPU work on this thread (JSON
 * and SHA-1 over 40,000 small invoices, the kind of work the assembler does), the best of six rounds (the first
 * ones warm the compiler and the young generation up; ≈ 0.6 s in all).
 *
 * Why: on this project's VM the same build's figures move by a third between runs minutes apart,
 * with the load average below 0.5 every time — the in-memory server's CPU per row, the same work
 * in every run, went from 16 to 24 µs within an hour (bench/results/2026-12-07-framed-saves.md).
 * A quiet load says nothing is running beside the bench, not how fast the machine runs; this
 * figure, printed next to the results, tells a slow machine from a slow build. Larger is slower.
 */
import { createHash } from 'node:crypto';

const ITEMS = 40_000;

function work(): number {
  let n = 0;
  for (let i = 0; i < ITEMS; i++) {
    const text = JSON.stringify({ id: `inv_${i}`, customer: `cus_${i % 997}`, lines: [i, i + 1, i + 2], issuedAt: '2026-12-07T03:04:05.123456Z' });
    n += (JSON.parse(text) as { lines: number[] }).lines.length;
    n += createHash('sha1').update(text).digest('hex').length;
  }
  return n;
}

/** Milliseconds of the fixed task, the best of six rounds (the least disturbed, once warm). */
export function yardstickMs(): number {
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 6; round++) {
    const started = performance.now();
    if (work() <= 0) throw new Error('yardstick: the task did no work');
    best = Math.min(best, performance.now() - started);
  }
  return best;
}

/** `yardstick 123 ms` for a log line or a report. */
export function yardstickText(): string {
  return `yardstick ${yardstickMs().toFixed(0)} ms`;
}

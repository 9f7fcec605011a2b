/**
 * CPU milliseconds of a fixed workload (integer arithmetic in one thread, no allocation, so the
 * garbage collector's state does not enter), taken at a bench's start and end: whether the core
 * itself ran slower during a run (frequency, steal). On 2026-12-08 it stayed within 142–155 ms over
 * runs whose CPU per transaction ranged 30–38 µs: those slow runs were not slower arithmetic
 * (bench/results/2026-12-08-in-flight-objects.md).
 */
export function machinePaceMs(): number {
  // The first pass compiles the workload (its CPU would be the compiler's, not the machine's pace).
  if (!warm) {
    workload();
    warm = true;
  }
  const before = process.cpuUsage();
  // Kept, so the loop's result is used and the work cannot be dropped as dead code.
  lastSum = workload();
  const used = process.cpuUsage(before);
  return Math.round((used.user + used.system) / 1000);
}

let warm = false;
/** The workload's last result (read by nothing; see above). */
export let lastSum = 0;

function workload(): number {
  // xorshift32, 100 million steps.
  let x = 2_463_534_242;
  let sum = 0;
  for (let i = 0; i < 100_000_000; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    sum = (sum + (x & 0xff)) | 0;
  }
  return sum;
}

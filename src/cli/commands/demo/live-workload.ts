// The live workload while the assembler streams, then the wait until everything it committed
// is durable in the destination (a logical message marks the end of the workload in the WAL).
import { compareLsn } from '../../../source/position.js';
import type { RunningAssembler } from './assembler.js';
import { withClient } from './connections.js';
import type { Workload } from './example.js';
import type { Progress } from './progress.js';
import type { DemoIo, DemoOptions, LiveWorkload } from './types.js';
import { throwIfInterrupted, waitFor } from './wait.js';

const DEMO_MARKER_PREFIX = 'event-assembler.demo';

export async function runLiveWorkload(options: DemoOptions, admin: string, workload: Workload, line: RunningAssembler, progress: Progress, io: DemoIo): Promise<LiveWorkload> {
  const { assembler } = line;
  progress.start(() => workload.counts().transactions, () => assembler.status());
  try {
    const rate = options.rate === 'unlimited' ? 'unlimited' : `${options.rate} tx/s`;
    progress.say(`workload: ${options.duration} s at ${rate} over ${options.concurrency} connections (seed ${options.seed})`);
    const liveStarted = performance.now();
    const before = workload.counts().transactions;
    await workload.run({ durationMs: options.duration * 1000, signal: AbortSignal.any([io.signal, line.failed]) });
    throwIfInterrupted(io.signal);
    const live = { transactions: workload.counts().transactions - before, seconds: (performance.now() - liveStarted) / 1000 };
    if (line.fatal()) throw line.fatal();
    // Everything committed before this marker must be durable before the graceful stop.
    const marker = await withClient(admin, async (c) => (await c.query<{ lsn: string }>(`SELECT pg_logical_emit_message(true, $1, 'workload done')::text AS lsn`, [DEMO_MARKER_PREFIX])).rows[0]!.lsn);
    await waitFor(
      () => {
        const s = assembler.status();
        const durable = s.lag.durableLsn;
        return s.snapshot?.finished === true && durable !== null && compareLsn(durable, marker) >= 0;
      },
      'the assembler to catch up with the workload',
      io.signal,
      line.fatal,
      // A backlog may take longer than the deadline to drain; only a standstill is an error.
      () => assembler.status().lag.durableLsn,
    );
    return live;
  } finally {
    progress.stop();
  }
}

// What the operator sees while the workload runs: one line redrawn in place on a terminal, a
// plain line every two seconds otherwise. Other output clears the redrawn line first.
import type { AssemblerStatus } from '../../../pipeline/index.js';
import type { DemoIo } from './types.js';

export interface Progress {
  /** Writes a line, clearing the progress line first. */
  say(line: string): void;
  /** Starts the progress line: the workload's committed transactions and the assembler's status. */
  start(workloadTransactions: () => number, status: () => AssemblerStatus): void;
  stop(): void;
}

export function createProgress(io: DemoIo): Progress {
  let shown = false;
  let timer: NodeJS.Timeout | null = null;
  const clear = () => {
    if (io.isTTY && shown) io.write('\r\x1b[2K');
    shown = false;
  };
  const say = (line: string) => {
    clear();
    io.write(`${line}\n`);
  };
  return {
    say,
    start(workloadTransactions, status) {
      const startedAt = performance.now();
      let last = { at: startedAt, events: 0 };
      let lastPlain = startedAt;
      timer = setInterval(() => {
        const now = performance.now();
        const s = status();
        const eventsPerSecond = ((s.events.appended - last.events) * 1000) / Math.max(1, now - last.at);
        const line = progressLine(now - startedAt, workloadTransactions(), s, eventsPerSecond);
        last = { at: now, events: s.events.appended };
        if (io.isTTY) {
          io.write(`\r\x1b[2K${line}`);
          shown = true;
        } else if (now - lastPlain >= 2_000) {
          lastPlain = now;
          say(line);
        }
      }, 250);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = null;
      clear();
    },
  };
}

function progressLine(elapsedMs: number, workloadTx: number, s: AssemblerStatus, eventsPerSecond: number): string {
  const lag = s.lag.commitToAppendMs === null ? '–' : `${s.lag.commitToAppendMs} ms`;
  const bytes = s.lag.bytes === null ? '–' : formatBytes(s.lag.bytes);
  return (
    `${(elapsedMs / 1000).toFixed(1).padStart(5)} s  source ${workloadTx} tx  ` +
    `assembler ${s.transactions.received} received, ${s.transactions.appended} appended, ${s.events.appended} events (${Math.round(eventsPerSecond)}/s)  ` +
    `lag ${lag}, ${bytes} unacknowledged`
  );
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

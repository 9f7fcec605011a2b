// CPU time of the processes of one bench run, per run: this process (where the assembler — or
// the raw reader — runs, in-process; all its threads, the client's native bridge included), the
// walsender serving the run's slot (found through pg_replication_slots.active_pid, its CPU
// sampled every `intervalMs` while it lives: it exits when the consumer disconnects, so the last
// sample counts, at most one interval short), and the in-memory KurrentDB's process.
import { cpuSeconds } from './proc-cpu.js';

export interface RunCpu {
  /** Seconds of CPU over the run; `null` where there is no such process (or /proc does not say). */
  readonly bench: number;
  readonly walsender: number | null;
  readonly server: number | null;
}

export interface CpuWatch {
  stop(): Promise<RunCpu>;
}

export function watchCpu(options: { slot: string; query: (sql: string, params: unknown[]) => Promise<{ pid: number | null }[]>; serverPid?: number | null; intervalMs?: number }): CpuWatch {
  const self = process.cpuUsage();
  const serverStart = options.serverPid ? cpuSeconds(options.serverPid) : null;
  let walsender: number | null = null;
  let walsenderCpu: number | null = null;
  let asking = false;
  const sample = async (): Promise<void> => {
    if (walsender === null) {
      if (asking) return;
      asking = true;
      try {
        const rows = await options.query('SELECT active_pid AS pid FROM pg_replication_slots WHERE slot_name = $1', [options.slot]);
        walsender = rows[0]?.pid ?? null;
      } catch {
        // the next tick asks again
      } finally {
        asking = false;
      }
    }
    if (walsender !== null) walsenderCpu = cpuSeconds(walsender) ?? walsenderCpu;
  };
  const timer = setInterval(() => void sample(), options.intervalMs ?? 25);
  return {
    async stop() {
      clearInterval(timer);
      await sample();
      const used = process.cpuUsage(self);
      const serverEnd = options.serverPid ? cpuSeconds(options.serverPid) : null;
      return {
        bench: (used.user + used.system) / 1e6,
        walsender: walsenderCpu,
        server: serverStart !== null && serverEnd !== null ? serverEnd - serverStart : null,
      };
    },
  };
}

// CPU time of a process (all its threads) from /proc/<pid>/stat: utime + stime, in seconds.
// Linux only; `null` where /proc does not say (another OS, a process that is gone).
import { readFileSync } from 'node:fs';
import { execSync } from 'node:child_process';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execSync('getconf CLK_TCK', { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** utime + stime of `pid` so far, seconds (this process's own when `pid` is `process.pid`). */
export function cpuSeconds(pid: number): number | null {
  return statCpuSeconds(`/proc/${pid}/stat`);
}

/**
 * utime + stime of the main thread of `pid` alone (the thread whose id is the pid: in Node the
 * one that runs JavaScript's event loop — not V8's GC helpers, libuv's pool or other threads).
 */
export function mainThreadCpuSeconds(pid: number): number | null {
  return statCpuSeconds(`/proc/${pid}/task/${pid}/stat`);
}

function statCpuSeconds(path: string): number | null {
  try {
    const stat = readFileSync(path, 'utf8');
    // Fields after the command name (which may hold spaces, in parentheses): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / clockTicks();
  } catch {
    return null;
  }
}

/** The walsender serving `slot` (its backend pid), or null when no one streams from it. */
export async function walsenderPid(query: (sql: string, params: unknown[]) => Promise<{ pid: number | null }[]>, slot: string): Promise<number | null> {
  const rows = await query('SELECT active_pid AS pid FROM pg_replication_slots WHERE slot_name = $1', [slot]);
  return rows[0]?.pid ?? null;
}

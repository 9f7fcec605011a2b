// The assembler as a child process (test/support/bulk-rig.ts) draining what the WAL holds: timed
// from its "assembler started" log line to the slot confirming `lsn`, with its peak RSS, its tail
// reads and the CPU time of the assembler, the walsender and (when given) the in-memory server
// over the drain. Shared by bench/bulk.bench.ts and bench/downtime.bench.ts.
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { CLI_NODE_FLAGS, REPO_ROOT } from '../../test/resilience/assembler-process.js';
import type { BulkAssembler, BulkRig } from '../../test/support/bulk-rig.js';
import { cpuSeconds, mainThreadCpuSeconds, walsenderPid } from './proc-cpu.js';

/** Node flags of the assembler: those bin/event-assembler.js starts Node with, unless EA_BENCH_BULK_NODE_ARGS says otherwise. */
export const NODE_ARGS = process.env.EA_BENCH_BULK_NODE_ARGS !== undefined ? process.env.EA_BENCH_BULK_NODE_ARGS.split(' ').filter(Boolean) : CLI_NODE_FLAGS;
/** The CLI from the build (its semi-space flags for the main thread only, as bin/event-assembler.js runs it); EA_BENCH_BUILD_DIR picks the build. */
export const COMMAND = [...NODE_ARGS, '--import', path.join(REPO_ROOT, 'bin/main-thread-heap.js'), '--import', 'tsx', path.join(REPO_ROOT, 'bench/lib/build-cli.ts')];

/** The `time` of the last log line with `msg`, in ms. */
export function loggedAt(logFile: string, msg: string): number {
  const lines = readFileSync(logFile, 'utf8').split('\n').filter((line) => line.startsWith('{') && line.includes(`"msg":"${msg}"`));
  const last = lines.at(-1);
  if (!last) throw new Error(`no "${msg}" line in ${logFile}`);
  return Date.parse((JSON.parse(last) as { time: string }).time);
}

/**
 * A counter of the sink's status as the last stopped process logged it ("assembler stopped"
 * carries the sink's status), looking only at the log from byte `from` on (the run's own lines:
 * a build that does not report the counter must not show an earlier run's).
 */
export function sinkCounter(logFile: string, name: 'tailReads' | 'prefetchHits' | 'framedTailReads', from = 0): number | null {
  const text = readFileSync(logFile).subarray(from).toString('utf8');
  const matches = [...text.matchAll(new RegExp(`"${name}":(\\d+)`, 'g'))];
  return matches.length > 0 ? Number(matches.at(-1)![1]) : null;
}

/** Tail reads the last stopped process made. */
export const tailReads = (logFile: string, from = 0): number | null => sinkCounter(logFile, 'tailReads', from);

function countLines(logFile: string, msg: string): number {
  try {
    return readFileSync(logFile, 'utf8').split(`"msg":"${msg}"`).length - 1;
  } catch {
    return 0;
  }
}

export interface DrainResult {
  readonly seconds: number;
  readonly peakRssMiB: number;
  readonly tailReads: number | null;
  /** Of those, first touches a look-ahead read had answered (null: a build without look-ahead). */
  readonly prefetchHits: number | null;
  /** Of the tail reads, those answered on the hand-framed connection (null: a build that does not say). */
  readonly framedTailReads: number | null;
  /**
   * CPU seconds over the drain (from "assembler started" to the acknowledgement): assembler (all
   * threads), of it its main thread (where the pipeline runs), walsender, server.
   */
  readonly cpu: { readonly assembler: number | null; readonly mainThread: number | null; readonly walsender: number | null; readonly server: number | null };
}

/**
 * Starts the assembler on what the WAL holds, waits until `lsn` is acknowledged, stops it.
 * `serverPid`: the in-memory KurrentDB's process, for its CPU time; `limits`: the assembler's `limits` overrides.
 */
export async function drain(rig: BulkRig, lsn: string, serverPid?: number, limits?: Record<string, number>): Promise<DrainResult> {
  const startedBefore = countLines(rig.logFile, 'assembler started');
  const logFrom = existsSync(rig.logFile) ? statSync(rig.logFile).size : 0;
  const assembler: BulkAssembler = rig.start(limits);
  // CPU from the start-up line on (start-up itself — loading the config — is not the drain's).
  let base = { assembler: 0, mainThread: 0, server: serverPid ? (cpuSeconds(serverPid) ?? 0) : 0 };
  const watch = setInterval(() => {
    if (countLines(rig.logFile, 'assembler started') > startedBefore) {
      base = { assembler: cpuSeconds(assembler.pid) ?? 0, mainThread: mainThreadCpuSeconds(assembler.pid) ?? 0, server: serverPid ? (cpuSeconds(serverPid) ?? 0) : 0 };
      clearInterval(watch);
    }
  }, 20);
  let walsender: number | null = null;
  const findWalsender = setInterval(() => {
    void walsenderPid((sql, params) => rig.db.query(sql, params), rig.slot).then((pid) => (walsender ??= pid), () => undefined);
  }, 200);
  try {
    await rig.acknowledged(lsn, assembler, 3_600_000);
  } finally {
    clearInterval(watch);
    clearInterval(findWalsender);
  }
  const done = Date.now();
  walsender ??= await walsenderPid((sql, params) => rig.db.query(sql, params), rig.slot);
  const cpu = {
    assembler: (cpuSeconds(assembler.pid) ?? Number.NaN) - base.assembler,
    mainThread: (mainThreadCpuSeconds(assembler.pid) ?? Number.NaN) - base.mainThread,
    // A walsender starts with the assembler's connection: all of its time is this drain's.
    walsender: walsender === null ? null : cpuSeconds(walsender),
    server: serverPid ? (cpuSeconds(serverPid) ?? Number.NaN) - base.server : null,
  };
  const peakRssMiB = await assembler.peakRssMiB();
  const exit = await assembler.kill('SIGTERM');
  if (exit.code !== 0) throw new Error(`the assembler exited with ${exit.code} on SIGTERM`);
  return { seconds: (done - loggedAt(rig.logFile, 'assembler started')) / 1000, peakRssMiB, tailReads: tailReads(rig.logFile, logFrom), prefetchHits: sinkCounter(rig.logFile, 'prefetchHits', logFrom), framedTailReads: sinkCounter(rig.logFile, 'framedTailReads', logFrom), cpu };
}

/**
 * The baseline consumer: a minimal CopyBoth reader that receives a slot's pgoutput stream and
 * discards it. It only looks at the first byte of each XLogData payload to count commits
 * (pgoutput `C`) and remember the last commit's end LSN; nothing is decoded. Keepalives that ask
 * for a reply get one (reporting nothing new), and the flush position is reported once, at the end.
 *
 * This is the ceiling the assembler is compared with: what the walsender delivers to a client
 * that does no work.
 */
import pg from 'pg';
import { listenCopyData, type DataStream } from '../../src/source/copy-data.js';
import { formatLsn, standbyStatusUpdate } from './subject.js';

export interface RawDrainResult {
  readonly transactions: number;
  readonly bytes: number;
  /** From START_REPLICATION sent to the expected commit received. */
  readonly seconds: number;
  readonly lastEndLsn: string;
  /** Seconds from start to the `markAt`-th commit, and that commit's end LSN. */
  readonly markSeconds: number;
  readonly markLsn: string;
}

interface ConnectionInternals {
  stream: DataStream;
  on(event: 'copyData', listener: (message: { chunk: Buffer }) => void): void;
  sendCopyFromChunk(chunk: Buffer): void;
}

/** Drains `slot` until `expectedTransactions` commits have arrived (or `timeoutMs` passes). The clock starts before connecting. */
export async function drainRaw(
  connection: pg.ClientConfig,
  slot: string,
  publication: string,
  expectedTransactions: number,
  markAt: number,
  timeoutMs = 600_000,
): Promise<RawDrainResult> {
  const started = process.hrtime.bigint();
  let markSeconds = 0;
  let markLsn = 0n;
  const client = new pg.Client({ ...connection, replication: 'database' } as pg.ClientConfig);
  client.on('error', () => undefined);
  await client.connect();
  const internals = (client as unknown as { connection: ConnectionInternals }).connection;
  let transactions = 0;
  let bytes = 0;
  let lastEnd = 0n;
  let flushed = 0n;
  let finish: (() => void) | undefined;
  const done = new Promise<void>((resolve) => (finish = resolve));
  const onCopyData = (chunk: Buffer, start: number, end: number) => {
    bytes += end - start;
    if (chunk[start] === 0x77 /* w */) {
      if (chunk[start + 25] === 0x43 /* C: commit = tag(1) flags(1) commitLsn(8) endLsn(8) time(8) */) {
        transactions += 1;
        lastEnd = chunk.readBigUInt64BE(start + 25 + 1 + 1 + 8);
        if (transactions === markAt) {
          markSeconds = Number(process.hrtime.bigint() - started) / 1e9;
          markLsn = lastEnd;
        }
        if (transactions >= expectedTransactions) finish?.();
      }
    } else if (chunk[start] === 0x6b /* k */ && chunk[start + 17] === 1) {
      internals.sendCopyFromChunk(standbyStatusUpdate(formatLsn(flushed), false));
    }
  };
  // Received the way the assembler receives (src/source/copy-data.ts: off the socket, in place), else through pg's events.
  listenCopyData(internals, onCopyData);
  const streaming = client
    .query(`START_REPLICATION SLOT "${slot}" LOGICAL 0/0 (proto_version '2', publication_names '"${publication}"', streaming 'on')`)
    .catch(() => undefined);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
  const outcome = await Promise.race([done.then(() => 'done' as const), timedOut]);
  clearTimeout(timer);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  flushed = lastEnd;
  internals.sendCopyFromChunk(standbyStatusUpdate(formatLsn(flushed), false));
  await client.end().catch(() => undefined);
  await streaming;
  if (outcome === 'timeout') throw new Error(`raw reader: ${transactions} of ${expectedTransactions} transactions within ${timeoutMs} ms`);
  return { transactions, bytes, seconds, lastEndLsn: formatLsn(lastEnd), markSeconds, markLsn: formatLsn(markLsn) };
}

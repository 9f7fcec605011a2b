// One 1,000,000-row transaction through decoder + buffer with the default memory limit (64 MiB):
// it must spill, read back in order, and keep the process's peak RSS bounded.
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTransactionBuffer, type CommittedTransaction } from '../../src/buffer/index.js';
import { createPgoutputDecoder } from '../../src/source/pgoutput/decoder.js';
import { encodePgoutput } from '../../src/source/pgoutput/encoder.js';

const ROWS = 1_000_000;
const RSS_LIMIT_BYTES = 300 * 1024 * 1024;

let dir: string;
beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), 'buffer-million-')); });
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

/** A real-shaped Insert payload (5 columns, ~100 bytes of text) for row `i`. */
function insertPayload(i: number): Buffer {
  return encodePgoutput({
    tag: 'insert', relationId: 16384, newTuple: [
      { kind: 'text', value: String(i) },
      { kind: 'text', value: `invoice line ${i} — description` },
      { kind: 'text', value: String(i % 1000) },
      { kind: 'text', value: `${i}.${String(i % 100).padStart(2, '0')}` },
      { kind: 'text', value: '2024-01-02 03:04:05.123456+01' },
    ],
  });
}

describe('transaction buffer with one 1,000,000-row transaction', () => {
  it('emits it whole and in order with peak RSS under 300 MB', async () => {
    const started = performance.now();
    const baselineRss = process.memoryUsage().rss;
    let peakRss = process.memoryUsage().rss;
    const sample = () => { peakRss = Math.max(peakRss, process.memoryUsage().rss); };
    const decoder = createPgoutputDecoder();
    const buffer = createTransactionBuffer({
      spillDir: dir,
      makePosition: (commitLsn, xid) => ({ systemId: '1', timeline: 1, slot: 's', commitLsn, xid, checkpoint: `${commitLsn}/${xid}` }),
    });
    try {
      const push = (payload: Buffer) => buffer.push(decoder.decode(payload), '0/1');
      await push(encodePgoutput({ tag: 'begin', finalLsn: '1/0', commitTime: '2024-01-02T03:04:05.000000Z', xid: 4242 }));
      await push(encodePgoutput({
        tag: 'relation', relationId: 16384, schema: 'public', name: 'invoice_line', replicaIdentity: 'default', columns: [
          { flags: 1, name: 'id', typeOid: 20, typeModifier: -1 }, { flags: 0, name: 'description', typeOid: 25, typeModifier: -1 },
          { flags: 0, name: 'qty', typeOid: 23, typeModifier: -1 }, { flags: 0, name: 'amount', typeOid: 1700, typeModifier: -1 },
          { flags: 0, name: 'created_at', typeOid: 1184, typeModifier: -1 },
        ],
      }));
      for (let i = 0; i < ROWS; i++) {
        await push(insertPayload(i));
        if (i % 20_000 === 0) sample();
      }
      const txn = await push(encodePgoutput({ tag: 'commit', flags: 0, commitLsn: '1/0', endLsn: '1/30', commitTime: '2024-01-02T03:04:05.000000Z' })) as CommittedTransaction;
      const pushed = performance.now();
      expect(txn).toMatchObject({ kind: 'transaction', xid: 4242, changeCount: ROWS, spilled: true });
      expect(buffer.memoryBytes).toBe(0);

      let n = 0;
      for await (const change of txn.changes()) {
        if (change.op !== 'insert' || change.after.id !== BigInt(n)) throw new Error(`change ${n} out of order: ${JSON.stringify(change, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
        if (n === 0) expect(change.after).toEqual({ id: 0n, description: 'invoice line 0 — description', qty: 0, amount: '0.00', created_at: '2024-01-02T02:04:05.123456Z' });
        n++;
        if (n % 20_000 === 0) sample();
      }
      expect(n).toBe(ROWS);
      sample();
      await txn.release();
      // The spill file is gone (the buffer's own sub-directory stays until close()).
      const left = await Promise.all((await readdir(dir)).map((d) => readdir(join(dir, d))));
      expect(left.flat()).toEqual([]);
      const maxRss = process.resourceUsage().maxRSS * 1024;
      const seconds = (performance.now() - started) / 1000;
      console.log(`[buffer-million] ${ROWS} rows: push+spill ${((pushed - started) / 1000).toFixed(1)} s, total ${seconds.toFixed(1)} s; ` +
        `baseline RSS ${(baselineRss / 2 ** 20).toFixed(0)} MiB, peak sampled RSS ${(peakRss / 2 ** 20).toFixed(0)} MiB, maxRSS ${(maxRss / 2 ** 20).toFixed(0)} MiB`);
      expect(peakRss).toBeLessThan(RSS_LIMIT_BYTES);
      expect(maxRss).toBeLessThan(RSS_LIMIT_BYTES);
    } finally {
      await buffer.close();
    }
    expect(await readdir(dir)).toEqual([]);
  }, 120_000);
});

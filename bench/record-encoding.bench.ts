// One event's record encoding (`encodePlainRecord`, src/sink/v2-append.ts: 15 properties as the
// pipeline sets them, the receipt, ≈ 400 bytes of JSON) in two builds, alternated in one process
// 12 times — a function on its own, small enough that the two builds' heaps do not disturb each
// other the way whole pipelines do (bench/pair.bench.ts); check with a build against a copy of itself.
//   EA_BENCH_PAIR=base=.tmp/bench-base,new=.tmp/bench-build node --import tsx bench/record-encoding.bench.ts
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type * as V2Append from '../src/sink/v2-append.js';
import { pairBuilds } from './lib/pair-builds.js';

const builds = pairBuilds();
const modules = await Promise.all(builds.map(async (b) => (await import(pathToFileURL(path.resolve(b.dir, 'sink/v2-append.js')).href)) as typeof V2Append));

const data = JSON.stringify({
  invoiceId: 'b-000123', customerId: 'c17', currency: 'EUR', total: '1410.00', draftedAt: '2026-12-07T15:28:17.123456Z',
  lines: [{ line: 1, product: 'consulting hour', quantity: 3, unitPrice: '120.00' }, { line: 2, product: 'audit', quantity: 1, unitPrice: '900.00' }, { line: 3, product: 'licence seat', quantity: 5, unitPrice: '30.00' }],
});

/** The properties of event `i` as the pipeline's metadata and the sink's receipt give them. */
function parts(m: typeof V2Append, i: number): V2Append.PlainProperties[] {
  const b = new m.PlainPropertiesBuilder();
  const lsn = `0/${(0x16b3748 + i * 600).toString(16).toUpperCase()}`;
  const add = (key: string, value: string) => {
    if (!b.add(key, value)) throw new Error(`not plain: ${key}`);
  };
  add('source.checkpoint', `1:7449616839455:1:${lsn}:${1000 + i}`);
  add('source.commitLsn', lsn);
  add('source.xid', String(1000 + i));
  add('source.commitTime', '2026-12-07T15:28:17.123456Z');
  add('origin', 'change');
  add('source.tables', 'public.invoice,public.invoice_line');
  add('source.operations', 'insert');
  add('$correlationId', `0a1b2c3d-${i}`);
  add('mapper', 'invoice-lifecycle');
  add('assembler', 'bench');
  add('entity.type', 'invoice');
  add('entity.id', `b-${i}`);
  add('contract', 'InvoiceDrafted@1');
  add('transaction.index', '0');
  add('transaction.count', '1');
  return [b, m.plainProperty('receipt', `2|t|bench||${lsn}|${1000 + i}|0|1`)!];
}

const id = '6f1c2a9e-3b4d-5e6f-8a9b-0c1d2e3f4a5b';
const sets = modules.map((m) => Array.from({ length: 1000 }, (_, i) => parts(m, i)));
const N = 300_000;
const ns: number[][] = [[], []];
for (let round = 0; round < 12; round++) {
  for (const k of round % 2 ? [1, 0] : [0, 1]) {
    const m = modules[k]!;
    const set = sets[k]!;
    const started = process.hrtime.bigint();
    let bytes = 0;
    for (let i = 0; i < N; i++) bytes += m.encodePlainRecord(id, 'InvoiceDrafted', data, set[i % 1000]!)!.record.length;
    ns[k]!.push(Number(process.hrtime.bigint() - started) / N);
    if (bytes === 0) throw new Error('nothing encoded');
  }
}
const median = (values: number[]) => [...values].sort((x, y) => x - y)[values.length >> 1]!;
for (const [k, b] of builds.entries()) console.log(`${b.label}: ns per event ${ns[k]!.map((x) => x.toFixed(0)).join(' ')}; median ${median(ns[k]!).toFixed(0)}`);
console.log(`B ÷ A, median of the 12 rounds' ratios: ${median(ns[1]!.map((x, i) => x / ns[0]![i]!)).toFixed(3)}`);

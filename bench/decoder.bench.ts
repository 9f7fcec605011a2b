// pgoutput decoding throughput: N Insert messages of a 10-column row, decoded from bytes
// (decodePgoutput), and decoded + converted into typed Changes (rowChangeOf), in rows/s.
//
// Run: node --import tsx bench/decoder.bench.ts [rows]
// Results: bench/results/decoder.md
import { rowChangeOf } from '../src/source/changes.js';
import { createPgoutputDecoder, decodePgoutput } from '../src/source/pgoutput/decoder.js';
import { encodePgoutput } from '../src/source/pgoutput/encoder.js';
import type { InsertMessage, RelationColumnMessage } from '../src/source/pgoutput/messages.js';
import { createRelationRegistry } from '../src/source/relations.js';

const ROWS = Number(process.argv[2] ?? 1_000_000);
const RUNS = 5;
const DISTINCT = 4096; // distinct payloads, cycled (a realistic spread of value lengths, little cache help)

const col = (name: string, typeOid: number, key = false): RelationColumnMessage => ({ flags: key ? 1 : 0, name, typeOid, typeModifier: -1 });
const columns = [
  col('id', 20, true), col('invoice_id', 2950), col('line_no', 23), col('description', 25), col('quantity', 23),
  col('unit_price', 1700), col('amount', 1700), col('currency', 1042), col('created_at', 1184), col('attributes', 3802),
];
const payloads = Array.from({ length: DISTINCT }, (_, i) => encodePgoutput({
  tag: 'insert', relationId: 16384, newTuple: [
    String(1_000_000 + i), `1b4e28ba-2fa1-11d2-883f-${String(i).padStart(12, '0')}`, String(i % 20 + 1),
    `Consulting hours, week ${i % 52}`, String(i % 9 + 1), `${i % 500}.00`, `${(i % 500) * (i % 9 + 1)}.00`, 'EUR',
    `2026-03-01 09:30:${String(i % 60).padStart(2, '0')}.${String(i).padStart(6, '0')}+01`, `{"vat": "0.19", "tags": ["a", "b${i % 7}"]}`,
  ].map((value) => ({ kind: 'text' as const, value })),
}));
const payloadBytes = payloads.reduce((n, p) => n + p.length, 0) / DISTINCT;

const registry = createRelationRegistry();
const entry = registry.apply({ tag: 'relation', relationId: 16384, schema: 'public', name: 'invoice_line', replicaIdentity: 'default', columns }).entry;

function measure(label: string, fn: (payload: Buffer) => unknown): string {
  for (let i = 0; i < 50_000; i++) fn(payloads[i % DISTINCT]!); // warm-up
  const rates: number[] = [];
  let sink = 0;
  for (let r = 0; r < RUNS; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < ROWS; i++) if (fn(payloads[i % DISTINCT]!) !== undefined) sink++;
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    rates.push(ROWS / seconds);
  }
  if (sink !== ROWS * RUNS) throw new Error('benchmark sink mismatch');
  rates.sort((a, b) => a - b);
  const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
  return `| ${label} | ${fmt(rates[Math.floor(RUNS / 2)]!)} | ${fmt(rates[RUNS - 1]!)} | ${fmt(rates[0]!)} |`;
}

const decoder = createPgoutputDecoder();
console.log(`Node ${process.version}, ${process.platform}/${process.arch}; ${ROWS.toLocaleString('en-US')} rows × ${RUNS} runs; ` +
  `10-column Insert, ${payloadBytes.toFixed(0)} bytes per message on average\n`);
console.log('| step | median rows/s | best | worst |');
console.log('|---|---|---|---|');
console.log(measure('decodePgoutput (bytes → InsertMessage)', (p) => decodePgoutput(p)));
console.log(measure('createPgoutputDecoder().decode', (p) => decoder.decode(p)));
console.log(measure('decode + rowChangeOf (→ InsertChange with typed values)', (p) => rowChangeOf(entry, decodePgoutput(p) as InsertMessage)));

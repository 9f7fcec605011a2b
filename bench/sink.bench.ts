// The sink alone: appendMany of invoicing-like units (one event each, the pipeline's metadata)
// against the in-memory KurrentDB in its own process; CPU µs per unit in this process and in the
// server's (read from /proc, Linux; one event per unit, so per unit = per event).
//   node --import tsx bench/sink.bench.ts [units=20000] [batch=256]
import { randomUUID } from 'node:crypto';
import { createKurrentDBSink } from '../src/sink/index.js';
import type { SinkBatch } from '../src/sink/index.js';
import { startKurrentDBProcess } from './lib/kurrentdb-server.js';
import { cpuSeconds } from './lib/proc-cpu.js';

const UNITS = Number(process.argv[2] ?? 20_000);
const BATCH = Number(process.argv[3] ?? 256);
const server = await startKurrentDBProcess(0);
const sink = await createKurrentDBSink({ connectionString: server.connectionString, assembler: 'sinkbench', checkpointStream: false });
const unit = (n: number): SinkBatch => {
  const commitLsn = `0/${(0x1000000 + n * 0x200).toString(16).toUpperCase()}`;
  return {
    position: { checkpoint: `v1:7391029384756102938:1:slot:${commitLsn}:${n}`, commitLsn, xid: 1000 + n, systemId: '7391029384756102938' },
    events: [{
      id: randomUUID(), stream: `invoice-b${n}`, type: 'InvoiceDrafted',
      data: { invoiceId: `b${n}`, customerId: `c${n % 100}`, currency: 'EUR', total: '60.00', lines: [{ lineNo: 1, description: 'Consulting', quantity: 1, unitPrice: '10.00', amount: '10.00' }, { lineNo: 2, description: 'Travel', quantity: 2, unitPrice: '10.00', amount: '20.00' }, { lineNo: 3, description: 'Licence', quantity: 3, unitPrice: '10.00', amount: '30.00' }] },
      metadata: {
        'source.checkpoint': `v1:7391029384756102938:1:slot:${commitLsn}:${n}`, 'source.commitLsn': commitLsn, 'source.xid': String(1000 + n), 'source.commitTime': '2026-11-30T02:00:00.123456Z',
        origin: 'change', 'source.tables': 'public.invoice,public.invoice_line', 'source.operations': 'insert', '$correlationId': `7391029384756102938:${commitLsn}:${1000 + n}`,
        mapper: 'invoice-lifecycle', assembler: 'sinkbench', 'entity.type': 'invoice', 'entity.id': `b${n}`, contract: 'InvoiceDrafted@1', 'transaction.index': '0', 'transaction.count': '1',
      },
    }],
  };
};
const cpu = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
await sink.appendMany(Array.from({ length: 100 }, (_, i) => unit(1_000_000 + i))); // warm-up
const c0 = cpu();
const s0 = cpuSeconds(server.pid);
const t0 = performance.now();
for (let i = 0; i < UNITS; i += BATCH) await sink.appendMany(Array.from({ length: Math.min(BATCH, UNITS - i) }, (_, j) => unit(i + j)));
const seconds = (performance.now() - t0) / 1000;
const s1 = cpuSeconds(server.pid);
const serverText = s0 === null || s1 === null ? 'server CPU unknown' : `${Math.round(((s1 - s0) * 1e6) / UNITS)} µs CPU/unit in the server`;
console.log(`sink.appendMany: ${UNITS} units in batches of ${BATCH}: ${seconds.toFixed(2)} s, ${Math.round(UNITS / seconds)} units/s, ${Math.round(((cpu() - c0) * 1000) / UNITS)} µs CPU/unit in this process, ${serverText}`);
await sink.close();
await server.stop();

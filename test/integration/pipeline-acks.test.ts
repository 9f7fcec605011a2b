// Acknowledgements of the running pipeline against PostgreSQL 17 and the in-memory KurrentDB:
// the slot's confirmed_flush_lsn never passes what is durably appended (sampled while appends
// are slow and in flight); a destination outage mid-run is waited out with every event exactly
// once; a slot advanced behind the assembler's back is refused as "rebuild needed"; a spilled
// transaction's position is never recorded before it is durable, also when its spill file is slow.
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkpointStreamName } from '../../src/sink/index.js';
import { createAssembler, RebuildNeededError, type Assembler } from '../../src/pipeline/index.js';
import { compareLsn } from '../../src/source/position.js';
import { createPipelineRig, workload, type PipelineRig } from './pipeline-rig.js';

const OUTAGE_SECONDS = Number(process.env['EA_OUTAGE_SECONDS'] ?? 5);

describe('pipeline acknowledgements', () => {
  let rig: PipelineRig;
  const running: Assembler[] = [];

  beforeAll(async () => {
    rig = await createPipelineRig('acks', { slots: 3 });
  });
  afterAll(async () => {
    for (const a of running) await a.stop();
    await rig?.close();
  });

  function customerIdsIn(prefix: string): Set<string> {
    return new Set(rig.businessStreams().filter((s) => s.startsWith(`customer-${prefix}`)).filter((s) => rig.events(s).length > 0));
  }

  it('never lets confirmed_flush_lsn pass what is durably appended while appends are in flight', async () => {
    const slot = rig.slots[0]!;
    rig.kdb.setAppendLatency(150);
    const assembler = createAssembler(rig.config({ slot }), { logger: rig.logger() });
    running.push(assembler);
    const run = assembler.run();
    await rig.until(() => expect(assembler.status().state).toBe('running'));
    const w = workload(rig);
    const n = 24;
    for (let i = 1; i <= n; i++) await w.customer(`a${i}`);

    // Sample: the slot first, then KurrentDB (which only grows): every transaction the slot
    // has confirmed must already be in KurrentDB.
    const samples: { confirmed: string; present: Set<string> }[] = [];
    await rig.until(async () => {
      const { confirmed_flush_lsn: confirmed } = await rig.slot(slot);
      samples.push({ confirmed, present: customerIdsIn('a') });
      expect(samples[samples.length - 1]!.present.size).toBe(n);
      expect(compareLsn((await rig.slot(slot)).confirmed_flush_lsn, assembler.status().lag.acknowledgedLsn ?? '0/0')).toBe(0);
    }, 30_000);
    rig.kdb.setAppendLatency(0);

    const commitLsn = new Map<string, string>();
    for (let i = 1; i <= n; i++) commitLsn.set(`customer-a${i}`, rig.events(`customer-a${i}`)[0]!.metadata['source.commitLsn']!);
    let inFlightSamples = 0;
    for (const { confirmed, present } of samples) {
      if (present.size > 0 && present.size < n) inFlightSamples += 1;
      for (const [stream, lsn] of commitLsn) {
        if (compareLsn(lsn, confirmed) < 0) expect(present.has(stream), `${stream} (commit ${lsn}) confirmed at ${confirmed} before it was durable`).toBe(true);
      }
    }
    expect(inFlightSamples).toBeGreaterThan(0); // the samples did see appends in flight
    await assembler.stop();
    const summary = await run;
    expect(summary.events.appended).toBe(n);
  });

  it(`waits out a destination outage of ${OUTAGE_SECONDS}s mid-run; every event lands exactly once`, async () => {
    const slot = rig.slots[1]!;
    const logger = rig.logger();
    const assembler = createAssembler(rig.config({ slot }), { logger });
    running.push(assembler);
    const run = assembler.run();
    const w = workload(rig);
    await w.customer('o1');
    await w.draft('oi1', 'o1');
    // This slot also replays the first test's 24 customers: recognised, not appended again.
    await rig.until(() => expect(rig.events('invoice-oi1').map((e) => e.type)).toEqual(['InvoiceDrafted']));

    await rig.kdb.stop();
    await w.issue('oi1', 2);
    await w.customer('o2');
    await w.draft('oi2', 'o2');
    const outageEnds = Date.now() + OUTAGE_SECONDS * 1000;
    await rig.until(() => expect(assembler.status().sink?.state).toBe('retrying'), 15_000);
    const acknowledgedDuringOutage = assembler.status().lag.acknowledgedLsn;
    await rig.until(() => expect(Date.now()).toBeGreaterThanOrEqual(outageEnds), OUTAGE_SECONDS * 1000 + 5_000);
    // Nothing was acknowledged while nothing could be appended.
    expect(assembler.status().lag.acknowledgedLsn).toBe(acknowledgedDuringOutage);
    await rig.kdb.start();

    await rig.until(() => {
      expect(rig.events('invoice-oi1').map((e) => e.type)).toEqual(['InvoiceDrafted', 'InvoiceIssued']);
      expect(rig.events('invoice-oi2').map((e) => e.type)).toEqual(['InvoiceDrafted']);
      expect(rig.events('customer-o2').map((e) => e.type)).toEqual(['CustomerRegistered']);
    }, 30_000);
    await assembler.stop();
    const summary = await run;
    expect(summary.transactions.received).toBe(24 + 5);
    // Exactly once: every id once in each stream, and the slot caught up with what was appended.
    for (const stream of rig.businessStreams()) {
      const ids = rig.events(stream).map((e) => e.id);
      expect(new Set(ids).size, stream).toBe(ids.length);
    }
    expect(rig.events('customer-o1')).toHaveLength(1);
    expect((await rig.slot(slot)).confirmed_flush_lsn).toBe(summary.acknowledgedLsn);
    expect(logger.lines.some((l) => l.level === 'warn' && l.message.includes('destination unavailable'))).toBe(true);
  });

  it('refuses to resume when the slot was advanced past the recorded checkpoint (rebuild needed)', async () => {
    const slot = rig.slots[2]!;
    const first = createAssembler(rig.config({ slot }), { logger: rig.logger() });
    running.push(first);
    const run = first.run();
    await rig.until(() => expect(first.status().transactions.received).toBeGreaterThanOrEqual(29));
    await first.stop();
    await run;

    // Someone else consumes the slot: two customers are skipped.
    await workload(rig).customer('skipped1');
    await workload(rig).customer('skipped2');
    await rig.sql('SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())', [slot]);

    const second = createAssembler(rig.config({ slot }), { logger: rig.logger() });
    running.push(second);
    const error = await second.run().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RebuildNeededError);
    expect((error as RebuildNeededError).code).toBe('REBUILD_NEEDED');
    expect((error as Error).message).toMatch(/confirmed_flush_lsn .* ahead of the last position this assembler recorded/);
    expect((error as Error).message).toContain('Rebuild:');
    expect(second.status().state).toBe('failed');
  });

  // A spilled transaction's Commit is received (the source's received position past it) before
  // it is taken in: while its spill file is finished it is neither open nor in flight. The idle
  // checkpoint (a tick every 2 s) must not record that position then — a crash before the
  // transaction is durable would restart past it. The spill file's write at the commit is made slower than a tick.
  it("never records a spilled transaction's position before all of its events are durable, also while its spill file is slow to finish", async () => {
    const slot = await rig.createSlot('spill');
    const name = 'acks-spill';
    const assembler = createAssembler(rig.config({ slot, name, limits: { memoryLimitBytes: 64 * 1024 } }), { logger: rig.logger() });
    running.push(assembler);
    const run = assembler.run();
    await rig.until(() => expect(assembler.status().state).toBe('running'));

    const restore = slowNextFileWrite(SLOW_WRITE_MS);
    let slowed = false;
    try {
      await rig.sql(`INSERT INTO customer (id, name, email, card_number, country)
                     SELECT 'sp' || g, 'Customer ' || g, 'sp' || g || '@secret.example', '4111-' || g, 'NL' FROM generate_series(1, ${SPILLED_ROWS}) g`);
      await rig.until(() => expect(rig.businessStreams().filter((s) => s.startsWith('customer-sp')).length).toBe(SPILLED_ROWS), 30_000);
    } finally {
      slowed = restore();
    }
    expect(slowed).toBe(true);
    expect(assembler.status().source?.spilledTransactions).toBe(1);
    const events = rig.businessStreams().filter((s) => s.startsWith('customer-sp')).map((s) => rig.kdb.readStreamEvents(s)[0]!);
    const commitLsn = rig.events('customer-sp1')[0]!.metadata['source.commitLsn']!;
    const lastEvent = events.reduce((max, e) => (e.position > max ? e.position : max), 0n);
    // Acknowledged past it (a heartbeat-free rig: a later transaction moves the checkpoint on).
    await workload(rig).customer('after-spill');
    await rig.until(async () => expect(compareLsn((await rig.slot(slot)).confirmed_flush_lsn, commitLsn)).toBeGreaterThan(0));

    const records = rig.kdb.readStreamEvents(checkpointStreamName(name)).map((e) => ({
      position: e.position,
      endLsn: (JSON.parse(Buffer.from(e.data).toString('utf8')) as { position: { endLsn: string } }).position.endLsn,
    }));
    const covering = records.filter((r) => compareLsn(r.endLsn, commitLsn) > 0);
    expect(covering.length).toBeGreaterThan(0);
    for (const r of covering) expect(r.position > lastEvent, `checkpoint ${r.endLsn} recorded before the spilled transaction (commit ${commitLsn}) was durable`).toBe(true);
    await assembler.stop();
    await run;
  });
});

/** Rows of the spilled transaction: past the 64 KiB buffer limit, under the spill file's 256 KiB write batch (one write, at the commit). */
const SPILLED_ROWS = 1_000;
const SLOW_WRITE_MS = 3_000;

/**
 * Makes the next `FileHandle.write()` of this process wait `ms` first — the spill file's one
 * write, at the spilled transaction's commit (nothing else in the test process writes a file
 * meanwhile) — like a slow disk. Returns the undo, which says whether the write came.
 */
function slowNextFileWrite(ms: number): () => boolean {
  const proto = Object.getPrototypeOf(FILE_HANDLE) as FileHandle;
  const write = proto.write;
  let armed = true;
  proto.write = async function slowWrite(this: FileHandle, ...args: Parameters<FileHandle['write']>) {
    if (armed) {
      armed = false;
      await new Promise((resolve) => setTimeout(resolve, ms));
    }
    return (write as (...a: unknown[]) => ReturnType<FileHandle['write']>).apply(this, args);
  } as FileHandle['write'];
  return () => {
    proto.write = write;
    return !armed;
  };
}

/** A closed file handle: its prototype is every FileHandle's. */
const FILE_HANDLE: FileHandle = await (async () => {
  const dir = await mkdtemp(join(tmpdir(), 'ea-acks-'));
  const handle = await open(join(dir, 'probe'), 'w');
  await handle.close();
  await rm(dir, { recursive: true, force: true });
  return handle;
})();

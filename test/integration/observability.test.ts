// Observability of a running assembler, read the way Prometheus and an orchestrator read it:
// /metrics, /healthz, /readyz and /status.json on a free port, against real PostgreSQL and the
// in-memory KurrentDB. Each signal is seen to move: freshness stays low on an idle database
// thanks to the heartbeat (which is acknowledged and never mapped), retained WAL grows while the
// destination is down and falls after it is back, freshness goes stale and /readyz says why,
// failed records count a parked transaction.
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import { compareLsn } from '../../src/source/position.js';
import { mappers } from '../../examples/invoicing/index.js';
import type { StatusDocument } from '../../src/observability/index.js';
import { getJson, scrape } from '../support/prometheus.js';
import { createPipelineRig, workload, type PipelineRig } from './pipeline-rig.js';
import { fragilePayments } from '../support/fragile-payments.js';


const OBSERVABILITY = { port: 0, heartbeatIntervalMs: 300, maxFreshnessMs: 2_500 };

describe('observability: metrics, health, readiness, heartbeat', () => {
  let rig: PipelineRig;
  const running: Assembler[] = [];

  beforeAll(async () => {
    rig = await createPipelineRig('obs', { slots: 0 });
  });
  afterAll(async () => {
    for (const a of running) await a.stop();
    await rig?.close();
  });

  /** Starts an assembler on a new slot; the previous one is stopped first (they would write the same entity streams). */
  async function start(name: string, extra: Partial<Parameters<PipelineRig['config']>[0]> = {}): Promise<{ assembler: Assembler; url: string; slot: string; run: Promise<unknown> }> {
    for (const a of running.splice(0)) await a.stop();
    const slot = await rig.createSlot(name);
    const logger = rig.logger();
    const assembler = createAssembler(rig.config({ slot, name, observability: OBSERVABILITY, ...extra }), { logger });
    running.push(assembler);
    const run = assembler.run();
    run.catch(() => undefined);
    let url = '';
    await rig.until(() => {
      const address = assembler.observability();
      expect(address).not.toBeNull();
      url = address!.url;
    });
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const listening = logger.lines.find((l) => l.message === 'observability: listening');
    expect(listening?.fields).toMatchObject({ url, heartbeatIntervalMs: 300 });
    return { assembler, url, slot, run };
  }

  it('an idle database reads fresh: heartbeats come back through the slot, are acknowledged, and map to nothing', async () => {
    const { assembler, url, slot } = await start('idle');
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    await rig.until(async () => expect((await getJson(`${url}/readyz`)).status).toBe(200), 30_000);

    // Several heartbeats later, with no application writes at all, freshness is still low.
    await rig.until(async () => {
      const m = await scrape(url);
      expect(m.value('event_assembler_heartbeats_received_total')).toBeGreaterThanOrEqual(4);
      expect(m.value('event_assembler_freshness_seconds')).toBeLessThan(OBSERVABILITY.maxFreshnessMs / 1000);
      // Slot readings are reused for up to a second: one taken just before streaming began may still show.
      expect(m.value('event_assembler_slot_active')).toBe(1);
    }, 30_000);
    const m = await scrape(url);
    expect(m.value('event_assembler_transactions_received_total')).toBe(0); // heartbeats are not business transactions
    expect(m.value('event_assembler_leader')).toBe(1);
    expect(m.value('event_assembler_role', { role: 'leader' })).toBe(1);
    expect(m.value('event_assembler_role', { role: 'standby' })).toBe(0);
    expect(m.value('event_assembler_destination_up')).toBe(1);
    expect(m.value('event_assembler_slot_wal_status', { status: 'reserved' })).toBe(1);
    expect(m.value('event_assembler_slot_wal_status', { status: 'lost' })).toBe(0);
    expect(m.value('event_assembler_slot_probe_up')).toBe(1);
    expect(m.value('event_assembler_slot_retained_wal_bytes')).toBeGreaterThanOrEqual(0);
    expect(m.value('event_assembler_checkpoint_age_seconds')).toBeLessThan(30);
    expect(m.value('event_assembler_position_lsn', { stage: 'acknowledged' })).toBeGreaterThan(0);
    expect(rig.businessStreams()).toEqual([]);
    // Every metric has help text.
    const names = new Set(m.samples.map((s) => s.name.replace(/_(bucket|sum|count)$/, '')));
    for (const name of names) expect(m.text).toMatch(new RegExp(`^# HELP ${name} \\S`, 'm'));

    // The heartbeats' positions are acknowledged to the slot.
    const doc = (await getJson<StatusDocument>(`${url}/status.json`)).body;
    expect(doc.heartbeat.sent).toBeGreaterThanOrEqual(4);
    expect(doc.heartbeat.lastError).toBeNull();
    await rig.until(async () => expect(compareLsn((await rig.slot(slot)).confirmed_flush_lsn, doc.heartbeat.lastLsn!)).toBeGreaterThanOrEqual(0));
    expect(assembler.status().transactions).toMatchObject({ received: 0, appended: 0 });
  });

  it('retained WAL grows while the destination is down and falls after it is back; freshness goes stale and /readyz says why', async () => {
    const { url } = await start('outage');
    await rig.until(async () => expect((await getJson(`${url}/readyz`)).status).toBe(200), 30_000);
    const w = workload(rig);
    await w.customer('o0');
    await rig.until(() => expect(rig.events('customer-o0')).toHaveLength(1));
    const before = (await scrape(url)).value('event_assembler_slot_retained_wal_bytes')!;

    await rig.kdb.stop();
    for (let i = 1; i <= 30; i++) await w.customer(`o${i}`);
    await rig.until(async () => {
      const m = await scrape(url);
      expect(m.value('event_assembler_destination_up')).toBe(0);
      expect(m.value('event_assembler_slot_retained_wal_bytes')).toBeGreaterThan(before);
      expect(m.value('event_assembler_freshness_seconds')).toBeGreaterThan(OBSERVABILITY.maxFreshnessMs / 1000);
      expect(m.value('event_assembler_source_lag_seconds')).toBeGreaterThan(0);
      expect(m.value('event_assembler_source_lag_bytes')).toBeGreaterThan(0);
    }, 30_000);
    const peak = (await scrape(url)).value('event_assembler_slot_retained_wal_bytes')!;
    const notReady = await getJson<{ ok: boolean; reasons: string[] }>(`${url}/readyz`);
    expect(notReady.status).toBe(503);
    expect(notReady.body.ok).toBe(false);
    expect(notReady.body.reasons.join('\n')).toMatch(/destination retrying/);
    expect(notReady.body.reasons.join('\n')).toMatch(/freshness .* is above 2\.5 s/);
    expect((await fetch(`${url}/healthz`)).status).toBe(200); // alive, only not ready

    await rig.kdb.start();
    await rig.until(() => expect(rig.events('customer-o30')).toHaveLength(1), 30_000);
    await rig.until(async () => {
      // The walsender moves restart_lsn at the next running-xacts record, which the server writes
      // every 15 s on its own; ask for one now instead of waiting.
      await rig.sql('SELECT pg_log_standby_snapshot()');
      const m = await scrape(url);
      expect(m.value('event_assembler_slot_retained_wal_bytes')).toBeLessThan(peak);
      expect(m.value('event_assembler_destination_up')).toBe(1);
      expect(m.value('event_assembler_freshness_seconds')).toBeLessThan(OBSERVABILITY.maxFreshnessMs / 1000);
    }, 30_000);
    await rig.until(async () => expect((await getJson(`${url}/readyz`)).status).toBe(200), 30_000);
    const m = await scrape(url);
    expect(m.value('event_assembler_append_retries_total')).toBeGreaterThan(0);
    expect(m.value('event_assembler_append_duration_seconds_count')).toBeGreaterThan(0);
    expect(m.value('event_assembler_transactions_received_total')).toBe(31);
  });

  it('counts failed records by mapper and kind when a transaction is parked', async () => {
    const { url } = await start('parked', { mappers: [...mappers, fragilePayments] });
    const before = await scrape(url);
    expect(before.value('event_assembler_failed_records_total', { mapper: 'fragile-payments', kind: 'MapperFailed' })).toBe(0);
    expect(before.value('event_assembler_failed_record_last_timestamp_seconds')).toBeUndefined();
    const startedAt = Date.now() / 1000;
    const w = workload(rig);
    await w.customer('f1');
    await w.draft('fi1', 'f1');
    await w.issue('fi1', 1);
    await w.pay('fi1', 'fpay1');
    await rig.until(async () => {
      const m = await scrape(url);
      expect(m.value('event_assembler_failed_records_total', { mapper: 'fragile-payments', kind: 'MapperFailed' })).toBe(1);
      expect(m.value('event_assembler_failed_records_total', { mapper: 'payments', kind: 'MapperFailed' })).toBe(0);
      expect(m.value('event_assembler_failed_record_last_timestamp_seconds')).toBeGreaterThanOrEqual(Math.floor(startedAt));
    });
    const doc = (await getJson<StatusDocument>(`${url}/status.json`)).body;
    expect(doc.failed.total).toEqual({ MapperFailed: 1, ContractViolation: 0 });
    expect(doc.failed.byMapper).toEqual({ 'fragile-payments': { MapperFailed: 1 } });
  });

  it('stops at start with OBSERVABILITY_LISTEN_FAILED naming the port when it cannot be bound', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as { port: number }).port;
      const slot = await rig.createSlot('taken');
      const assembler = createAssembler(rig.config({ slot, name: 'taken', observability: { port } }), { logger: rig.logger() });
      await expect(assembler.run()).rejects.toMatchObject({ code: 'OBSERVABILITY_LISTEN_FAILED', message: expect.stringContaining(`cannot listen on 127.0.0.1:${port}`) });
      expect(assembler.observability()).toBeNull();
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });

  it('answers 404 on unknown paths, 405 on other methods, and serves the status page with its script and uPlot', async () => {
    const { url } = await start('http');
    expect((await fetch(`${url}/nope`)).status).toBe(404);
    expect((await fetch(`${url}/metrics`, { method: 'POST' })).status).toBe(405);
    const page = await fetch(`${url}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<script src="status-page.js"></script>');
    for (const asset of ['status-page.js', 'uplot.min.js']) {
      const res = await fetch(`${url}/${asset}`);
      expect(res.status, asset).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/javascript');
      expect((await res.text()).length).toBeGreaterThan(1000);
    }
    expect((await fetch(`${url}/uplot.min.css`)).headers.get('content-type')).toContain('text/css');
    const head = await fetch(`${url}/metrics`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toContain('text/plain');
  });
});

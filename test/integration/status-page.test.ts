// The status page in a real browser (headless Chromium from Debian, driven by playwright-core)
// during a live run: the page loads with no script error, its plots hold data points, the numbers
// it shows are those of the /metrics response it rendered, the role badge and the latest failed
// record's diagnosis are the assembler's. The page's /metrics requests go through the test (it
// fetches the real endpoint and hands the body on), so "the response it rendered" is known
// exactly. A screenshot lands in .tmp/status-page.png for a person to look at.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mappers } from '../../examples/invoicing/index.js';
import { createAssembler, type Assembler } from '../../src/pipeline/index.js';
import type { StatusDocument } from '../../src/observability/index.js';
import { getJson, parseMetrics } from '../support/prometheus.js';
import { createPipelineRig, workload, type PipelineRig } from './pipeline-rig.js';
import { fragilePayments } from '../support/fragile-payments.js';

/** Debian's chromium (installed by .ci/run where missing); CHROMIUM_PATH overrides. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';


interface Shown {
  readonly polls: number;
  readonly metrics: Record<string, string>;
  readonly role: string;
  readonly points: { bytes: number; rate: number };
  readonly failed: string;
}

describe('the status page in a browser, during a live run', () => {
  let rig: PipelineRig;
  let assembler: Assembler | null = null;
  let browser: Browser | null = null;

  beforeAll(async () => {
    rig = await createPipelineRig('page', { slots: 0 });
  });
  afterAll(async () => {
    await browser?.close();
    await assembler?.stop();
    await rig?.close();
  });

  it('shows the signals of /metrics, plots that hold data, the role and the latest failed record', { timeout: 120_000 }, async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`chromium not found at ${CHROMIUM}: install the Debian package chromium (.ci/run does) or set CHROMIUM_PATH`);
    const slot = await rig.createSlot('page');
    assembler = createAssembler(
      rig.config({ slot, name: 'page', mappers: [...mappers.filter((m) => m.name !== 'payments'), fragilePayments], observability: { port: 0, heartbeatIntervalMs: 300 } }),
      { logger: rig.logger() },
    );
    const a = assembler;
    void a.run().catch(() => undefined);
    await rig.until(() => expect(a.status()).toMatchObject({ state: 'running', role: 'leader' }));
    const url = a.observability()!.url;

    // A live workload for the whole test: customers, invoices, and a payment that is parked.
    const w = workload(rig);
    let writing = true;
    let n = 0;
    const writer = (async () => {
      while (writing) {
        n++;
        await w.customer(`p${n}`);
        await w.draft(`pi${n}`, `p${n}`);
        if (n === 3) {
          await w.issue('pi3');
          await w.pay('pi3', 'pp3');
        }
      }
    })();

    try {
      mkdirSync(join(process.cwd(), '.tmp'), { recursive: true });
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] });
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      page.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
      // Every /metrics body the page receives, in order: poll k rendered bodies[k - 1].
      const bodies: string[] = [];
      await page.route('**/metrics', async (route) => {
        const response = await route.fetch();
        const body = await response.text();
        bodies.push(body);
        await route.fulfill({ response, body });
      });
      await page.goto(`${url}/`);

      await rig.until(async () => {
        const status = (await getJson<StatusDocument>(`${url}/status.json`)).body;
        expect(status.failed.latest?.mapper).toBe('fragile-payments');
      }, 30_000);
      // Four polls after the parked payment: the latest shown is the one it has.
      const start = Number(await page.evaluate('window.__statusPage.polls'));
      await page.waitForFunction(`window.__statusPage.polls >= ${start + 4}`, undefined, { timeout: 30_000 });

      // A string: the test's TypeScript has no DOM types; this runs in the page.
      const shown: Shown = await page.evaluate(`(() => {
        const metrics = {};
        for (const el of document.querySelectorAll('[data-metric]')) metrics[el.dataset.metric] = el.dataset.value ?? '';
        return {
          polls: window.__statusPage.polls,
          metrics,
          role: document.getElementById('role').textContent,
          points: { bytes: Number(document.getElementById('plot-bytes').dataset.points), rate: Number(document.getElementById('plot-rate').dataset.points) },
          failed: document.getElementById('failed-diagnosis').textContent,
        };
      })()`);
      await page.screenshot({ path: join(process.cwd(), '.tmp', 'status-page.png'), fullPage: true });

      expect(errors).toEqual([]);
      const rendered = parseMetrics(bodies[shown.polls - 1]!);
      const sum = (name: string) => rendered.samples.filter((s) => s.name === name).reduce((a, s) => a + s.value, 0);
      expect(Object.keys(shown.metrics).sort()).toEqual([
        'event_assembler_checkpoint_age_seconds',
        'event_assembler_failed_records_total',
        'event_assembler_freshness_seconds',
        'event_assembler_slot_retained_wal_bytes',
        'event_assembler_source_lag_bytes',
        'event_assembler_source_lag_seconds',
      ]);
      for (const [name, value] of Object.entries(shown.metrics)) {
        const present = rendered.samples.some((s) => s.name === name);
        expect(value, `${name} on the page`).toBe(present ? String(sum(name)) : '');
      }
      expect(Number(shown.metrics['event_assembler_failed_records_total'])).toBeGreaterThanOrEqual(1);
      expect(Number(shown.metrics['event_assembler_slot_retained_wal_bytes'])).toBeGreaterThan(0);
      expect(shown.role).toBe(rendered.value('event_assembler_role', { role: 'leader' }) === 1 ? 'leader' : 'standby');
      expect(shown.role).toBe('leader');
      // Plots: a point per poll (bytes) and per pair of polls (rates), at least.
      expect(shown.points.bytes).toBeGreaterThanOrEqual(4);
      expect(shown.points.rate).toBeGreaterThanOrEqual(3);
      expect(shown.failed).toContain('MapperFailed from mapper fragile-payments');
      expect(shown.failed).toContain('Error: cannot map payment pp3');

      // /history.json: the page's last hour, sampled by the assembler every 5 s.
      type History = { intervalMs: number; times: number[]; series: Record<string, (number | null)[]> };
      let history: History | null = null;
      await rig.until(async () => {
        history = (await getJson<History>(`${url}/history.json`)).body;
        expect(history.times.length).toBeGreaterThanOrEqual(2);
      }, 20_000);
      const h = history! as History;
      expect(h.intervalMs).toBe(5_000);
      for (const values of Object.values(h.series)) expect(values).toHaveLength(h.times.length);
      expect(h.series['event_assembler_slot_retained_wal_bytes']!.every((v) => typeof v === 'number' && v > 0)).toBe(true);
      expect(h.series['event_assembler_transactions_appended_total']!.at(-1)).toBeGreaterThan(0);
    } finally {
      writing = false;
      await writer;
    }
  });
});

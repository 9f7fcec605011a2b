// `event-assembler run` at the edges of its life, as an operator meets them (issue 13):
// - a stop while KurrentDB or PostgreSQL is unreachable at start-up ends the wait at once (exit 0);
// - both servers are waited for with one policy: a log line per attempt naming the server, its
//   address and the reason; `lifecycle.startupTimeoutMs` ends the wait with exit 4;
// - a stop during a destination outage mid-run drains for `lifecycle.drainTimeoutMs`, then exits 0
//   without acknowledging what is not durable — and the next run appends it, every event once.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareLsn } from '../../src/source/position.js';
import { createPipelineRig, rigEnv, startCli, workload, writeRigConfig, type CliProcess, type PipelineRig } from './pipeline-rig.js';

/** A local port nothing listens on (bound, then released). */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const messages = (cli: CliProcess): unknown[] => cli.lines().map((l) => l['msg']);

describe('event-assembler run: start-up waits and stop deadlines', () => {
  let rig: PipelineRig;
  let dir: string;
  beforeAll(async () => {
    rig = await createPipelineRig('lifecycle', { slots: 1 });
    dir = mkdtempSync(join(tmpdir(), 'ea-lifecycle-'));
  });
  afterAll(async () => {
    await rig?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function config(name: string, lifecycle?: string): string {
    return writeRigConfig(dir, rig, { name: 'lifecycle', file: `${name}.config.ts`, envPrefix: 'EA_LC', ...(lifecycle ? { lifecycle } : {}) });
  }

  it('a SIGTERM while KurrentDB is unreachable at start-up ends the wait at once: exit 0', async () => {
    await rig.kdb.stop();
    const cli = startCli(['run', '--config', config('kdb-down')], rigEnv(rig, 'EA_LC'));
    try {
      await rig.until(() => expect(messages(cli)).toContain('kurrentdb sink: destination unavailable, retrying'), 30_000);
      const retry = cli.lines().find((l) => l['msg'] === 'kurrentdb sink: destination unavailable, retrying')!;
      expect(retry).toMatchObject({ server: 'KurrentDB', address: new URL(rig.kdb.connectionString.replace('kurrentdb', 'http')).host });
      const signalled = Date.now();
      cli.child.kill('SIGTERM');
      expect(await cli.exit(10_000)).toBe(0);
      expect(Date.now() - signalled).toBeLessThan(5_000);
      expect(messages(cli)).toContain('assembler stopped');
    } finally {
      if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
      await rig.kdb.start();
    }
  });

  it('KurrentDB unreachable past lifecycle.startupTimeoutMs: DESTINATION_UNAVAILABLE, exit 4', async () => {
    await rig.kdb.stop();
    const cli = startCli(['run', '--config', config('kdb-deadline', '{ startupTimeoutMs: 1500 }')], rigEnv(rig, 'EA_LC'));
    try {
      expect(await cli.exit(30_000)).toBe(4);
      const fatal = cli.lines().find((l) => l['msg'] === 'assembler: fatal error, stopping');
      expect(fatal).toMatchObject({ error: { code: 'DESTINATION_UNAVAILABLE' } });
      expect(String((fatal!['error'] as { message: string }).message)).toMatch(/^KurrentDB at \S+ stayed unreachable for \d+ ms of start-up/);
    } finally {
      if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
      await rig.kdb.start();
    }
  });

  it('PostgreSQL unreachable at start-up is waited for like KurrentDB (a line per attempt), a SIGTERM ends it with exit 0, a deadline with exit 4', async () => {
    const port = await deadPort();
    const env = { ...rigEnv(rig, 'EA_LC'), EA_LC_CAPTURE_URL: `postgres://capture:not-logged@127.0.0.1:${port}/nowhere` };
    const waiting = startCli(['run', '--config', config('pg-down')], env);
    try {
      await rig.until(() => expect(cli2attempts(waiting)).toBeGreaterThanOrEqual(2), 30_000);
      const line = waiting.lines().find((l) => l['msg'] === 'start-up: PostgreSQL unreachable, retrying')!;
      expect(line).toMatchObject({ server: 'PostgreSQL', address: `127.0.0.1:${port}` });
      expect(String(line['reason'])).toContain('ECONNREFUSED');
      waiting.child.kill('SIGTERM');
      expect(await waiting.exit(10_000)).toBe(0);
      expect(waiting.output()).not.toContain('unexpected error');
      expect(waiting.output()).not.toContain('not-logged');
    } finally {
      if (waiting.child.exitCode === null) waiting.child.kill('SIGKILL');
    }
    const deadline = startCli(['run', '--config', config('pg-deadline', '{ startupTimeoutMs: 1500 }')], env);
    try {
      expect(await deadline.exit(30_000)).toBe(4);
      expect(deadline.lines().find((l) => l['msg'] === 'assembler: fatal error, stopping')).toMatchObject({ error: { code: 'SOURCE_UNAVAILABLE' } });
      expect(deadline.output()).not.toContain('unexpected error');
    } finally {
      if (deadline.child.exitCode === null) deadline.child.kill('SIGKILL');
    }
  });

  it('a SIGTERM during a destination outage mid-run exits 0 after lifecycle.drainTimeoutMs, acknowledges nothing undurable, and the next run lands it once', async () => {
    const file = config('outage', '{ drainTimeoutMs: 1500 }');
    const w = workload(rig);
    const first = startCli(['run', '--config', file], rigEnv(rig, 'EA_LC'));
    let acknowledgedBefore: string;
    let beforeOutage: string;
    try {
      await rig.until(() => expect(messages(first)).toContain('assembler started'), 30_000);
      await w.customer('o1');
      await rig.until(() => expect(rig.events('customer-o1')).toHaveLength(1));
      await rig.until(async () => expect(compareLsn((await rig.slot(rig.slots[0]!)).confirmed_flush_lsn, '0/0')).toBeGreaterThan(0));
      await rig.kdb.stop();
      // Everything before this point may be acknowledged (o1, and keepalive positions recorded
      // while idle, which the slot may learn of a status interval later); nothing after it.
      beforeOutage = await rig.currentWalLsn();
      await w.customer('o2');
      await w.draft('oi2', 'o2');
      await rig.until(() => expect(messages(first)).toContain('kurrentdb sink: destination unavailable, retrying'), 30_000);
      acknowledgedBefore = (await rig.slot(rig.slots[0]!)).confirmed_flush_lsn;
      const signalled = Date.now();
      first.child.kill('SIGTERM');
      expect(await first.exit(15_000)).toBe(0);
      const took = Date.now() - signalled;
      expect(took).toBeGreaterThanOrEqual(1_400);
      expect(took).toBeLessThan(8_000);
    } finally {
      if (first.child.exitCode === null) first.child.kill('SIGKILL');
      await rig.kdb.start();
    }
    expect(messages(first)).toContain('stop: in-flight appends did not become durable within lifecycle.drainTimeoutMs; they are not acknowledged (the slot sends them again on the next start)');
    expect(first.lines().find((l) => l['msg'] === 'assembler stopped')).toMatchObject({ abandonedInFlight: true });
    // Nothing written during the outage was acknowledged, and nothing acknowledged was taken back.
    const confirmed = (await rig.slot(rig.slots[0]!)).confirmed_flush_lsn;
    expect(compareLsn(confirmed, beforeOutage!)).toBeLessThanOrEqual(0);
    expect(compareLsn(confirmed, acknowledgedBefore!)).toBeGreaterThanOrEqual(0);

    const second = startCli(['run', '--config', file], rigEnv(rig, 'EA_LC'));
    try {
      await rig.until(() => {
        expect(rig.events('customer-o2').map((e) => e.type)).toEqual(['CustomerRegistered']);
        expect(rig.events('invoice-oi2').map((e) => e.type)).toEqual(['InvoiceDrafted']);
      }, 30_000);
      second.child.kill('SIGTERM');
      expect(await second.exit(15_000)).toBe(0);
    } finally {
      if (second.child.exitCode === null) second.child.kill('SIGKILL');
    }
    // Every event exactly once: no id twice in any stream the run wrote.
    for (const stream of ['customer-o1', 'customer-o2', 'invoice-oi2']) {
      const events = rig.events(stream);
      expect(events, stream).toHaveLength(1);
    }
  });
});

function cli2attempts(cli: CliProcess): number {
  return cli.lines().filter((l) => l['msg'] === 'start-up: PostgreSQL unreachable, retrying').length;
}

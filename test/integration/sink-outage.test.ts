// The KurrentDB sink when the destination is unavailable: injected failures, a stopped server,
// a write that lands while its answer is lost. Retries keep order, lose nothing, duplicate nothing.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { createKurrentDBSink, checkpointStreamName, type KurrentDBSink, type KurrentDBSinkOptions, type SinkBatch } from '../../src/sink/index.js';
import { uuidv5 } from '../../src/sink/encoding.js';
import { backoffDelay, isTransientError } from '../../src/sink/retry.js';
import { useInMemoryKurrentDB, type LogLine } from '../support/kurrentdb-rig.js';

const { cleanups, server } = useInMemoryKurrentDB();

function options(db: InMemoryKurrentDB, assembler: string, logs: LogLine[], extra: Partial<KurrentDBSinkOptions> = {}): KurrentDBSinkOptions {
  return {
    connectionString: db.connectionString,
    assembler,
    retry: { initialDelayMs: 10, maxDelayMs: 100 },
    logger: {
      info: (message, fields) => logs.push({ level: 'info', message, fields }),
      warn: (message, fields) => logs.push({ level: 'warn', message, fields }),
    },
    ...extra,
  };
}

async function sink(db: InMemoryKurrentDB, assembler: string, logs: LogLine[] = [], extra: Partial<KurrentDBSinkOptions> = {}): Promise<KurrentDBSink> {
  const created = await createKurrentDBSink(options(db, assembler, logs, extra));
  cleanups.push(() => created.close());
  return created;
}

/** Polls `condition` until it holds or the deadline passes. */
async function waitFor(what: string, condition: () => boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function tx(scope: string, n: number, streams: readonly string[]): SinkBatch {
  const commitLsn = `0/${(0x20000 + n * 0x100).toString(16).toUpperCase()}`;
  const xid = 900 + n;
  return {
    position: { checkpoint: `v1:1:1:slot_b:${commitLsn}:${xid}`, commitLsn, xid },
    events: streams.map((stream, index) => ({
      id: uuidv5(JSON.stringify([scope, n, index])),
      stream,
      type: 'Happened',
      data: { n, index },
      metadata: { 'transaction.index': String(index), 'transaction.count': String(streams.length) },
    })),
  };
}

function ids(db: InMemoryKurrentDB, stream: string): string[] {
  return db.readStreamEvents(stream).map((event) => event.id);
}

describe.each([
  { mode: 'multi-stream' as const, path: 'AppendSession', features: { multiStreamAppend: true } },
  { mode: 'per-stream' as const, path: 'BatchAppend', features: { multiStreamAppend: false } },
  { mode: 'per-stream' as const, path: 'Append', features: { multiStreamAppend: false, batchAppend: false } },
])('KurrentDB sink outages, $mode mode ($path)', ({ mode, features }) => {
  it('retries injected UNAVAILABLE failures (failNextAppends(3)) and appends once', async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const [a, b] = [`a-${id}`, `b-${id}`];
    const logs: LogLine[] = [];
    const s = await sink(db, `asm_${id}`, logs);
    expect(s.mode).toBe(mode);
    await s.append(tx(id, 1, [a, b]));

    // Three failed attempts. In multi-stream mode an attempt is two server appends: the
    // hand-framed request, whose failure shows no error, and the node:http2 request sent after it.
    db.failNextAppends(mode === 'multi-stream' ? 6 : 3);
    const batch = tx(id, 2, [a, b, a]);
    const outcome = await s.append(batch);

    expect(outcome).toMatchObject({ appended: 3, skipped: 0, checkpoint: 'appended' });
    const status = s.status();
    expect(status.retries).toBe(3);
    expect(status).toMatchObject({ state: 'connected', attempts: 0, lastError: { code: 'unavailable' } });
    expect(status.lastError?.message).toContain('injected');
    expect(logs.filter((line) => line.level === 'warn' && line.message.includes('retrying'))).toHaveLength(3);
    expect(ids(db, a)).toEqual([tx(id, 1, [a, b]).events[0]!.id, batch.events[0]!.id, batch.events[2]!.id]);
    expect(ids(db, b)).toHaveLength(2);
    expect(ids(db, checkpointStreamName(`asm_${id}`))).toHaveLength(2);
  });

  it('waits while the server is stopped, then appends once it is back', async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const [a, b] = [`a-${id}`, `b-${id}`];
    const s = await sink(db, `asm_${id}`);
    const first = tx(id, 1, [a, b]);
    await s.append(first);

    await db.stop();
    const second = tx(id, 2, [b, a]);
    const pending = s.append(second);
    await waitFor('the sink to retry against the stopped server', () => s.status().state === 'retrying' && s.status().attempts >= 2);
    expect(ids(db, a)).toHaveLength(1); // the store is reachable in-process even while the server is down
    await db.start();
    const outcome = await pending;

    expect(outcome).toMatchObject({ appended: 2, skipped: 0, checkpoint: 'appended' });
    expect(s.status()).toMatchObject({ state: 'connected', attempts: 0 });
    expect(s.status().retries).toBeGreaterThanOrEqual(2);
    expect(ids(db, a)).toEqual([first.events[0]!.id, second.events[1]!.id]);
    expect(ids(db, b)).toEqual([first.events[1]!.id, second.events[0]!.id]);

    // Replaying both after the outage adds nothing.
    expect(await s.append(first)).toMatchObject({ appended: 0, skipped: 2 });
    expect(await s.append(second)).toMatchObject({ appended: 0, skipped: 2 });
    expect(ids(db, a)).toHaveLength(2);
  });

  it('does not duplicate a write that landed after its call timed out (revision-checked idempotency on retry)', async () => {
    const db = await server({ features });
    const id = randomUUID().slice(0, 8);
    const [a, b] = [`a-${id}`, `b-${id}`];
    const assembler = `asm_${id}`;
    const logs: LogLine[] = [];
    const s = await sink(db, assembler, logs, { timeoutMs: 300 });
    const first = tx(id, 1, [a, b]);
    await s.append(first);

    // The server takes longer than the sink waits: every attempt times out, yet each is applied later.
    db.setAppendLatency(1_500);
    const batch = tx(id, 2, [a, b]);
    const pending = s.append(batch);
    await waitFor('the append to time out and be retried', () => s.status().state === 'retrying');
    await waitFor('the timed-out write to be applied', () => ids(db, a).length === 2);
    // A restart forgets the weak idempotency cache: only the revision-checked kind can help now.
    await db.restart();
    db.setAppendLatency(0);
    const outcome = await pending;

    expect(outcome).toMatchObject({ appended: 2, skipped: 0, checkpoint: 'appended' });
    expect(logs.some((line) => line.level === 'warn' && String(line.fields?.['error']).includes('no answer within 300 ms'))).toBe(true);
    expect(ids(db, a)).toEqual([first.events[0]!.id, batch.events[0]!.id]);
    expect(ids(db, b)).toEqual([first.events[1]!.id, batch.events[1]!.id]);
    expect(ids(db, checkpointStreamName(assembler))).toHaveLength(2);
    expect(await s.append(batch)).toMatchObject({ appended: 0, skipped: 2 });
  });
});

describe('KurrentDB sink start-up and limits on retrying', () => {
  it('waits for an unavailable server at start-up', async () => {
    const db = await server();
    await db.stop();
    const logs: LogLine[] = [];
    const starting = createKurrentDBSink(options(db, 'asm_startup', logs));
    await waitFor('a retry warning at start-up', () => logs.some((line) => line.level === 'warn' && line.fields?.['operation'] === 'detect-server-features'));
    await db.start();
    const s = await starting;
    cleanups.push(() => s.close());
    expect(s.mode).toBe('multi-stream');
    expect(logs.find((line) => line.message === 'kurrentdb sink started')?.fields).toMatchObject({ mode: 'multi-stream' });
  });

  it('waits out an outage while reading a stream\'s tail on first touch (native read path)', async () => {
    const db = await server();
    const id = randomUUID().slice(0, 8);
    const logs: LogLine[] = [];
    const s = await sink(db, `asm_${id}`, logs);
    await db.stop();
    const pending = s.append(tx(id, 1, [`a-${id}`]));
    await waitFor('a retried tail read', () => logs.some((line) => line.level === 'warn' && line.fields?.['operation'] === 'read-tail'));
    await db.start();
    expect(await pending).toMatchObject({ appended: 1 });
    expect(ids(db, `a-${id}`)).toHaveLength(1);
  });

  it('gives up after maxAttempts with a stable code, and works again afterwards', async () => {
    const db = await server({ features: { multiStreamAppend: false } });
    const id = randomUUID().slice(0, 8);
    const s = await sink(db, `asm_${id}`, [], { retry: { initialDelayMs: 5, maxDelayMs: 20, maxAttempts: 2 } });
    db.failNextAppends(2, 'internal');
    const batch = tx(id, 1, [`a-${id}`]);
    await expect(s.append(batch)).rejects.toMatchObject({ code: 'SINK_RETRIES_EXHAUSTED', details: { attempts: 2, stream: `a-${id}` } });
    expect(ids(db, `a-${id}`)).toHaveLength(0);
    expect(await s.append(batch)).toMatchObject({ appended: 1 });
    expect(ids(db, `a-${id}`)).toHaveLength(1);
  });

  it('close() ends a call that is waiting out an outage', async () => {
    const db = await server();
    const id = randomUUID().slice(0, 8);
    const s = await createKurrentDBSink(options(db, `asm_${id}`, []));
    await db.stop();
    const pending = s.append(tx(id, 1, [`a-${id}`]));
    await waitFor('the sink to retry', () => s.status().state === 'retrying');
    const closing = s.close();
    await expect(pending).rejects.toMatchObject({ code: 'SINK_CLOSED' });
    await closing;
    expect(s.status().state).toBe('closed');
  });
});

describe('retry policy', () => {
  it('backs off exponentially with equal jitter, capped', () => {
    const policy = { initialDelayMs: 100, maxDelayMs: 1_000 };
    expect([1, 2, 3, 4, 5].map((attempt) => backoffDelay(policy, attempt, () => 0))).toEqual([50, 100, 200, 400, 500]);
    expect([1, 2, 3, 4, 5].map((attempt) => backoffDelay(policy, attempt, () => 1))).toEqual([100, 200, 400, 800, 1_000]);
  });

  it('retries outages and timeouts, not answers', () => {
    expect(isTransientError({ type: 'unavailable' })).toBe(true);
    expect(isTransientError({ type: 'deadline-exceeded' })).toBe(true);
    expect(isTransientError({ code: 14, message: '14 UNAVAILABLE: No connection established' })).toBe(true);
    expect(isTransientError(new Error('connect ECONNREFUSED 127.0.0.1:2113'))).toBe(true);
    expect(isTransientError({ type: 'unknown', code: 2, details: 'client error (Connect)' })).toBe(true);
    expect(isTransientError({ type: 'wrong-expected-version', code: 14 })).toBe(false);
    expect(isTransientError({ type: 'maximum-append-size-exceeded' })).toBe(false);
    expect(isTransientError({ type: 'unknown', code: 12, message: 'UNIMPLEMENTED' })).toBe(false);
    expect(isTransientError(new TypeError('x is not a function'))).toBe(false);
  });
});

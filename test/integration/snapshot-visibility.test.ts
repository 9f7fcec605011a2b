// The visibility gap of incremental snapshots, made deterministic with PostgreSQL itself: a
// transaction that waits for a synchronous standby that does not exist is committed in the WAL
// (the stream delivers it) but stays invisible to new snapshots until its wait ends. A chunk
// SELECT in that state reads the row's old version; the window must not emit it after the
// streamed change. Own server (synchronous_standby_names = 'ghost'; every other session commits
// with synchronous_commit = local, only the "stalled" session asks for remote_write).
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createPostgresSource, type PostgresSource } from '../../src/source/index.js';
import { setupCapture } from '../../src/source/setup.js';
import {
  createIncrementalSnapshot, createMemoryProgressStore, createReplayModel, invisibleTo, newSnapshotProgress,
  type ChunkSnapshot, type ChunkSummary, type IncrementalSnapshot,
} from '../../src/source/snapshot/index.js';
import type { Change, SnapshotRecord } from '../../src/source/types.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/testing/postgres.js';

type Applied = SnapshotRecord | Change;

describe('incremental snapshot across the commit-to-visibility gap (own server)', () => {
  let server: EmbeddedPostgres;
  const clients: pg.Client[] = [];
  const sources: PostgresSource[] = [];
  const snapshots: IncrementalSnapshot[] = [];
  const role = 'capture_visibility';

  beforeAll(async () => {
    server = await startEmbeddedPostgres({ parameters: { synchronous_standby_names: 'ghost', synchronous_commit: 'local' } });
    await server.createDatabase('vis');
    await server.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${server.password}'`);
  });

  afterAll(async () => {
    for (const s of snapshots) await s.close();
    for (const s of sources) await s.close();
    for (const c of clients) await c.end().catch(() => undefined);
    await server?.destroy();
  });

  const q = <R = Record<string, unknown>>(sql: string, params?: unknown[]) => server.query<R>(sql, params, { database: 'vis' });

  /** Starts `sql` in a session that waits for the (missing) synchronous standby after committing; resolves once it waits. */
  async function stalled(sql: string, params: unknown[]) {
    const c = new pg.Client(server.connectionConfig({ database: 'vis' }));
    c.on('error', () => undefined);
    clients.push(c);
    await c.connect();
    const [{ pid }] = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
    await c.query(`SET synchronous_commit = 'remote_write'`);
    const done = c.query(sql, params);
    let xid = 0;
    await vi.waitFor(async () => {
      const [a] = await q<{ wait_event: string | null; backend_xid: string | null }>('SELECT wait_event, backend_xid FROM pg_stat_activity WHERE pid = $1', [pid]);
      if (a?.wait_event !== 'SyncRep') throw new Error(`not yet waiting for the standby: ${JSON.stringify(a)}`);
      xid = Number(a.backend_xid);
    }, { timeout: 20_000, interval: 20 });
    let released: Promise<unknown> | null = null;
    return {
      xid,
      /** Ends the wait (PostgreSQL keeps the commit, warns, and the transaction becomes visible). Idempotent. */
      release() {
        released ??= q('SELECT pg_cancel_backend($1)', [pid]).then(() => done);
        return released;
      },
    };
  }

  async function prepare(name: string) {
    const table = `public.${name}`;
    await q(`CREATE TABLE ${table} (id int PRIMARY KEY, version int NOT NULL)`);
    await q(`INSERT INTO ${table} SELECT i, 1 FROM generate_series(1, 200) i`);
    await q(`GRANT SELECT ON ${table} TO ${role}`);
    await setupCapture({ connection: server.connectionConfig({ database: 'vis' }), publication: `pub_${name}`, slot: `slot_${name}`, tables: [table] });
    const capture = server.connectionConfig({ database: 'vis', user: role });
    const source = createPostgresSource({ connection: capture, slot: `slot_${name}`, publication: `pub_${name}`, tables: [table], statusIntervalMs: 1_000 });
    sources.push(source);
    await source.start();
    return { table, capture, source };
  }

  /** Stream → window → `applied`; returns a waiter for a predicate on what arrived. */
  function drive(source: PostgresSource, snapshot: IncrementalSnapshot, applied: Applied[]) {
    let error: unknown = null;
    void (async () => {
      try {
        for await (const tx of source.transactions()) {
          const changes = await tx.toArray();
          for (const out of snapshot.window.accept(tx, changes)) {
            if (out.kind === 'transaction') applied.push(...changes);
            else if (out.kind === 'snapshot') applied.push(out.record);
            else await snapshot.chunkDurable(out.chunk);
          }
          source.acknowledge(tx);
          await tx.release();
        }
      } catch (e) {
        error = e;
      }
    })();
    return (predicate: () => boolean, what: string) => vi.waitFor(() => {
      if (error) throw new Error(`stream failed: ${String(error)}`);
      if (!predicate()) throw new Error(`waiting for ${what}`);
    }, { timeout: 30_000, interval: 20 });
  }

  function finalCheck(applied: Applied[], table: string, actual: { id: number; version: number }[]) {
    const model = createReplayModel();
    const last = new Map<number, number>();
    const stale: string[] = [];
    for (const a of applied) {
      if ('kind' in a) {
        const id = a.change.key.id as number;
        const v = a.change.after.version as number;
        if ((last.get(id) ?? 0) > v) stale.push(`read of ${id} v${v} after its change to v${last.get(id)}`);
      } else if ((a.op === 'insert' || a.op === 'update') && a.table === table) {
        last.set(a.after.id as number, a.after.version as number);
      }
      model.apply(a);
    }
    expect(stale).toEqual([]);
    expect(model.rows(table).map((r) => ({ id: r.id as number, version: r.version as number })).sort((a, b) => a.id - b.id)).toEqual(actual);
  }

  it('drops a chunk row changed by a transaction that committed before the low watermark but was still invisible to the SELECT', async () => {
    const { table, capture, source } = await prepare('gap');
    const applied: Applied[] = [];
    let stall: Awaited<ReturnType<typeof stalled>> | undefined;
    const summaries: ChunkSummary[] = [];
    let chunk2Snapshot: ChunkSnapshot | undefined;
    const snapshot = createIncrementalSnapshot({
      connection: capture, chunkSize: 50, store: createMemoryProgressStore(),
      progress: newSnapshotProgress({ generation: '1', kind: 'ad_hoc', mode: 'ad_hoc', tables: [table], reason: 'test' }),
      onProgress: (_p, c) => summaries.push(c),
      async onChunkSelected(chunk) {
        // Chunk 1 (ids 1-50) is selected: commit an update of id 60 (chunk 2) that stays invisible.
        if (chunk.rows[0]?.key.id === 1) stall = await stalled(`UPDATE ${table} SET version = 2 WHERE id = 60`, []);
        if (chunk.rows[0]?.key.id === 51) {
          chunk2Snapshot = chunk.snapshot;
          expect(chunk.rows.find((r) => r.key.id === 60)?.after.version).toBe(1); // the SELECT missed the commit
        }
      },
    });
    snapshots.push(snapshot);
    const until = drive(source, snapshot, applied);
    try {
      await snapshot.run();
    } finally {
      await stall?.release(); // never leave it waiting: it would block the next test's chunks
    }
    expect(stall).toBeDefined();
    expect(invisibleTo(chunk2Snapshot!, stall!.xid)).toBe(true);
    // The stream delivered the update before chunk 2's window; chunk 2 left row 60 to it.
    expect(summaries.find((s) => s.lastKey?.[0] === '100')).toMatchObject({ selected: 50, emitted: 49, superseded: 1, retry: false });
    await q(`SELECT pg_logical_emit_message(true, 'test.end', '')`);
    await until(() => applied.some((a) => !('kind' in a) && a.op === 'message' && a.prefix === 'test.end'), 'the end marker');
    finalCheck(applied, table, await q<{ id: number; version: number }>(`SELECT id, version FROM ${table} ORDER BY id`));
  });

  it('re-reads a chunk while an older transaction is still invisible, and places it once it is visible', async () => {
    const { table, capture, source } = await prepare('retry');
    const applied: Applied[] = [];
    const snapshot = createIncrementalSnapshot({
      connection: capture, chunkSize: 50, store: createMemoryProgressStore(), retryDelayMs: 20,
      progress: newSnapshotProgress({ generation: '1', kind: 'ad_hoc', mode: 'ad_hoc', tables: [table], reason: 'test' }),
      onRetry(chunk, attempt) {
        retries.push({ blockedBy: chunk.blockedBy, attempt });
        if (attempt === 2) void stall.release();
      },
    });
    snapshots.push(snapshot);
    const retries: { blockedBy: readonly number[]; attempt: number }[] = [];
    const until = drive(source, snapshot, applied);
    // Committed (and streamed) before the snapshot run even starts, invisible until released.
    const stall = await stalled(`UPDATE ${table} SET version = 2 WHERE id = 7`, []);
    await until(() => applied.some((a) => !('kind' in a) && a.op === 'update' && a.after.id === 7), 'the stalled update in the stream');
    try {
      await snapshot.run();
    } finally {
      await stall.release();
    }
    expect(retries.length).toBeGreaterThanOrEqual(2);
    expect(retries[0]!.blockedBy).toContain(stall.xid);
    await q(`SELECT pg_logical_emit_message(true, 'test.end', '')`);
    await until(() => applied.some((a) => !('kind' in a) && a.op === 'message' && a.prefix === 'test.end'), 'the end marker');
    finalCheck(applied, table, await q<{ id: number; version: number }>(`SELECT id, version FROM ${table} ORDER BY id`));
    const read7 = applied.filter((a): a is SnapshotRecord => 'kind' in a && a.change.key.id === 7);
    expect(read7.map((r) => r.change.after.version)).toEqual([2]);
  });
});

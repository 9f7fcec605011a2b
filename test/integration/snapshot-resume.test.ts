// An initial snapshot killed mid-read (SIGKILL of the process running it) resumes from its
// saved progress: the exported snapshot died with the process, so the rest is read
// incrementally with watermarks while streaming from the slot's consistent point — same
// generation, no gap. Replaying what was delivered before the kill, then what the resumed
// run passes on, reproduces the table; a concurrent writer runs throughout.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createPostgresSource, type PostgresSource } from '../../src/source/index.js';
import { setupCapture } from '../../src/source/setup.js';
import {
  createFileProgressStore, createIncrementalSnapshot, createReplayModel, decideSnapshot, type IncrementalSnapshot, type SnapshotProgress,
} from '../../src/source/snapshot/index.js';
import type { Change, SnapshotRecord } from '../../src/source/types.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { dropRole } from '../support/roles.js';

const ROWS = 40_000;
const snapshotModule = fileURLToPath(new URL('../../src/source/snapshot/index.ts', import.meta.url));

// Runs in the child: the initial snapshot, delivering each batch as JSON lines (fsync'd)
// before its progress is saved, slowed down so the parent can kill it midway.
const CHILD = `
import { promises as fs } from 'node:fs';
const { runInitialSnapshot, createFileProgressStore } = await import(process.env.SNAPSHOT_MODULE);
const cfg = JSON.parse(process.env.SNAPSHOT_CONFIG);
const out = await fs.open(cfg.delivered, 'a');
await runInitialSnapshot({
  connection: cfg.connection, slot: cfg.slot, tables: cfg.tables, snapshotGeneration: '1',
  store: createFileProgressStore(cfg.progress), batchRows: 500, progressEveryRows: 500,
  async deliver(batch) {
    await out.write(batch.records.map((r) => JSON.stringify(r) + '\\n').join(''));
    await out.sync();
    await new Promise((r) => setTimeout(r, 15));
  },
});
console.log('finished');
`;

describe('interrupted initial snapshot (SIGKILL) resumes incrementally', () => {
  let db: TestDatabase;
  let role: string;
  let dir: string;
  let source: PostgresSource | undefined;
  let snapshot: IncrementalSnapshot | undefined;
  let writerStop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    db = await createTestDatabase(inject('postgres'), 'snapshot_resume');
    role = `cap_${db.database}`.slice(0, 63);
    await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${inject('postgres').password}'`);
    dir = await mkdtemp(path.join(os.tmpdir(), 'snapshot-resume-'));
  });

  afterAll(async () => {
    await writerStop?.().catch(() => undefined);
    await snapshot?.close();
    await source?.close();
    await db?.drop();
    await dropRole(role);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('kills the snapshot process midway, decides resume-snapshot, finishes incrementally, and the replay equals the table', async () => {
    const tables = ['public.item', 'public.other'];
    await db.query(`CREATE TABLE public.item (id int PRIMARY KEY, version int NOT NULL, payload text NOT NULL)`);
    await db.query(`CREATE TABLE public.other (id int PRIMARY KEY, version int NOT NULL, payload text NOT NULL)`);
    await db.query(`INSERT INTO public.item SELECT i, 1, md5(i::text) FROM generate_series(1, ${ROWS}) i`);
    await db.query(`INSERT INTO public.other SELECT i, 1, md5(i::text) FROM generate_series(1, 3000) i`);
    await db.query(`ANALYZE public.item; ANALYZE public.other`);
    await db.query(`GRANT SELECT ON public.item, public.other TO ${role}`);
    await setupCapture({ connection: db.connectionConfig(), publication: 'pub_resume', slot: 'snap_resume', tables, createSlot: false });
    const capture = db.connectionConfig({ user: role });

    // Concurrent writer (superuser): updates, deletes, inserts on public.item.
    let stop = false;
    let ops = 0;
    const writing = (async () => {
      const c = new pg.Client(db.connectionConfig());
      await c.connect();
      let nextId = 1_000_000;
      try {
        while (!stop) {
          const r = Math.random();
          const target = 1 + Math.floor(Math.random() * ROWS);
          if (r < 0.3) await c.query(`INSERT INTO public.item VALUES ($1, 1, md5(random()::text))`, [nextId++]);
          else if (r < 0.8) await c.query(`UPDATE public.item SET version = version + 1, payload = md5(random()::text) WHERE id = $1`, [target]);
          else await c.query(`DELETE FROM public.item WHERE id = $1`, [target]);
          ops++;
          await new Promise((res) => setTimeout(res, 2));
        }
      } finally {
        await c.end().catch(() => undefined);
      }
    })();
    writerStop = async () => { stop = true; await writing; };

    // Run 1 in a child process, killed with SIGKILL once some progress is durable.
    const progressFile = path.join(dir, 'progress.json');
    const delivered = path.join(dir, 'delivered.jsonl');
    const store = createFileProgressStore(progressFile);
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD], {
      env: { ...process.env, SNAPSHOT_MODULE: snapshotModule, SNAPSHOT_CONFIG: JSON.stringify({ connection: capture, slot: 'snap_resume', tables, progress: progressFile, delivered }) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let childOutput = '';
    child.stdout.on('data', (d: Buffer) => { childOutput += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { childOutput += d.toString(); });
    const exited = new Promise<NodeJS.Signals | number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ?? code)));
    await vi.waitFor(async () => {
      const p = await store.load().catch(() => null);
      const rows = p?.tables.find((t) => t.table === 'public.item')?.rowsDone ?? 0;
      if (rows < 5_000) throw new Error(`child has ${rows} rows durable; output: ${childOutput}`);
    }, { timeout: 60_000, interval: 20 });
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(childOutput).not.toContain('finished');

    const saved = (await store.load()) as SnapshotProgress;
    const item = saved.tables.find((t) => t.table === 'public.item')!;
    expect(item.status).toBe('running');
    expect(item.rowsDone).toBeLessThan(ROWS);
    expect(saved.tables.find((t) => t.table === 'public.other')!.status).toBe('pending');
    expect(saved).toMatchObject({ kind: 'initial', generation: '1', slot: 'snap_resume' });

    // The kill may land inside a batch's write: its last line is then torn (no newline). That batch
    // was not synced, so its progress was never saved; every line the saved progress counts is whole.
    const lines = (await readFile(delivered, 'utf8')).split('\n');
    const torn = lines.pop()!; // '' when the file ends with a whole line
    const records: SnapshotRecord[] = lines.map((l) => JSON.parse(l) as SnapshotRecord);
    expect(records.length, `whole lines before the torn tail ${JSON.stringify(torn.slice(0, 80))}`).toBeGreaterThanOrEqual(item.rowsDone);

    // Restart: the decision says resume, same generation.
    const [slotRow] = await db.query<{ wal_status: string; confirmed_flush_lsn: string }>(`SELECT wal_status, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'snap_resume'`);
    expect(slotRow?.confirmed_flush_lsn).toBe(saved.consistentPoint);
    const decision = decideSnapshot({ mode: 'initial', storedLsn: null, slot: { exists: true, walStatus: slotRow!.wal_status, confirmedFlushLsn: slotRow!.confirmed_flush_lsn }, progress: saved, lastGeneration: '1' });
    expect(decision).toMatchObject({ action: 'resume-snapshot', generation: '1', code: 'SNAPSHOT_INTERRUPTED' });

    // Run 2: stream from the slot (its consistent point) through the window; read the rest in chunks.
    source = createPostgresSource({ connection: capture, slot: 'snap_resume', publication: 'pub_resume', tables, statusIntervalMs: 1_000 });
    snapshot = createIncrementalSnapshot({ connection: capture, progress: saved, store, chunkSize: 2000 });
    const applied: (SnapshotRecord | Change)[] = [];
    let ended = false;
    const streaming = (async () => {
      for await (const tx of source!.transactions()) {
        const changes = await tx.toArray();
        for (const out of snapshot!.window.accept(tx, changes)) {
          if (out.kind === 'transaction') applied.push(...changes);
          else if (out.kind === 'snapshot') applied.push(out.record);
          else await snapshot!.chunkDurable(out.chunk);
        }
        source!.acknowledge(tx);
        await tx.release();
        if (changes.some((c) => c.op === 'message' && c.prefix === 'test.end')) { ended = true; return; }
      }
    })();
    const final = await snapshot.run();
    await writerStop();
    await db.query(`SELECT pg_logical_emit_message(true, 'test.end', '')`);
    await vi.waitFor(() => { if (!ended) throw new Error(`waiting for the end marker; ${applied.length} applied`); }, { timeout: 60_000, interval: 50 });
    await streaming;
    expect(final.tables.every((t) => t.status === 'done')).toBe(true);
    expect(ops).toBeGreaterThan(50);
    const resumedReads = applied.filter((a): a is SnapshotRecord => 'kind' in a && a.table === 'public.item').map((r) => r.change.key.id as number);
    expect(Math.min(...resumedReads)).toBeGreaterThan(Number(item.lastKey![0]));

    const model = createReplayModel();
    for (const r of records) model.apply(r);
    for (const a of applied) model.apply(a);
    for (const table of tables) {
      const replayed = model.rows(table).map((r) => ({ id: r.id as number, version: r.version as number, payload: r.payload as string })).sort((a, b) => a.id - b.id);
      const actual = await db.query<{ id: number; version: number; payload: string }>(`SELECT id, version, payload FROM ${table} ORDER BY id`);
      expect(replayed).toEqual(actual);
    }
  });
});

import { describe, expect, it } from 'vitest';
import type { CommittedTransaction } from '../../src/buffer/index.js';
import { createSnapshotState, type SnapshotDeps, type SnapshotState } from '../../src/pipeline/snapshot-state.js';
import { routeTransaction } from '../../src/pipeline/transaction-router.js';
import type { ChunkSummary, IncrementalSnapshot, SnapshotProgress, WindowOutput } from '../../src/source/snapshot/index.js';
import type { SnapshotRecord } from '../../src/source/types.js';

// An incremental snapshot's chunk after its high watermark (transaction-router.ts): the chunk's
// records are queued ahead of every later transaction, but the stream does not wait for them to
// be durable — except for a resumed initial snapshot, whose first-change rule reads the saved
// progress. The chunk's progress is saved only once its records are durable, never after a stop,
// and never before the chunk ahead of it (a reader with `readAhead` has two in flight).

const TABLE = 'public.invoice';

function deferred(): { promise: Promise<void>; resolve: () => void; reject: (e: unknown) => void } {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

function record(id: string): SnapshotRecord {
  return { kind: 'snapshot', snapshotGeneration: 'g1', table: TABLE, change: { op: 'read', table: TABLE, after: { id }, key: { id }, snapshotGeneration: 'g1' } };
}

function tx(xid: number, commitLsn: string): CommittedTransaction {
  return {
    xid, commitLsn, changeCount: 1, messageCount: 0, spilled: false, position: { systemId: 'sys' },
    toArray: () => Promise.resolve([]), release: () => Promise.resolve(),
  } as unknown as CommittedTransaction;
}

const chunk: ChunkSummary = { run: 'r', generation: 'g1', table: TABLE, chunk: 2, selected: 2, emitted: 2, superseded: 0, lastKey: ['b'], tableDone: false, retry: false, blockedBy: [] };
/** The chunk after it (a reader with `readAhead`). */
const nextChunk: ChunkSummary = { ...chunk, chunk: 3, lastKey: ['d'] };

function progress(): SnapshotProgress {
  return {
    version: 1, generation: 'g1', kind: 'ad_hoc', mode: 'ad_hoc', slot: null, consistentPoint: null, reason: 'test', startedAt: '', updatedAt: '',
    tables: [{ table: TABLE, status: 'running', lastKey: null, maxKey: ['z'], rowsDone: 0, chunksDone: 0, estimatedRows: 2 }],
  } as unknown as SnapshotProgress;
}

function rig() {
  const events: string[] = [];
  const durable = deferred();
  const nextDurable = deferred();
  const saved = deferred();
  let stopped = false;
  const stop = deferred();
  const failures: unknown[] = [];
  const state: SnapshotState = createSnapshotState();
  state.systemId = 'sys';
  state.store = {
    save: (_progress: SnapshotProgress, pinned: ReadonlyMap<string, unknown>) => {
      events.push(`save pins=${pinned.size}`);
      return Promise.resolve();
    },
  } as unknown as SnapshotState['store'];
  let chunkDurableError: unknown = null;
  const inc = {
    window: {
      accept: (t: { xid: number }): WindowOutput<unknown>[] =>
        t.xid === 10
          ? [{ kind: 'transaction', transaction: t }, { kind: 'snapshot', record: record('a') }, { kind: 'snapshot', record: record('b') }, { kind: 'chunk-complete', chunk }]
          : t.xid === 12
            ? [{ kind: 'transaction', transaction: t }, { kind: 'snapshot', record: record('c') }, { kind: 'snapshot', record: record('d') }, { kind: 'chunk-complete', chunk: nextChunk }]
            : [{ kind: 'transaction', transaction: t }],
    },
    progress,
    chunkDurable: async (summary: ChunkSummary, covered?: readonly string[]) => {
      events.push(`chunkDurable ${summary.chunk} covered=${covered?.length ?? 0} pinned=${state.pinned.size}`);
      if (chunkDurableError) throw chunkDurableError;
      saved.resolve();
    },
  } as unknown as IncrementalSnapshot;
  state.incremental = inc;
  const deps = {
    config: { name: 'a', mappers: [], destination: {} },
    log: { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined },
    control: {
      get stopRequested() {
        return stopped;
      },
      fatal: null,
      fail: (error: unknown) => {
        failures.push(error);
        stopped = true;
        stop.resolve();
      },
      requestStop: () => {
        stopped = true;
        stop.resolve();
      },
      // As RunControl's: once stopped, the promise is not even observed.
      until: <T>(p: Promise<T>) => (stopped ? Promise.resolve('stop' as const) : Promise.race([p, stop.promise.then(() => 'stop' as const)])),
    },
    state,
    handler: {
      handleTransaction: (t: CommittedTransaction) => {
        events.push(`transaction ${t.xid}`);
        return Promise.resolve();
      },
      handleHeartbeat: () => Promise.resolve(),
      mapUnit: (r: SnapshotRecord) => {
        events.push(`map ${(r.change.key as { id: string }).id}`);
        return { events: [], failed: [] };
      },
      handleUnit: (r: SnapshotRecord) => {
        const id = (r.change.key as { id: string }).id;
        events.push(`unit ${id}`);
        return { durable: (id === 'c' || id === 'd' ? nextDurable : durable).promise.then(() => ({ appended: 1, skipped: 0 })) };
      },
    },
    checkpoints: { recordConsistentPoint: () => undefined },
    snapshotDone: () => undefined,
  } as unknown as SnapshotDeps;
  return {
    deps, state, events, durable, nextDurable, saved, failures,
    requestStop: () => deps.control.requestStop(),
    failChunkDurable: (error: unknown) => (chunkDurableError = error),
  };
}

describe('an incremental chunk landing while the stream goes on (transaction-router.ts)', () => {
  it('given a chunk queued after its high watermark, when its records are not yet durable, then the next transaction is handed on, and the progress is saved only once they are', async () => {
    const r = rig();
    await routeTransaction(r.deps, tx(10, '0/10'));
    await routeTransaction(r.deps, tx(11, '0/11'));
    // The pins' save went out first, the records were mapped while it was under way and queued
    // once it was durable; the later transaction came after the chunk's records.
    expect(r.events).toEqual(['transaction 10', 'save pins=2', 'map a', 'map b', 'unit a', 'unit b', 'transaction 11']);
    expect(r.state.pinned.size).toBe(2);
    r.durable.resolve();
    await r.saved.promise;
    await r.state.landing;
    expect(r.events.slice(7)).toEqual(['chunkDurable 2 covered=2 pinned=2']);
    expect(r.state.pinned.size, 'pins dropped once the progress covering them is saved').toBe(0);
    expect(r.state.counts.events).toBe(2);
  });

  it('given two chunks in flight (readAhead), when the second is durable first, then its progress is saved only after the first one\'s', async () => {
    const r = rig();
    await routeTransaction(r.deps, tx(10, '0/10'));
    await routeTransaction(r.deps, tx(12, '0/12'));
    r.nextDurable.resolve();
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(r.events.filter((e) => e.startsWith('chunkDurable')), 'chunk 3 waits for chunk 2').toEqual([]);
    r.durable.resolve();
    await r.state.landing;
    expect(r.events.filter((e) => e.startsWith('chunkDurable'))).toEqual(['chunkDurable 2 covered=2 pinned=4', 'chunkDurable 3 covered=2 pinned=2']);
    expect(r.state.pinned.size).toBe(0);
    expect(r.failures).toEqual([]);
  });

  it('given a resumed initial snapshot (first-change rule), when its chunk is queued, then the stream waits until the chunk is durable and its progress saved', async () => {
    const r = rig();
    r.state.begin = { generation: 'g1', tables: new Map(), readKeys: { has: () => false }, counts: { skippedByChunk: 0 } } as unknown as SnapshotState['begin'];
    let routed = false;
    const routing = (routeTransaction(r.deps, tx(10, '0/10')) ?? Promise.resolve()).then(() => (routed = true));
    for (let i = 0; i < 20 && !r.events.includes('unit b'); i++) await new Promise((resolve) => setImmediate(resolve));
    expect(r.events).toContain('unit b');
    await new Promise((resolve) => setImmediate(resolve));
    expect(routed, 'the transaction loop waits for the chunk').toBe(false);
    r.durable.resolve();
    await routing;
    expect(r.events.at(-1)).toBe('chunkDurable 2 covered=2 pinned=2');
  });

  it('given a stop before the chunk is durable, when its records land afterwards, then no progress save starts (a restart reads the chunk again)', async () => {
    const r = rig();
    await routeTransaction(r.deps, tx(10, '0/10'));
    r.requestStop();
    await r.state.landing;
    r.durable.resolve();
    await new Promise((resolve) => setImmediate(resolve));
    expect(r.events.filter((e) => e.startsWith('chunkDurable'))).toEqual([]);
    expect(r.state.pinned.size, 'the pins stay for the next start').toBe(2);
    expect(r.failures).toEqual([]);
  });

  it('given a stop before the chunk is queued, when its appends then fail (the sinks closed), then nothing fails the run and no rejection goes unhandled', async () => {
    const r = rig();
    r.requestStop();
    await routeTransaction(r.deps, tx(10, '0/10'));
    await r.state.landing;
    r.durable.reject(new Error('sink closed'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(r.events.filter((e) => e.startsWith('chunkDurable'))).toEqual([]);
    expect(r.failures).toEqual([]);
  });

  it('given the chunk progress save fails, when the records are durable, then the run fails with that error', async () => {
    const r = rig();
    const error = new Error('progress save failed');
    r.failChunkDurable(error);
    await routeTransaction(r.deps, tx(10, '0/10'));
    r.durable.resolve();
    await r.state.landing;
    expect(r.failures).toEqual([error]);
  });
});

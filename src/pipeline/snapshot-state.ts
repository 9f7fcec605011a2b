/**
 * What the pipeline knows of snapshots during a run — the current generation's progress, the
 * incremental snapshot running, ad hoc requests, positions pinned for records in flight — and
 * the delivery of snapshot records to the sink. Shared by the snapshot steps (snapshot-start.ts,
 * initial-snapshot.ts, snapshot-requests.ts, transaction-router.ts); this file owns its shape.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ResolvedConfig } from '../config/schema.js';
import { canonicalKey, type MapResult } from '../mapping/index.js';
import type { AppendOutcome } from '../sink/index.js';
import type pg from 'pg';
import { isSnapshotFinished, type IncrementalSnapshot, type SnapshotDecision, type ReadKeySet, type SnapshotProgress, type SnapshotTable } from '../source/snapshot/index.js';
import type { Lsn, QualifiedTable, SnapshotRecord, SourceUnit } from '../source/types.js';
import type { CheckpointWriter } from './checkpoint-writer.js';
import { recordsLanded } from './snapshot-landed.js';
import type { Logger } from './logger.js';
import type { RunControl } from './run-control.js';
import type { PinnedPosition, PipelineSnapshotStore, ReadMark, SnapshotRequestState, StoredSnapshotState } from './snapshot-store.js';
import type { TransactionHandler } from './transaction-handler.js';
import type { SnapshotSummary } from './types.js';

export interface SnapshotInfo {
  readonly action: SnapshotDecision['action'] | 'ad-hoc-snapshot';
  readonly code: string;
  readonly reason: string;
  readonly generation: string | null;
  readonly consistentPoint: Lsn | null;
  /** Mode `initial_only`: stop once the snapshot is complete. */
  readonly stopAfter: boolean;
}

export interface SnapshotState {
  /** `null` with a custom sink (no snapshot state is kept) until a snapshot mode needs one. */
  store: PipelineSnapshotStore | null;
  /** The store's state, read at start-up in parallel with the sinks' own start-up reads. */
  stored: Promise<StoredSnapshotState | null> | null;
  progress: SnapshotProgress | null;
  incremental: IncrementalSnapshot | null;
  info: SnapshotInfo | null;
  /** Ad hoc snapshot requests: queued ones and the ids already taken (saved with the progress). */
  requests: SnapshotRequestState;
  /** Source system id for snapshot positions while streaming (set when a snapshot runs). */
  systemId: string | null;
  /** An ad hoc generation is being set up (its progress saving): a request arriving meanwhile queues. */
  adHocStarting: boolean;
  readonly counts: { rows: number; events: number };
  /** Sink positions of snapshot records handed to the sink and not yet covered by saved progress (see snapshot-store.ts). */
  readonly pinned: Map<string, PinnedPosition>;
  sequence: number;
  done: boolean;
  /** A resumed initial snapshot keeping "streams begin at their beginning" (snapshot-first-change.ts); `null` otherwise. */
  begin: FirstChangeState | null;
  /** Keys marked read since the last save (saved with the next progress record). */
  marks: ReadMark[];
  /** Marks loaded at start-up (every save of the stored generation). */
  storedMarks: readonly ReadMark[];
  /** Saves run one after another (the last record is the current one, so they must land in order). */
  saving: Promise<void>;
  /** A save waiting its turn that later callers may join (requestSave), or `null`. */
  saveQueued: Promise<void> | null;
  /** Pin keys loaded at start-up: records the last process handed to the sink, durability unknown (snapshot-landed.ts). */
  readonly inheritedPins: Set<string>;
  /** The incremental chunk landing meanwhile (transaction-router.ts); settled. The attempt waits for it before closing the store. */
  landing: Promise<void>;
}

/** A table of a resumed initial snapshot, as the first-change rule needs it. */
export interface ResumedTable {
  readonly describe: SnapshotTable;
  /** `pg_class.relreplident`: `f` (full), `d` (default), `i` (index), `n` (nothing). */
  readonly replicaIdentity: string;
  /** Every column some mapper allowlists for the table, sorted. */
  readonly mapped: readonly string[];
  /** Before-images hold every mapped column: REPLICA IDENTITY FULL, or every mapped column in the key. */
  readonly beforeImages: boolean;
}

export interface FirstChangeState {
  readonly generation: string;
  readonly tables: ReadonlyMap<QualifiedTable, ResumedTable>;
  readonly readKeys: ReadKeySet;
  readonly counts: { beforeImages: number; marked: number; withoutImage: number; skippedByChunk: number };
  /** For key comparisons PostgreSQL must make (non-integer keys); opened on first use. */
  client: pg.Client | null;
}

export function createSnapshotState(): SnapshotState {
  return {
    store: null, stored: null, progress: null, incremental: null, info: null, requests: { queued: [], handled: [] },
    systemId: null, adHocStarting: false, counts: { rows: 0, events: 0 }, pinned: new Map(), sequence: 0, done: false,
    begin: null, marks: [], storedMarks: [], saving: Promise.resolve(), saveQueued: null, inheritedPins: new Set(), landing: Promise.resolve(),
  };
}

/** Marks per saved record at most (a record stays far below the max append size). */
const MARKS_PER_SAVE = 5_000;

/** The pins less the `drop` ones, in their order (one pass, no array of entries in between). */
function pinsLeft(pinned: ReadonlyMap<string, PinnedPosition>, drop: ReadonlySet<string>): Map<string, PinnedPosition> {
  const left = new Map<string, PinnedPosition>();
  for (const [key, position] of pinned) if (!drop.has(key)) left.set(key, position);
  return left;
}

async function saveNow(state: SnapshotState, progress: SnapshotProgress, covered?: readonly string[]): Promise<void> {
  // The record that covers these records' progress is the first not to pin them.
  const drop = covered && covered.length > 0 ? new Set(covered) : null;
  do {
    const marks = state.marks.slice(0, MARKS_PER_SAVE);
    state.marks = state.marks.slice(marks.length);
    const pinned = drop ? pinsLeft(state.pinned, drop) : state.pinned;
    try {
      await state.store!.save(progress, pinned, state.requests, { marks, sequence: state.sequence });
    } catch (error) {
      state.marks = [...marks, ...state.marks];
      throw error;
    }
  } while (state.marks.length > 0);
  if (covered) for (const key of covered) state.pinned.delete(key);
  state.progress = progress;
}

/**
 * Saves `progress` (with the pins, requests and marks of this moment) after every save asked for
 * before. A function gives the progress when the save's turn comes (`() => state.progress`: the
 * one saved last — a value taken earlier may be older than a save queued before this one).
 * `covered`: pin keys of records `progress` covers — left out of this save and dropped once it is
 * durable (one save instead of a save of the progress and another without the pins).
 */
export function saveSnapshotProgress(state: SnapshotState, progress: SnapshotProgress | (() => SnapshotProgress), covered?: readonly string[]): Promise<void> {
  const run = state.saving.then(() => saveNow(state, typeof progress === 'function' ? progress() : progress, covered));
  state.saving = run.catch(() => undefined);
  return run;
}

/**
 * A save of the current progress that includes everything marked or pinned so far: joins a save
 * still waiting its turn, or queues one (group commit — one append carries the marks of many
 * transactions while the previous save is under way).
 */
export function requestSave(state: SnapshotState, progress: () => SnapshotProgress): Promise<void> {
  if (state.saveQueued) return state.saveQueued;
  const queued = state.saving.then(() => {
    state.saveQueued = null;
    return saveNow(state, progress());
  });
  state.saveQueued = queued;
  state.saving = queued.catch(() => undefined);
  return queued;
}

export function snapshotSummary(state: SnapshotState): SnapshotSummary | null {
  const info = state.info;
  if (!info) return null;
  return {
    action: info.action, code: info.code, reason: info.reason, generation: info.generation,
    rows: state.counts.rows, events: state.counts.events,
    finished: state.done || (state.progress !== null && isSnapshotFinished(state.progress)),
    consistentPoint: info.consistentPoint,
  };
}

export const pinKey = (record: SnapshotRecord): string => pinKeyOf(record, canonicalKey(record.change.key));
/** The pin key of a record whose `canonicalKey` is `keyText`. */
export const pinKeyOf = (record: SnapshotRecord, keyText: string): string => `${record.table}\u0000${keyText}`;

/** Each record's `canonicalKey` (made once: a sort and a JSON text per call) and its {@link pinKey}. */
export function pinKeysOf(records: readonly SnapshotRecord[]): { keyTexts: string[]; keys: string[] } {
  const keyTexts = records.map((record) => canonicalKey(record.change.key));
  return { keyTexts, keys: records.map((record, i) => pinKeyOf(record, keyTexts[i]!)) };
}

/**
 * Gives each record its sink position: the one it is pinned at (a record read again after a
 * crash keeps its position, so the sink's receipt recognises it — DESIGN invariant 3), else a new
 * one at `lsn` with the next snapshot sequence, pinned. `keys`: the records' {@link pinKey}s.
 */
export function pinRecords(state: SnapshotState, keys: readonly string[], lsn: Lsn): PinnedPosition[] {
  return keys.map((key) => {
    let position = state.pinned.get(key);
    if (!position) {
      position = { lsn, sequence: ++state.sequence };
      state.pinned.set(key, position);
    }
    return position;
  });
}

/**
 * Hands snapshot records to the sink (map → validate → lanes, bounded by the lanes' in-flight
 * limit) and resolves once all are queued, with their pin keys and their durability (wrapped:
 * not awaited here). Before the first append their positions are recorded with the progress,
 * so a record read again after a crash keeps its position and the sink's receipt recognises it
 * (DESIGN invariant 3). Progress itself is saved by the caller once they are durable, which
 * drops the pins with that save (the keys this gives, as its `covered`) or calls
 * {@link unpinRecords} after it.
 */
export async function deliverSnapshotRecords(
  state: SnapshotState,
  deps: { readonly control: RunControl; readonly handler: Pick<TransactionHandler, 'handleUnit' | 'mapUnit'>; readonly config: Pick<ResolvedConfig, 'name' | 'mappers' | 'destination'> },
  batch: { readonly records: readonly SnapshotRecord[]; readonly lsn: Lsn; readonly systemId: string; readonly progress: SnapshotProgress },
): Promise<{ readonly keys: readonly string[]; readonly durable: Promise<void> }> {
  const { lsn, systemId } = batch;
  let records = batch.records;
  if (records.length === 0) return { keys: [], durable: Promise.resolve() };
  let { keyTexts, keys } = pinKeysOf(records);
  const inherited = state.inheritedPins.size === 0 ? [] : records.filter((_, i) => state.inheritedPins.has(keys[i]!) && state.pinned.has(keys[i]!));
  if (inherited.length > 0) {
    // Records the last process handed to the sink: landed ones are not sent again, the others go after the tails.
    const landed = await recordsLanded(deps.config, systemId, inherited, inherited.map((record) => state.pinned.get(pinKey(record))!));
    const drop = new Set<SnapshotRecord>();
    inherited.forEach((record, i) => {
      const key = pinKey(record);
      state.inheritedPins.delete(key);
      if (landed[i] === 'all') drop.add(record);
      if (landed[i] !== 'some') state.pinned.delete(key); // 'none': a new position below
    });
    if (drop.size > 0) {
      keys = keys.filter((_, i) => !drop.has(records[i]!));
      keyTexts = keyTexts.filter((_, i) => !drop.has(records[i]!));
      records = records.filter((record) => !drop.has(record));
    }
  }
  const positions = pinRecords(state, keys, lsn);
  const mapped = await mapWhileSaving(deps, saveSnapshotProgress(state, () => state.progress ?? batch.progress), records, batch.progress.kind, systemId);
  const { durable } = await queueSnapshotRecords(state, deps, { records, positions, keys, keyTexts, systemId, kind: batch.progress.kind, unpin: false, mapped });
  return { keys, durable };
}

/** The unit a snapshot record is mapped and queued as (its snapshot kind filled in). */
function snapshotUnit(record: SnapshotRecord, kind: SnapshotProgress['kind']): SourceUnit {
  return record.snapshotKind ? record : { ...record, snapshotKind: kind };
}

/** Snapshot records mapped ahead ({@link mapWhileSaving}): each as the unit it is queued as, and its mapping. */
export interface MappedRecords {
  readonly units: readonly SourceUnit[];
  readonly results: readonly MapResult[];
}

/** Records mapped in one turn of the event loop before the next (see {@link mapWhileSaving}). */
const MAP_SLICE = 32;

/**
 * The records mapped (nothing queued: mapping is pure) while `saving` — the save that pins them —
 * is under way, then that save awaited. A chunk's save waits behind the previous chunk's append on
 * the destination (appends are applied in order); the main thread spent that wait idle (a fifth
 * of an initial snapshot's time, bench/results/2026-12-07-map-while-saving.md), and now maps the
 * chunk meanwhile. It yields to I/O every {@link MAP_SLICE} records, first of all, so that the
 * save's request, the appender's sends and their answers go on between slices.
 */
export async function mapWhileSaving(
  deps: { readonly handler: Pick<TransactionHandler, 'mapUnit'> },
  saving: Promise<void>,
  records: readonly SnapshotRecord[],
  kind: SnapshotProgress['kind'],
  systemId: string,
): Promise<MappedRecords> {
  saving.catch(() => undefined); // awaited below, once the records are mapped (a mapping error wins)
  const units: SourceUnit[] = [];
  const results: MapResult[] = [];
  for (let i = 0; i < records.length; i++) {
    if (i % MAP_SLICE === 0) await nextTurn();
    const unit = snapshotUnit(records[i]!, kind);
    units.push(unit);
    results.push(deps.handler.mapUnit(unit, systemId));
  }
  await saving;
  return { units, results };
}

/**
 * Drops the pins of delivered records once the progress covering them is saved (not before: a
 * save in between without them and without that progress would let a restart read them again at
 * new positions — appended a second time). `keys`: their {@link pinKey}s, when the caller has them.
 */
export function unpinRecords(state: SnapshotState, records: readonly SnapshotRecord[], keys?: readonly string[]): void {
  if (keys) for (const key of keys) state.pinned.delete(key);
  else for (const record of records) state.pinned.delete(pinKey(record));
}

/**
 * Queues snapshot records at the given positions (map → validate → lanes, bounded by the lanes'
 * in-flight limit). Resolves, once queued, with their durability (wrapped: not awaited here);
 * with `unpin`, their pins are dropped once they are durable (the next save forgets them).
 * `keys`: the records' {@link pinKey}s when the caller has them (else made here); `keyTexts`: their
 * `canonicalKey`s, when the caller has them — the sink keeps a record's key in its stream-state
 * cache (about 100,000 of them), and a key sliced from the pin key would keep the whole pin key alive.
 */
export async function queueSnapshotRecords(
  state: SnapshotState,
  deps: { readonly control: RunControl; readonly handler: Pick<TransactionHandler, 'handleUnit'> },
  batch: {
    readonly records: readonly SnapshotRecord[]; readonly positions: readonly PinnedPosition[]; readonly keys?: readonly string[]; readonly keyTexts?: readonly string[];
    readonly systemId: string; readonly kind: SnapshotProgress['kind']; readonly unpin: boolean;
    /** The records' units and mapping, when made ahead ({@link mapWhileSaving}); else they are made here. */
    readonly mapped?: MappedRecords;
  },
): Promise<{ readonly durable: Promise<void> }> {
  const { records, positions, systemId } = batch;
  const keys = batch.keys ?? records.map(pinKey);
  const durables: Promise<AppendOutcome>[] = [];
  for (let i = 0; i < records.length; i++) {
    const record = records[i]!;
    const position = positions[i]!;
    if (deps.control.stopRequested && deps.control.fatal) throw deps.control.fatal;
    const handled = deps.handler.handleUnit(
      batch.mapped?.units[i] ?? snapshotUnit(record, batch.kind),
      // The pin key is `<table>\u0000<canonical key>`.
      { kind: 'snapshot', systemId, snapshotGeneration: record.snapshotGeneration, lsn: position.lsn, sequence: position.sequence, table: record.table, key: batch.keyTexts?.[i] ?? keys[i]!.slice(record.table.length + 1) },
      systemId,
      batch.mapped?.results[i],
    );
    // Awaited only when queueing waits (the lanes are full): an await per record was a microtask turn per record.
    const queued = handled instanceof Promise ? await handled : handled;
    if (queued) durables.push(queued.durable);
  }
  state.counts.rows += records.length;
  // One continuation for the batch, not one per record.
  const durable = Promise.all(durables).then((outcomes) => {
    for (const outcome of outcomes) state.counts.events += (outcome?.appended ?? 0) + (outcome?.skipped ?? 0);
    if (batch.unpin) unpinRecords(state, records, keys);
  });
  return { durable };
}

/** What the snapshot steps need from the run. */
export interface SnapshotDeps {
  readonly config: ResolvedConfig;
  readonly log: Logger;
  readonly control: RunControl;
  readonly state: SnapshotState;
  readonly handler: TransactionHandler;
  readonly checkpoints: Pick<CheckpointWriter, 'recordConsistentPoint'>;
  /** Mode `initial_only` finished its snapshot while streaming: stop the run (reason `snapshot-done`). */
  snapshotDone(): void;
}

/**
 * What the sink knows of each stream — its revision and the receipt at its tail — and how it
 * learns it.
 *
 * - A cache (a segmented LRU, state-cache.ts: a bulk pass over more streams than it holds does
 *   not push out the streams used before; a snapshot's appends take a fifth of it at most) keeps
 *   what appends and reads taught, across calls.
 *   Each append call also keeps its own map of the states it works with (`CallStates`), so a
 *   call larger than the cache never loses a state it still needs.
 * - A stream not in the cache is touched for the first time in one of two ways
 *   (`firstTouch`): `optimistic` appends as if it were new (`no_stream`), which costs nothing
 *   for new streams and one failed append for an existing one; `read` reads its tail first.
 *   The sink starts optimistic and switches to `read` as soon as an optimistic append meets an
 *   existing stream (a bulk update after a restart: every stream exists), back to optimistic
 *   when nearly every tail it reads turns out not to exist. Tails are read in parallel, at most
 *   `TAIL_READ_CONCURRENCY` at once for the whole sink (tail-reader.ts says how).
 * - While first touches read, `prefetch` reads ahead the tails of streams that queued units
 *   will touch (tail-prefetch.ts: hints kept apart from the cache, taken by the call that needs
 *   them, forgotten when the stream's state changes meanwhile), behind the calls' own reads.
 * - An optimistic append answered with revision n may have been a fresh write or the server's
 *   idempotency finding these very events (a replay); the answer's log position tells them apart
 *   (see `classify`).
 */
import { NO_STREAM } from '@kurrent/kurrentdb-client';
import { SinkError } from './errors.js';
import type { PreparedEvent } from './encoding.js';
import { compareUnits, receiptAt, receiptFromMetadata, receiptsComparable, scopeOf, type Receipt, type ReceiptScope, type ReceiptUnit, type SnapshotUnit, type TransactionUnit } from './receipt.js';
import type { SinkLogger } from './options.js';
import type { TailReader } from './tail-reader.js';
import { createTailPrefetch } from './tail-prefetch.js';
import type { CarriedState } from './state-carry.js';
import { createLimiter, createLru } from './state-cache.js';

export type Revision = bigint | typeof NO_STREAM;

/** What the sink knows of one stream: its revision and the receipt at its tail (and, when read, the tail event). */
export interface StreamState {
  readonly revision: Revision;
  readonly receipt: Receipt | null;
  readonly tail: { readonly id: string; readonly type: string; readonly revision: bigint } | null;
  /** Carried over a restart (state-carry.ts), not yet confirmed by an append or a read of this process. */
  readonly carried?: boolean;
}

/** What the records of one snapshot chunk share of their units (one object for them all). */
interface SnapshotShared {
  readonly assembler: string;
  readonly source: string | undefined;
  readonly lsn: SnapshotUnit['lsn'];
  readonly generation: string;
  readonly table: string;
}

/**
 * A known stream's state, kept compactly — these fill the cache (about 100,000 of them): a
 * transaction's unit is one object shared by its streams (interned), a snapshot unit — one per
 * record, so one per stream — is kept as the parts its chunk shares (one object) and its own
 * sequence and key; the receipt and the tail event are made when asked for. A state an append of
 * ours taught has no tail event: a conflict is only ever found on a state read from the server.
 * (Measured: a snapshot unit object per cached stream was ~9 MiB of live heap at 100,000 streams,
 * held twice over by the old generation's growth.)
 */
class KnownState implements StreamState {
  private readonly shared: TransactionUnit | SnapshotShared | null;
  private readonly sequence: number;
  private readonly key: string | null;

  constructor(
    readonly revision: bigint,
    unit: ReceiptUnit | null,
    share: (unit: SnapshotUnit) => SnapshotShared,
    private readonly ordinal: number,
    private readonly count: number,
    private readonly scope: ReceiptScope,
    readonly carried = false,
  ) {
    if (unit?.kind === 'snapshot') {
      this.shared = share(unit);
      this.sequence = unit.sequence;
      this.key = unit.key;
    } else {
      this.shared = unit;
      this.sequence = 0;
      this.key = null;
    }
  }

  private get unit(): ReceiptUnit | null {
    const shared = this.shared;
    if (this.key === null) return shared as TransactionUnit | null;
    const { assembler, source, lsn, generation, table } = shared as SnapshotShared;
    // The keys in the order units.ts makes them (`source` only when there is one).
    return source === undefined
      ? { kind: 'snapshot', assembler, lsn, generation, sequence: this.sequence, table, key: this.key }
      : { kind: 'snapshot', assembler, source, lsn, generation, sequence: this.sequence, table, key: this.key };
  }

  /** What carries this state over a restart (state-carry.ts). */
  toCarried(stream: string): CarriedState {
    return { stream, revision: this.revision, unit: this.unit, ordinal: this.ordinal, count: this.count, scope: this.scope };
  }

  get receipt(): Receipt | null {
    const unit = this.unit;
    return unit && receiptAt(unit, this.ordinal, this.count, this.scope);
  }

  get tail(): StreamState['tail'] {
    return null;
  }
}

/** A state read from the server: with its tail event (a conflict is judged by it). */
class ReadState extends KnownState {
  constructor(revision: bigint, unit: ReceiptUnit | null, share: (unit: SnapshotUnit) => SnapshotShared, ordinal: number, count: number, scope: ReceiptScope, private readonly tailId: string, private readonly tailType: string) {
    super(revision, unit, share, ordinal, count, scope);
  }

  override get tail(): StreamState['tail'] {
    return { id: this.tailId, type: this.tailType, revision: this.revision };
  }
}

/** The shared parts of snapshot units: the last one made is reused while records of the same chunk follow. */
function createSnapshotSharer(): (unit: SnapshotUnit) => SnapshotShared {
  let last: SnapshotShared | null = null;
  return (unit) => {
    if (last && last.lsn === unit.lsn && last.table === unit.table && last.generation === unit.generation && last.assembler === unit.assembler && last.source === unit.source) return last;
    return (last = { assembler: unit.assembler, source: unit.source, lsn: unit.lsn, generation: unit.generation, table: unit.table });
  };
}

/** One object per unit for the states of its streams (a bulk unit's receipts all name the same unit). */
function createUnitInterner(): (receipt: Receipt) => ReceiptUnit {
  let units = new Map<string, ReceiptUnit>();
  return (receipt) => {
    const key =
      receipt.kind === 'transaction'
        ? `t\u0000${receipt.assembler}\u0000${receipt.source ?? ''}\u0000${receipt.commitLsn}\u0000${receipt.xid}`
        : `s\u0000${receipt.assembler}\u0000${receipt.source ?? ''}\u0000${receipt.lsn}\u0000${receipt.generation}\u0000${receipt.sequence}\u0000${receipt.table}\u0000${receipt.key}`;
    let unit = units.get(key);
    if (!unit) {
      if (units.size >= 1024) units = new Map();
      const { ordinal: _ordinal, count: _count, scope: _scope, ...rest } = receipt;
      units.set(key, (unit = rest));
    }
    return unit;
  };
}

export const EMPTY_STREAM: StreamState = Object.freeze({ revision: NO_STREAM, receipt: null, tail: null });

/**
 * A stream touched for the first time, its tail not read: assumed new, so the append goes out
 * optimistically with `no_stream`. Never cached; compared by identity.
 */
export const ASSUMED_NEW: StreamState = Object.freeze({ revision: NO_STREAM, receipt: null, tail: null });

/** The states one append call works with (see the module comment). */
export type CallStates = Map<string, StreamState>;

/** Tail reads in flight at once, for the whole sink (more gained no throughput in the pipeline, and cost the bridge native memory). */
export const TAIL_READ_CONCURRENCY = 64;

/** Streams prefetched or being read at most (tail-prefetch.ts); each holds one state until its call takes it. */
export const PREFETCH_CAPACITY = 4096;

/** In `read` mode, after this many first-touch reads… */
const READ_WINDOW = 256;
/** …go back to optimistic first touches when at least this share found no stream. */
const NEW_STREAM_SHARE = 0.9;

export interface StreamStatesOptions {
  readonly maxCachedStreams: number;
  readonly reader: TailReader;
  readonly logger: SinkLogger;
  /** Runs one read, waiting out destination outages (the sink's retry policy). */
  retrying<T>(operation: string, details: Record<string, unknown>, call: () => Promise<T>): Promise<T>;
  readonly stats: { tailReads: number; logHeadReads: number; prefetchHits: number };
}

export interface StreamStates {
  /**
   * Gives each of `streams` missing from `known` a state: cached, `ASSUMED_NEW` (an optimistic
   * first touch), or its tail read now (in parallel).
   */
  resolve(streams: Iterable<string>, known: CallStates): Promise<void>;
  /**
   * A hint: units touching `streams` are queued. While first touches read tails, those of
   * streams not cached are read ahead (bounded, behind the calls' own reads) for `resolve` to
   * take. Gives whether first touches read now (`false`: nothing was done).
   */
  prefetch(streams: Iterable<string>): boolean;
  /** Reads the tails of `streams` now (in parallel), into `known` and the cache. */
  refresh(streams: Iterable<string>, known: CallStates): Promise<void>;
  /** What an append taught: the stream is at `revision`, `last` (one of ours) at its tail. */
  learned(stream: string, revision: bigint, last: PreparedEvent, known?: CallStates): void;
  /** Forgets a stream after a failure: its next touch reads the tail (did a write land?). */
  drop(stream: string, known?: CallStates): void;
  cached(stream: string): StreamState | undefined;
  /** The log head to judge the answer of an append sent now by (see `classify`). */
  head(): bigint | null | undefined;
  /**
   * Notes an append's answered log position: a fresh write (above `head`, the head when the
   * append was sent), an idempotent answer (at or below it), or cannot tell. The head is taken at
   * send time because it moves meanwhile: a forgotten stream raises it to the highest position
   * answered so far, and another call's answer may come first.
   */
  classify(position: bigint | undefined, head: bigint | null | undefined): 'fresh' | 'idempotent' | 'unknown';
  /** An optimistic first touch met `existing` streams that exist: read tails first from now on. */
  optimisticMissed(existing: number): void;
  /** Ids of the events of `unit` at the end of `stream` (its share of the unit that landed). */
  unitIds(stream: string, unit: ReceiptUnit): Promise<Set<string>>;
  /** Starts reading the log head (before the first optimistic append needs it). */
  warmUp(): void;
  /** The cached states of streams whose tail is ours or foreign, as known (to carry over a restart; the first to be evicted first). */
  carry(): Generator<CarriedState>;
  /** Takes states carried over from the previous sink into the cache, marked as carried (hints); gives how many were taken. */
  adoptCarried(states: Iterable<CarriedState>): number;
  /**
   * A carried state met a stream that had moved: no carried state is trusted from now on (they
   * are dropped from the cache; their streams are first touches again). Gives how many were dropped.
   */
  distrustCarried(): number;
  readonly size: number;
  readonly firstTouch: 'optimistic' | 'read';
  clear(): void;
}

export function deletedError(stream: string, cause: unknown): SinkError {
  return new SinkError(
    'SINK_STREAM_DELETED',
    `stream "${stream}" is deleted or tombstoned in KurrentDB; the assembler will not recreate it silently — ` +
      'fix: find who deleted it (one assembler owns its streams); a tombstoned stream can never be written again, so map this entity to another stream, then start again',
    { stream },
    { cause },
  );
}

function errorType(error: unknown): string | undefined {
  const type = (error as { type?: unknown } | null)?.type;
  return typeof type === 'string' ? type : undefined;
}

/** One read of the stream's tail, no retries. */
async function readTailState(reader: TailReader, intern: (receipt: Receipt) => ReceiptUnit, share: (unit: SnapshotUnit) => SnapshotShared, stream: string): Promise<StreamState> {
  try {
    const tail = await reader.readTail(stream);
    if (tail.kind === 'not-found') return EMPTY_STREAM;
    const receipt = receiptFromMetadata(tail.metadata);
    if (!receipt) return new ReadState(tail.revision, null, share, 0, 0, 'stream', tail.id, tail.type);
    return new ReadState(tail.revision, intern(receipt), share, receipt.ordinal, receipt.count, scopeOf(receipt), tail.id, tail.type);
  } catch (error) {
    if (errorType(error) === 'stream-deleted') throw deletedError(stream, error);
    throw error;
  }
}

/** Carrying the cache over a restart (state-carry.ts): out, in as hints, and the end of trusting them. */
function createCarrying(cache: ReturnType<typeof createLru<StreamState>>, intern: (receipt: Receipt) => ReceiptUnit, share: (unit: SnapshotUnit) => SnapshotShared, capacity: number): Pick<StreamStates, 'carry' | 'adoptCarried' | 'distrustCarried'> {
  /** Whether carried states may still be in the cache. */
  let carriedLeft = false;
  return {
    *carry() {
      for (const [stream, state] of cache.entries()) if (state instanceof KnownState) yield state.toCarried(stream);
    },
    adoptCarried(states) {
      // In the order carried (the first to be evicted first), each as used: when this cache is
      // smaller than the last one, the states the last process would have kept longest stay.
      let n = 0;
      for (const c of states) {
        const unit = c.unit ? intern(receiptAt(c.unit, c.ordinal, c.count, c.scope)) : null;
        cache.setUsed(c.stream, new KnownState(c.revision, unit, share, c.ordinal, c.count, c.scope, true));
        n += 1;
      }
      carriedLeft = n > 0;
      return Math.min(n, capacity);
    },
    distrustCarried() {
      if (!carriedLeft) return 0;
      carriedLeft = false;
      const carried: string[] = [];
      for (const [stream, state] of cache.entries()) if (state.carried) carried.push(stream);
      for (const stream of carried) cache.delete(stream);
      return carried.length;
    },
  };
}

export function createStreamStates(options: StreamStatesOptions): StreamStates {
  const { reader, logger, retrying, stats } = options;
  // The log head (commit position of its last record), read once before the first optimistic
  // append: an idempotent answer carries the original write's position, at or below it; a fresh
  // write lands above it. `null`: it cannot be read (e.g. no permission to read `$all`), and
  // every first touch reads the stream's tail instead.
  let logHead: bigint | null | undefined;
  let logHeadRead: Promise<bigint | null> | undefined;
  let highestSeen = -1n; // highest log position our appends were answered with
  /** A forgotten stream may be one we wrote in this process: idempotent answers up to what we have seen must read the tail too. */
  const forgetting = (): void => {
    if (typeof logHead === 'bigint' && highestSeen > logHead) logHead = highestSeen;
  };
  const cache = createLru<StreamState>(options.maxCachedStreams, forgetting);
  /** Streams whose state was dropped (a failure): their next touch reads the tail first. Bounded: cleared past the cache's capacity (then a dropped stream costs an optimistic attempt, answered by its receipt). */
  const mustRead = new Set<string>();
  const limited = createLimiter(TAIL_READ_CONCURRENCY);
  const intern = createUnitInterner();
  const share = createSnapshotSharer();
  let firstTouch: 'optimistic' | 'read' = 'optimistic';
  let window = { reads: 0, missing: 0 };
  const carrying = createCarrying(cache, intern, share, options.maxCachedStreams);

  function optimisticHead(): Promise<bigint | null> {
    logHeadRead ??= (async () => {
      stats.logHeadReads += 1;
      try {
        logHead = await retrying('read-tail', { stream: '$all' }, () => reader.readLogHead());
      } catch (error) {
        if (error instanceof SinkError) throw error; // closed, or retries exhausted: try again next call
        logger.warn('kurrentdb sink: cannot read the log head ($all); each stream\'s tail is read on first touch instead (slower)', { error: error instanceof Error ? error.message : String(error) });
        logHead = null;
      }
      return logHead;
    })().catch((error: unknown) => {
      logHeadRead = undefined;
      throw error;
    });
    return logHeadRead;
  }

  const readOnce = (stream: string): Promise<StreamState> => readTailState(reader, intern, share, stream);
  async function readState(stream: string): Promise<StreamState> {
    stats.tailReads += 1;
    return retrying('read-tail', { stream }, () => readOnce(stream));
  }

  const prefetched = createTailPrefetch<StreamState>({
    capacity: PREFETCH_CAPACITY,
    read: (stream) =>
      limited(() => {
        stats.tailReads += 1;
        return readOnce(stream);
      }, true),
    onRead: (state) => noteRead(state),
  });

  /** Sets a stream's state in the cache (`passing`: a snapshot record's append taught it); a prefetched one, read before this, is forgotten. */
  function remember(stream: string, state: StreamState, touch: 'once' | 'passing' = 'once'): void {
    cache.set(stream, state, touch);
    prefetched.invalidate(stream);
  }

  /** A state `resolve` took from the look-ahead: as a read of the call's own would have been. */
  function adopt(stream: string, state: StreamState, known: CallStates): void {
    cache.set(stream, state);
    mustRead.delete(stream);
    known.set(stream, state);
    stats.prefetchHits += 1;
  }

  /** In `read` mode: nearly every tail read finding nothing means the streams are new again. */
  function noteRead(state: StreamState): void {
    if (firstTouch !== 'read') return;
    window.reads += 1;
    if (state === EMPTY_STREAM) window.missing += 1;
    if (window.reads < READ_WINDOW) return;
    if (window.missing >= window.reads * NEW_STREAM_SHARE) {
      firstTouch = 'optimistic';
      logger.info('kurrentdb sink: first touches append optimistically again (the streams read lately were new)', { reads: window.reads, new: window.missing });
    }
    window = { reads: 0, missing: 0 };
  }

  async function readInto(streams: readonly string[], known: CallStates): Promise<void> {
    if (streams.length === 0) return;
    await Promise.all(
      streams.map((stream) =>
        limited(() => readState(stream)).then((state) => {
          remember(stream, state);
          mustRead.delete(stream);
          known.set(stream, state);
          noteRead(state);
        }),
      ),
    );
  }

  return {
    async resolve(streams, known) {
      const toRead: string[] = [];
      const arriving: Promise<void>[] = [];
      const missed: string[] = [];
      let optimistic: boolean | undefined;
      for (const stream of streams) {
        if (known.has(stream)) continue;
        const cached = cache.get(stream);
        if (cached) {
          known.set(stream, cached);
          continue;
        }
        const ahead = prefetched.size > 0 ? prefetched.take(stream) : undefined;
        if (ahead instanceof Promise) {
          arriving.push(ahead.then((state) => (state ? adopt(stream, state, known) : void missed.push(stream))));
          continue;
        }
        if (ahead) {
          adopt(stream, ahead, known);
          continue;
        }
        if (firstTouch === 'optimistic' && !mustRead.has(stream)) {
          optimistic ??= (await optimisticHead()) !== null;
          if (optimistic) {
            known.set(stream, ASSUMED_NEW);
            continue;
          }
        }
        toRead.push(stream);
      }
      await Promise.all([readInto(toRead, known), ...arriving]);
      // Look-ahead reads that failed or went stale: read now, like any other.
      await readInto(missed, known);
    },
    prefetch(streams) {
      if (firstTouch !== 'read' && logHead !== null) return false;
      const wanted = function* (): Generator<string> {
        for (const stream of streams) if (!cache.has(stream) && !prefetched.has(stream)) yield stream;
      };
      prefetched.start(wanted());
      return true;
    },
    async refresh(streams, known) {
      const list = [...new Set(streams)];
      for (const stream of list) {
        cache.delete(stream);
        prefetched.invalidate(stream);
      }
      await readInto(list, known);
    },
    learned(stream, revision, last, known) {
      const { unit, ordinal, count, scope } = last.receiptParts;
      const state = new KnownState(revision, unit, share, ordinal, count, scope);
      remember(stream, state, unit.kind === 'snapshot' ? 'passing' : 'once');
      known?.set(stream, state);
    },
    drop(stream, known) {
      cache.delete(stream);
      prefetched.invalidate(stream);
      known?.delete(stream);
      if (mustRead.size >= options.maxCachedStreams) {
        forgetting();
        mustRead.clear();
      }
      mustRead.add(stream);
    },
    cached: (stream) => cache.get(stream),
    head: () => logHead,
    classify(position, head) {
      if (position === undefined || position < 0n) return 'unknown';
      const answer = typeof head !== 'bigint' ? 'unknown' : position > head ? 'fresh' : 'idempotent';
      if (position > highestSeen) highestSeen = position;
      return answer;
    },
    optimisticMissed(existing) {
      if (existing <= 0) return;
      window = { reads: 0, missing: 0 };
      if (firstTouch === 'read') return;
      firstTouch = 'read';
      logger.info('kurrentdb sink: first touches read the stream\'s tail first (an optimistic append met existing streams)', { existing });
    },
    async unitIds(stream, unit) {
      const events = await retrying('read-back', { stream }, async () => {
        try {
          return await reader.readBackWhile(stream, (event) => {
            const receipt = receiptFromMetadata(event.metadata);
            return receipt !== null && receiptsComparable(receipt, unit) && compareUnits(receipt, unit) === 0;
          });
        } catch (error) {
          if (errorType(error) === 'stream-deleted') throw deletedError(stream, error);
          throw error;
        }
      });
      return new Set(events.map((event) => event.id));
    },
    warmUp() {
      void optimisticHead().catch(() => undefined);
    },
    ...carrying,
    get size() {
      return cache.size;
    },
    get firstTouch() {
      return firstTouch;
    },
    clear() {
      cache.clear();
      mustRead.clear();
      prefetched.clear();
    },
  };
}

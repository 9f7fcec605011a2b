// The rig of the "entity streams begin at their beginning" test: a domain of its own (table
// `public.item`, one stream per item, four event types), its config module and contracts written
// for the real CLI, a concurrent writer, and the counter that folds every entity stream.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import type { InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { receiptFromMetadata } from '../../src/sink/receipt.js';
import { contractDocument } from '../support/contract-document.js';

/** `<lsn>#<sequence or xid>` from an event's receipt (either form), for diagnosis. */
function receiptPosition(metadata: Readonly<Record<string, string>>): string {
  const receipt = receiptFromMetadata(metadata);
  if (receipt === null) return 'undefined#undefined';
  return receipt.kind === 'snapshot' ? `${receipt.lsn}#${receipt.sequence}` : `${receipt.commitLsn}#${receipt.xid}`;
}

export const ITEM = 'public.item';
/** Streams shared by many items (`bucket-<id % BUCKETS>`). */
export const BUCKETS = 16;
const BEGINNINGS = new Set(['ItemImported', 'ItemCreated']);

function contract(type: string, description: string, withState: boolean): object {
  return contractDocument({
    domain: 'items', type, description,
    required: withState ? ['itemId', 'version', 'payload'] : ['itemId'],
    properties: {
      itemId: { type: 'integer' },
      ...(withState ? { version: { type: 'integer', minimum: 1 }, payload: { type: 'string' } } : {}),
    },
  });
}

/** Writes the contracts and a config module (mode `initial`) for `event-assembler run --config`; returns the config file. */
export function writeItemConfig(dir: string, options: { name: string; slot: string; publication: string; chunkSize: number }): string {
  const contracts = join(dir, 'contracts');
  mkdirSync(contracts, { recursive: true });
  const write = (type: string, description: string, withState: boolean) =>
    writeFileSync(join(contracts, `${type}.v1.schema.json`), JSON.stringify(contract(type, description, withState), null, 2));
  write('ItemImported', 'An item as read by the initial snapshot.', true);
  write('ItemCreated', 'An item was inserted.', true);
  write('ItemChanged', 'An item was updated.', true);
  write('ItemDeleted', 'An item was deleted.', false);
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  const src = (p: string) => pathToFileURL(join(process.cwd(), p)).href;
  const file = join(dir, `${options.name}.config.ts`);
  writeFileSync(
    file,
    `import { defineConfig } from '${src('src/config/index.ts')}';
import { defineMapper } from '${src('src/mapping/index.ts')}';
const TYPES = { read: 'ItemImported', insert: 'ItemCreated', update: 'ItemChanged', delete: 'ItemDeleted' };
// One stream per item, and the same events again in 16 streams shared by many items.
const mapper = (name, streamOf) => defineMapper({
  name,
  tables: { '${ITEM}': { columns: ['id', 'version', 'payload'] } },
  map: (tx) => tx.changes('${ITEM}').map((c) => ({
    stream: streamOf(c.key.id),
    type: TYPES[c.op],
    version: 1,
    data: c.op === 'delete' ? { itemId: c.key.id } : { itemId: c.after.id, version: c.after.version, payload: c.after.payload },
  })),
});
const items = mapper('items', (id) => 'item-' + String(id));
const buckets = mapper('buckets', (id) => 'bucket-' + String(id % ${BUCKETS}));
export default defineConfig({
  name: '${options.name}',
  source: { connection: process.env.EA_BEGIN_CAPTURE_URL, slot: '${options.slot}', publication: '${options.publication}', statusIntervalMs: 500 },
  destination: { connectionString: process.env.EA_BEGIN_KURRENTDB_URL },
  mappers: [items, buckets],
  contracts: { dir: '${contracts}' },
  snapshot: { mode: 'initial', chunkSize: ${options.chunkSize} },
  lifecycle: { drainTimeoutMs: 5000 },
});
`,
  );
  return file;
}

/** A concurrent writer on `public.item`: updates (version + 1), deletes, inserts of new ids — one row per transaction. */
export function startWriter(connection: pg.ClientConfig, rows: number): { stop(): Promise<{ updates: number; deletes: number; inserts: number }> } {
  let stopping = false;
  const counts = { updates: 0, deletes: 0, inserts: 0 };
  const done = (async () => {
    const c = new pg.Client(connection);
    await c.connect();
    let nextId = 1_000_000;
    try {
      while (!stopping) {
        const r = Math.random();
        const target = 1 + Math.floor(Math.random() * rows);
        if (r < 0.2) {
          await c.query(`INSERT INTO ${ITEM} VALUES ($1, 1, md5(random()::text))`, [nextId++]);
          counts.inserts += 1;
        } else if (r < 0.9) {
          const u = await c.query(`UPDATE ${ITEM} SET version = version + 1, payload = md5(random()::text) WHERE id = $1`, [target]);
          counts.updates += u.rowCount ?? 0;
        } else {
          const d = await c.query(`DELETE FROM ${ITEM} WHERE id = $1`, [target]);
          counts.deletes += d.rowCount ?? 0;
        }
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
    } finally {
      await c.end().catch(() => undefined);
    }
  })();
  return {
    async stop() {
      stopping = true;
      await done;
      return counts;
    },
  };
}

export interface StreamCounts {
  readonly streams: number;
  readonly events: number;
  /** Streams whose first event is neither ItemImported nor ItemCreated. */
  readonly firstNotBeginning: number;
  /** Snapshot (or creating) events after a stream's first event: they re-state what the stream already carries. */
  readonly restated: number;
  /** Streams with more than one beginning event. */
  readonly severalBeginnings: number;
  /** Events whose version is not the previous one + 1 (a change missing or delivered twice), in streams that begin properly. */
  readonly versionBreaks: number;
  readonly duplicateIds: number;
  /** Items whose events in their shared `bucket-*` stream differ from their own stream's (something dropped or doubled there). */
  readonly sharedMismatches: number;
  /** Snapshot events (ItemImported) by `snapshot.kind` metadata. */
  readonly importedByKind: Record<string, number>;
  /** Streams whose last state (folded: each event's state replaces the previous, a delete ends it) differs from the table. */
  readonly stateMismatches: number;
  readonly examples: readonly string[];
}

const decoder = new TextDecoder();

/** Folds every `item-*` stream and counts what a consumer folding from the first event would meet. */
export async function countItemStreams(kdb: InMemoryKurrentDB, db: { query<T>(text: string): Promise<T[]> }): Promise<StreamCounts> {
  const table = new Map((await db.query<{ id: number; version: number; payload: string }>(`SELECT id, version, payload FROM ${ITEM}`)).map((r) => [r.id, r]));
  let events = 0;
  let firstNotBeginning = 0;
  let restated = 0;
  let severalBeginnings = 0;
  let versionBreaks = 0;
  let stateMismatches = 0;
  const ids = new Set<string>();
  let duplicateIds = 0;
  const importedByKind: Record<string, number> = {};
  const examples: string[] = [];
  const streams = kdb.streamNames().filter((s) => s.startsWith('item-'));
  const traces = new Map<number, string>();
  for (const stream of streams) {
    const stored = kdb.readStreamEvents(stream).map((e) => ({
      id: e.id, type: e.type,
      data: JSON.parse(decoder.decode(e.data)) as { itemId: number; version?: number; payload?: string },
      metadata: JSON.parse(decoder.decode(e.metadata) || '{}') as Record<string, string>,
    }));
    events += stored.length;
    const trace = () => stored.map((e) => `${e.type}${e.data.version ?? ''}`).join(' ');
    traces.set(Number(stream.slice('item-'.length)), trace());
    if (!BEGINNINGS.has(stored[0]!.type)) {
      firstNotBeginning += 1;
      if (examples.length < 6) examples.push(`${stream}: ${trace()}`);
    }
    let beginnings = 0;
    let state: { version: number; payload: string } | null = null;
    let previous: number | null = null;
    for (const [i, e] of stored.entries()) {
      if (ids.has(e.id)) {
        duplicateIds += 1;
        const receipts = stored.map((x) => `${x.type}@${receiptPosition(x.metadata)}`).join(' ');
        if (examples.length < 6) examples.push(`${stream} duplicate ${e.id}: ${receipts}`);
      }
      ids.add(e.id);
      if (e.type === 'ItemImported') importedByKind[e.metadata['snapshot.kind'] ?? '(none)'] = (importedByKind[e.metadata['snapshot.kind'] ?? '(none)'] ?? 0) + 1;
      if (BEGINNINGS.has(e.type)) {
        beginnings += 1;
        if (i > 0) {
          restated += 1;
          if (examples.length < 6) examples.push(`${stream}: ${trace()}`);
        }
      }
      if (e.type === 'ItemDeleted') {
        state = null;
        continue;
      }
      const version = e.data.version!;
      if (BEGINNINGS.has(stored[0]!.type) && previous !== null && e.type === 'ItemChanged' && version !== previous + 1) versionBreaks += 1;
      previous = version;
      state = { version, payload: e.data.payload! };
    }
    if (beginnings > 1) severalBeginnings += 1;
    const row = table.get(Number(stream.slice('item-'.length)));
    if ((row === undefined) !== (state === null) || (row && state && (row.version !== state.version || row.payload !== state.payload))) {
      stateMismatches += 1;
      if (examples.length < 6) examples.push(`${stream} (table: ${row ? `v${row.version}` : 'deleted'}): ${trace()}`);
    }
  }
  // Rows without a stream at all.
  const names = new Set(streams);
  for (const id of table.keys()) {
    if (!names.has(`item-${id}`)) {
      stateMismatches += 1;
      if (examples.length < 6) examples.push(`item-${id}: no stream`);
    }
  }
  // Shared streams: each item's events there, in order, must be exactly those of its own stream.
  const shared = new Map<number, string[]>();
  for (const stream of kdb.streamNames().filter((s) => s.startsWith('bucket-'))) {
    for (const e of kdb.readStreamEvents(stream)) {
      if (ids.has(e.id)) duplicateIds += 1;
      ids.add(e.id);
      const data = JSON.parse(decoder.decode(e.data)) as { itemId: number; version?: number };
      let list = shared.get(data.itemId);
      if (!list) shared.set(data.itemId, (list = []));
      list.push(`${e.type}${data.version ?? ''}`);
    }
  }
  let sharedMismatches = 0;
  for (const [id, trace] of traces) {
    const there = (shared.get(id) ?? []).join(' ');
    if (there !== trace) {
      sharedMismatches += 1;
      if (examples.length < 6) examples.push(`bucket of item-${id}: ${there} (own stream: ${trace})`);
    }
  }
  if (shared.size !== traces.size) sharedMismatches += Math.abs(shared.size - traces.size);
  return { streams: streams.length, events, firstNotBeginning, restated, severalBeginnings, versionBreaks, duplicateIds, sharedMismatches, importedByKind, stateMismatches, examples };
}

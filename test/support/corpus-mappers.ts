// Mappers of the bad-input corpus (test/integration/bad-input-corpus.test.ts). The corpus's
// configuration modules import `itemMapper` from here: each case captures its own table
// `public.<tag>` (shape: CORPUS_ITEM_TABLE) and writes streams `<tag>-<id>`, so one case's bad
// rows reach only its own slot and its own streams.
import { defineMapper, type MappedEvent } from '../../src/mapping/index.js';
import type { Row } from '../../src/source/types.js';

/** The shape of every case's table; `doc` is never allowlisted (a value that must never leave). */
export const CORPUS_ITEM_TABLE = `(id text PRIMARY KEY, label text NOT NULL, amount numeric, at timestamptz, body text, doc jsonb)`;

export type ItemMapperKind =
  /** ItemAdded v1 per inserted row: id, label, amount (numeric as text), at. */
  | 'plain'
  /** `plain`, plus the row's `body` in the event. */
  | 'body'
  /** ItemAdded v2: the amount as a JavaScript number (`Number(amount)`). */
  | 'number'
  /** `plain`, but throws on a row labelled `boom`. */
  | 'throws'
  /** `plain`, declaring the old `label` (`before`): needs old values (REPLICA IDENTITY FULL). */
  | 'before'
  /** Keeps a call counter and makes as many events as it has been called: never the same twice. */
  | 'impure';

function item(tag: string, row: Row, extra: Record<string, unknown> = {}): MappedEvent {
  return {
    stream: `${tag}-${String(row['id'])}`,
    type: 'ItemAdded',
    version: 1,
    data: { id: String(row['id']), label: row['label'], amount: row['amount'] ?? null, at: row['at'] ?? null, ...extra },
  };
}

/** The mapper `kind` over `public.<tag>`. */
export function itemMapper(tag: string, kind: ItemMapperKind = 'plain') {
  const table = `public.${tag}`;
  const columns = ['id', 'label', 'amount', 'at', 'body'];
  if (kind === 'before') {
    // Declaring a before-image column is what makes the table need old values; the start-up
    // checks refuse a replica identity that cannot send them, before anything is read.
    return defineMapper({
      name: `${tag}-items`,
      tables: { [table]: { columns, before: ['label'] } },
      map: (tx) => tx.inserts(table).map(({ after }) => item(tag, after)),
    });
  }
  if (kind === 'impure') {
    // State kept between calls — the kind of bug a clock or Math.random() is, made deterministic
    // for the test: the nth call makes n events, so two runs over one transaction always differ.
    let calls = 0;
    return defineMapper({
      name: `${tag}-items`,
      tables: { [table]: { columns } },
      *map(tx) {
        calls += 1;
        let rows = 0;
        for (const _ of tx.each(table)) rows += 1;
        for (let n = 0; n < calls; n++) yield { stream: `${tag}-summary`, type: 'ItemAdded', version: 1, data: { id: `summary-${n}`, label: `${rows} rows`, amount: null, at: null } };
      },
    });
  }
  return defineMapper({
    name: `${tag}-items`,
    tables: { [table]: { columns } },
    map: (tx) =>
      tx.inserts(table).map(({ after }) => {
        if (kind === 'throws' && after['label'] === 'boom') throw new Error(`cannot map item ${String(after['id'])}: label "boom" is not a known kind`);
        if (kind === 'body') return item(tag, after, { body: after['body'] });
        if (kind === 'number') return { ...item(tag, after), version: 2, data: { ...item(tag, after).data, amount: Number(after['amount']) } };
        return item(tag, after);
      }),
  });
}

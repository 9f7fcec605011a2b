/**
 * Receipts: the last applied source position, stamped on every event the sink appends, so the
 * tail of each stream says how far that stream got (DESIGN invariant 3).
 *
 * A receipt names a *unit* (one source transaction or one snapshot record) and the *ordinal* of
 * the event within that unit's events for this stream. When a unit is replayed after a crash,
 * its events for a stream are skipped up to and including the tail's ordinal and appended after
 * it — which also resumes a unit that was split across several appends (max append size) or
 * across streams (per-stream mode) and interrupted half-way.
 *
 * Metadata: ONE property, `receipt`, a short versioned string — one property rather than the seven to
 * eleven flat keys earlier versions wrote (below), cheaper to encode, send and store (issue 18;
 * bench/sink.bench.ts) — fields separated by `|`:
 *
 *     r1|t|<assembler>|<source>|<commitLsn>|<xid>|<ordinal>|<count>[|u]                         transaction
 *     r1|s|<assembler>|<source>|<lsn>|<generation>|<sequence>|<table>|<key>|<ordinal>|<count>[|u] snapshot record
 *
 * | field          | value                                                                       |
 * |----------------|-----------------------------------------------------------------------------|
 * | `r1`           | the format's version                                                        |
 * | `t` / `s`      | the kind: a transaction or a snapshot record                                |
 * | `assembler`    | the assembler's name: one assembler owns a stream                           |
 * | `source`       | source system identifier (`pg_control` system id); empty when not known     |
 * | `commitLsn`    | transaction: commit LSN, `X/X`                                              |
 * | `xid`          | transaction: xid, decimal                                                   |
 * | `lsn`          | snapshot: the LSN the record is ordered at (consistent point of the initial |
 * |                | snapshot, high watermark of an incremental chunk)                           |
 * | `generation`   | snapshot: snapshot generation                                               |
 * | `sequence`     | snapshot: emit order of the record within its generation, decimal          |
 * | `table`        | snapshot: `schema.table` (diagnosis)                                        |
 * | `key`          | snapshot: the row's key as text (diagnosis)                                 |
 * | `ordinal`      | 0-based index of this event among the unit's events in this stream, decimal |
 * |                | (scope `unit`: among all the unit's events, in every stream)                |
 * | `count`        | number of the unit's events in this stream (scope `unit`: in all), decimal  |
 * | `u`            | present for a unit appended in slices (scope `unit`, see below)             |
 *
 * Free text (`assembler`, `source`, `generation`, `table`, `key`) is percent-encoded where it
 * holds `%`, `|`, `"`, `\`, a control character or anything beyond ASCII (`encodeURIComponent`
 * of that character; everything else as is): no field holds a `|`, so splitting on `|` is
 * unambiguous whatever the names and keys, and the value is plain printable ASCII (the sink's fast
 * encoding). A table `public.a|b` reads `public.a%7Cb`, a key `{"id":1}` reads
 * `{%22id%22:1}`; `decodeURIComponent` gives them back. (A lone UTF-16 surrogate, which PostgreSQL
 * text cannot hold, would be written as U+FFFD.)
 *
 * Earlier versions wrote the same fields as flat metadata keys — `receipt.assembler`,
 * `receipt.kind` (`transaction`/`snapshot`), `receipt.source`, `receipt.commitLsn`, `receipt.xid`,
 * `receipt.lsn`, `receipt.generation`, `receipt.sequence`, `receipt.table`, `receipt.key`,
 * `receipt.ordinal`, `receipt.count`, `receipt.scope` (`unit`). {@link receiptFromMetadata} reads
 * both forms into the same {@link Receipt}, so a destination written by an earlier version is
 * recognised on replay, in order; new events carry only `receipt`. Every reader of receipts goes
 * through {@link receiptFromMetadata}. The key `receipt` and every key starting with `receipt.`
 * belong to the sink ({@link isReceiptKey}): events must not bring them.
 *
 * Scope. A unit small enough to be held whole numbers its events per stream. A unit of more
 * than `SLICED_UNIT_EVENTS` events (a bulk update, a backfill) reaches the sink in slices, in
 * bounded memory, and numbers each event by its place in the whole unit (scope `unit`: the
 * trailing `u`): monotonic in every stream, computable slice by slice without holding a per-stream
 * tally. Whether a unit is sliced depends only on its number of events, so a replay numbers its
 * events as the first attempt did; a stream whose tail holds the same unit in the other scope
 * (written by a version that did not slice) is resolved by event id instead (see the sink).
 *
 * Order (one function, {@link compareReceipts}): within one assembler and one source system,
 * units are ordered by LSN — a transaction by its commit LSN (then xid), a snapshot record by its
 * `lsn` — and a snapshot record sorts before a transaction at the same LSN (it contains only what
 * committed before that point); snapshot records at the same LSN by generation, then sequence.
 * Within a unit, by ordinal. Receipts of different assemblers or source systems do not compare.
 */
import { compareLsn, isLsn } from '../source/position.js';
import type { Lsn } from '../source/types.js';

/** The metadata key of the receipt. */
export const RECEIPT_KEY = 'receipt';

/** The version tag the receipt's value starts with. */
export const RECEIPT_VERSION = 'r1';

/** The flat keys of the receipt as earlier versions wrote it (read still; see the module's doc). */
export const RECEIPT_KEYS = {
  assembler: 'receipt.assembler',
  kind: 'receipt.kind',
  source: 'receipt.source',
  commitLsn: 'receipt.commitLsn',
  xid: 'receipt.xid',
  lsn: 'receipt.lsn',
  generation: 'receipt.generation',
  sequence: 'receipt.sequence',
  table: 'receipt.table',
  key: 'receipt.key',
  ordinal: 'receipt.ordinal',
  count: 'receipt.count',
  scope: 'receipt.scope',
} as const;

/** Metadata keys starting with this prefix belong to the sink (as does {@link RECEIPT_KEY}); events must not bring their own. */
export const RECEIPT_PREFIX = 'receipt.';

/** Whether a metadata key is the sink's: `receipt`, or one starting with `receipt.`. */
export function isReceiptKey(key: string): boolean {
  return key.startsWith(RECEIPT_KEY) && (key.length === RECEIPT_KEY.length || key.startsWith(RECEIPT_PREFIX));
}

interface UnitBase {
  readonly assembler: string;
  /** Source system id; receipts from different systems never compare. */
  readonly source?: string;
}

export interface TransactionUnit extends UnitBase {
  readonly kind: 'transaction';
  readonly commitLsn: Lsn;
  readonly xid: number;
}

export interface SnapshotUnit extends UnitBase {
  readonly kind: 'snapshot';
  /** Where the record sits among transactions: the snapshot's consistent point or chunk high watermark. */
  readonly lsn: Lsn;
  readonly generation: string;
  /** Emit order within the generation (0, 1, 2, …). */
  readonly sequence: number;
  readonly table: string;
  readonly key: string;
}

/** What one append call is about: one source transaction or one snapshot record. */
export type ReceiptUnit = TransactionUnit | SnapshotUnit;

/**
 * What `ordinal` and `count` count: the unit's events in this stream (`stream`, the default) or
 * all the unit's events (`unit`: a unit appended in slices).
 */
export type ReceiptScope = 'stream' | 'unit';

/** A unit plus the event's place among that unit's events (in one stream, or in all: `scope`). */
export type Receipt = ReceiptUnit & { readonly ordinal: number; readonly count: number; readonly scope?: 'unit' };

export function receiptAt(unit: ReceiptUnit, ordinal: number, count: number, scope: ReceiptScope = 'stream'): Receipt {
  // Spelled out rather than spread (`{ ...unit, ordinal, count }`): one per appended stream, and
  // a spread of a unit cost ~3 µs in the profile. Same keys, same order.
  if (unit.kind === 'transaction') {
    const { assembler, source, commitLsn, xid } = unit;
    const receipt: Receipt =
      source === undefined ? { kind: 'transaction', assembler, commitLsn, xid, ordinal, count } : { kind: 'transaction', assembler, source, commitLsn, xid, ordinal, count };
    return scope === 'unit' ? { ...receipt, scope } : receipt;
  }
  return scope === 'unit' ? { ...unit, ordinal, count, scope } : { ...unit, ordinal, count };
}

/** The scope of a receipt's ordinal. */
export function scopeOf(receipt: Receipt): ReceiptScope {
  return receipt.scope ?? 'stream';
}

/** Whether {@link compareReceipts} may order the two (same assembler, same source system when both say). */
export function receiptsComparable(a: ReceiptUnit, b: ReceiptUnit): boolean {
  if (a.assembler !== b.assembler) return false;
  return a.source === undefined || b.source === undefined || a.source === b.source;
}

/** Orders units only (ignores ordinals). Throws a `RangeError` when they do not compare. */
export function compareUnits(a: ReceiptUnit, b: ReceiptUnit): number {
  if (!receiptsComparable(a, b)) {
    throw new RangeError(`receipts of different assemblers or sources do not compare: ${describeUnit(a)} vs ${describeUnit(b)}`);
  }
  const lsnA = a.kind === 'transaction' ? a.commitLsn : a.lsn;
  const lsnB = b.kind === 'transaction' ? b.commitLsn : b.lsn;
  const byLsn = compareLsn(lsnA, lsnB);
  if (byLsn !== 0) return byLsn;
  if (a.kind !== b.kind) return a.kind === 'snapshot' ? -1 : 1;
  if (a.kind === 'transaction' && b.kind === 'transaction') return a.xid - b.xid;
  if (a.kind === 'snapshot' && b.kind === 'snapshot') {
    if (a.generation !== b.generation) return compareGenerations(a.generation, b.generation);
    return a.sequence - b.sequence;
  }
  return 0;
}

/**
 * Snapshot generations in the order they were made: `nextGeneration` counts decimals up
 * (`9` → `10`) and appends `.1` to anything else, so compare dot-separated parts, numerically
 * where both are decimal ("9" < "10"), a prefix before its extensions ("a" < "a.1").
 */
export function compareGenerations(a: string, b: string): number {
  const pa = a.split('.');
  const pb = b.split('.');
  for (let i = 0; i < Math.min(pa.length, pb.length); i++) {
    const x = pa[i]!;
    const y = pb[i]!;
    if (x === y) continue;
    if (/^\d+$/.test(x) && /^\d+$/.test(y)) return BigInt(x) < BigInt(y) ? -1 : 1;
    return x < y ? -1 : 1;
  }
  return pa.length - pb.length;
}

/**
 * The one comparison of receipts: by unit, then ordinal. Throws a `RangeError` when they do not
 * compare — different assemblers or sources, or the same unit numbered in different scopes
 * (check {@link ordinalsComparable}; the sink then compares by event id).
 */
export function compareReceipts(a: Receipt, b: Receipt): number {
  const byUnit = compareUnits(a, b);
  if (byUnit !== 0) return byUnit;
  if (scopeOf(a) !== scopeOf(b)) throw new RangeError(`ordinals of ${describeUnit(a)} do not compare: one counts per stream, the other across the unit`);
  return a.ordinal - b.ordinal;
}

/** Whether two receipts of the same unit number their events in the same scope (receipts of different units always compare by unit). */
export function ordinalsComparable(a: Receipt, b: Receipt): boolean {
  return compareUnits(a, b) !== 0 || scopeOf(a) === scopeOf(b);
}

/** Characters a free-text field is percent-encoded for (see the module's doc). */
// eslint-disable-next-line no-control-regex -- control characters are among what is escaped
const ESCAPED = /[%|"\\\u0000-\u001f\u007f-\uffff]/;
// eslint-disable-next-line no-control-regex -- as above, one code point at a time
const ESCAPED_ALL = /[%|"\\\u0000-\u001f\u007f-\u{10ffff}]/gu;

function escapeCharacter(character: string): string {
  try {
    return encodeURIComponent(character);
  } catch {
    return '%EF%BF%BD'; // a lone surrogate (URIError): U+FFFD, as UTF-8 would write it
  }
}

/** Printable ASCII: the only characters to escape in it are `%`, `|`, `"` and `\\`. */
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

/** A free-text field as the receipt writes it: no `|`, plain printable ASCII. */
function escapeText(text: string): string {
  if (!ESCAPED.test(text)) return text;
  if (!PRINTABLE_ASCII.test(text)) return text.replace(ESCAPED_ALL, escapeCharacter);
  // What encodeURIComponent gives for these four (a snapshot key's JSON text has quotes in every
  // receipt), without a call per character; `%` first, so the escapes made after are not escaped again.
  let escaped = text;
  if (escaped.includes('%')) escaped = escaped.replaceAll('%', '%25');
  if (escaped.includes('|')) escaped = escaped.replaceAll('|', '%7C');
  if (escaped.includes('"')) escaped = escaped.replaceAll('"', '%22');
  if (escaped.includes('\\')) escaped = escaped.replaceAll('\\', '%5C');
  return escaped;
}

/** Escaped names that repeat on every receipt (assembler, source, generation, table): escaped once. */
const escapedNames = new Map<string, string>();
function escapeName(text: string): string {
  let escaped = escapedNames.get(text);
  if (escaped === undefined) {
    escaped = escapeText(text);
    if (escapedNames.size < 1024) escapedNames.set(text, escaped);
  }
  return escaped;
}

/** A free-text field back; `undefined` when its escapes are malformed. */
function unescapeText(text: string): string | undefined {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

/**
 * The unit's part of the receipt's value — everything before `ordinal` and `count`, ending with
 * `|` — the same for every event of the unit, so made once per unit.
 */
export function receiptUnitPrefix(unit: ReceiptUnit): string {
  const head = `${RECEIPT_VERSION}|${unit.kind === 'transaction' ? 't' : 's'}|${escapeName(unit.assembler)}|${unit.source === undefined ? '' : escapeName(unit.source)}|`;
  return unit.kind === 'transaction'
    ? `${head}${unit.commitLsn}|${unit.xid}|`
    : `${head}${unit.lsn}|${escapeName(unit.generation)}|${unit.sequence}|${escapeName(unit.table)}|${escapeText(unit.key)}|`;
}

/** The receipt's value from its unit's prefix ({@link receiptUnitPrefix}) and the event's place. */
export function receiptValue(prefix: string, ordinal: number, count: number, scope: ReceiptScope = 'stream'): string {
  return scope === 'unit' ? `${prefix}${ordinal}|${count}|u` : `${prefix}${ordinal}|${count}`;
}

/** The receipt as event metadata: the one `receipt` property. */
export function receiptToMetadata(receipt: Receipt): Record<string, string> {
  return { [RECEIPT_KEY]: receiptValue(receiptUnitPrefix(receipt), receipt.ordinal, receipt.count, scopeOf(receipt)) };
}

/**
 * The receipt as the flat `receipt.*` keys earlier versions wrote (see the module's doc): what a
 * destination written by them holds — for tests of that, and for error details a human reads.
 */
export function flatReceiptMetadata(receipt: Receipt): Record<string, string> {
  const k = RECEIPT_KEYS;
  const metadata: Record<string, string> = { [k.assembler]: receipt.assembler, [k.kind]: receipt.kind };
  if (receipt.source !== undefined) metadata[k.source] = receipt.source;
  if (receipt.kind === 'transaction') {
    metadata[k.commitLsn] = receipt.commitLsn;
    metadata[k.xid] = String(receipt.xid);
  } else {
    metadata[k.lsn] = receipt.lsn;
    metadata[k.generation] = receipt.generation;
    metadata[k.sequence] = String(receipt.sequence);
    metadata[k.table] = receipt.table;
    metadata[k.key] = receipt.key;
  }
  metadata[k.ordinal] = String(receipt.ordinal);
  metadata[k.count] = String(receipt.count);
  if (receipt.scope === 'unit') metadata[k.scope] = 'unit';
  return metadata;
}

const DECIMAL = /^\d+$/;

/** A decimal field; `undefined` when it is not one. */
function decimal(text: string | undefined): number | undefined {
  return text !== undefined && DECIMAL.test(text) ? Number(text) : undefined;
}

/**
 * Reads a receipt back from event metadata as the client returns it (parsed JSON, raw bytes or
 * nothing), in either form: the `receipt` property, or (written by an earlier version) the flat
 * `receipt.*` keys. `null` when there is none or it is malformed — to the sink, the same thing:
 * an event this assembler did not write.
 */
export function receiptFromMetadata(metadata: unknown): Receipt | null {
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata) || metadata instanceof Uint8Array) return null;
  const m = metadata as Record<string, unknown>;
  const value = m[RECEIPT_KEY];
  if (typeof value === 'string') return parseReceipt(value);
  return value === undefined ? flatReceipt(m) : null;
}

/** A receipt's value (the `receipt` property) read back; `null` when malformed. */
export function parseReceipt(value: string): Receipt | null {
  const f = value.split('|');
  if (f[0] !== RECEIPT_VERSION) return null;
  const kind = f[1];
  const at = kind === 't' ? 6 : kind === 's' ? 9 : -1; // where ordinal is
  if (at < 0 || (f.length !== at + 2 && (f.length !== at + 3 || f[at + 2] !== 'u'))) return null;
  const assembler = unescapeText(f[2]!);
  const source = f[3] === '' ? undefined : unescapeText(f[3]!);
  const ordinal = decimal(f[at]);
  const count = decimal(f[at + 1]);
  if (assembler === undefined || (f[3] !== '' && source === undefined) || ordinal === undefined || count === undefined) return null;
  const unitScoped = f.length === at + 3;
  const lsn = f[4]!;
  if (!isLsn(lsn)) return null;
  if (kind === 't') {
    const xid = decimal(f[5]);
    return xid === undefined ? null : transactionReceipt(assembler, source, lsn, xid, ordinal, count, unitScoped);
  }
  const generation = unescapeText(f[5]!);
  const sequence = decimal(f[6]);
  const table = unescapeText(f[7]!);
  const key = unescapeText(f[8]!);
  if (generation === undefined || sequence === undefined || table === undefined || key === undefined) return null;
  return snapshotReceipt({ kind: 'snapshot', assembler, source, lsn, generation, sequence, table, key }, ordinal, count, unitScoped);
}

// The receipts read back are built as literals, not spread together (`{ ...base, kind, …, ...placed }`):
// a spread of that shape cost ~4 µs (measured), once per tail read and per event a reconciliation reads.

function transactionReceipt(assembler: string, source: string | undefined, commitLsn: Lsn, xid: number, ordinal: number, count: number, unitScoped: boolean): Receipt {
  if (source === undefined) {
    return unitScoped
      ? { kind: 'transaction', assembler, commitLsn, xid, ordinal, count, scope: 'unit' }
      : { kind: 'transaction', assembler, commitLsn, xid, ordinal, count };
  }
  return unitScoped
    ? { kind: 'transaction', assembler, source, commitLsn, xid, ordinal, count, scope: 'unit' }
    : { kind: 'transaction', assembler, source, commitLsn, xid, ordinal, count };
}

/** `unit` with `source` possibly undefined (then left out). */
function snapshotReceipt(unit: Omit<SnapshotUnit, 'source'> & { readonly source: string | undefined }, ordinal: number, count: number, unitScoped: boolean): Receipt {
  const { assembler, source, lsn, generation, sequence, table, key } = unit;
  const scope = unitScoped ? ('unit' as const) : undefined;
  if (source === undefined) {
    return scope
      ? { kind: 'snapshot', assembler, lsn, generation, sequence, table, key, ordinal, count, scope }
      : { kind: 'snapshot', assembler, lsn, generation, sequence, table, key, ordinal, count };
  }
  return scope
    ? { kind: 'snapshot', assembler, source, lsn, generation, sequence, table, key, ordinal, count, scope }
    : { kind: 'snapshot', assembler, source, lsn, generation, sequence, table, key, ordinal, count };
}

/** The flat `receipt.*` keys of earlier versions read back; `null` when absent or malformed. */
function flatReceipt(m: Record<string, unknown>): Receipt | null {
  const text = (key: string): string | undefined => (typeof m[key] === 'string' ? (m[key] as string) : undefined);
  const k = RECEIPT_KEYS;
  const assembler = text(k.assembler);
  const ordinal = decimal(text(k.ordinal));
  const count = decimal(text(k.count));
  if (assembler === undefined || ordinal === undefined || count === undefined) return null;
  const scope = text(k.scope);
  if (scope !== undefined && scope !== 'unit') return null;
  const source = text(k.source);
  const unitScoped = scope === 'unit';
  switch (text(k.kind)) {
    case 'transaction': {
      const commitLsn = text(k.commitLsn);
      const xid = decimal(text(k.xid));
      if (commitLsn === undefined || !isLsn(commitLsn) || xid === undefined) return null;
      return transactionReceipt(assembler, source, commitLsn, xid, ordinal, count, unitScoped);
    }
    case 'snapshot': {
      const lsn = text(k.lsn);
      const generation = text(k.generation);
      const sequence = decimal(text(k.sequence));
      const table = text(k.table);
      const key = text(k.key);
      if (lsn === undefined || !isLsn(lsn) || generation === undefined || sequence === undefined || table === undefined || key === undefined) return null;
      return snapshotReceipt({ kind: 'snapshot', assembler, source, lsn, generation, sequence, table, key }, ordinal, count, unitScoped);
    }
    default:
      return null;
  }
}

export function describeUnit(unit: ReceiptUnit): string {
  return unit.kind === 'transaction'
    ? `transaction ${unit.commitLsn}/xid ${unit.xid} (${unit.assembler})`
    : `snapshot ${unit.generation} #${unit.sequence} ${unit.table} ${unit.key} at ${unit.lsn} (${unit.assembler})`;
}

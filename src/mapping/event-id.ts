import { createHash, hash as oneShotHash } from 'node:crypto';
import type { Row } from '../source/types.js';

/**
 * Deterministic event ids (DESIGN.md, "the three identities"): the same source transaction
 * mapped by the same mapper always yields the same ids, so a replay after a crash appends
 * events KurrentDB already holds — and its idempotency check recognises them.
 *
 * Ids are UUIDv5 (RFC 9562 §5.5: SHA-1 of namespace + name, version 5, variant 10xx) under
 * {@link EVENT_ASSEMBLER_NAMESPACE}. The name is a JSON array of the identifying parts, which
 * keeps the encoding unambiguous (`["a","bc"]` ≠ `["ab","c"]`).
 */

/** The project's fixed UUIDv5 namespace. Never change it: every published event id depends on it. */
export const EVENT_ASSEMBLER_NAMESPACE = '6f1c8e2a-3b7d-4c59-9a0e-5d2b8f4c1e73';

/** RFC 4122 / 9562 namespace for DNS names, for the known-answer test. */
export const DNS_NAMESPACE = '6ba7b810-9dad-11d1-80b4-00c04fd430c8';

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Namespace bytes by namespace text (ids are made for every event: parse each namespace once). */
const namespaces = new Map<string, Buffer>();

/** Namespace + name are hashed from this buffer (no per-id hash object: ids are made for every event). */
let scratch = Buffer.allocUnsafe(1024);
/** `crypto.hash` (Node ≥ 20.12): one call instead of a Hash object, three calls and a digest. */
const sha1Hex: ((data: Buffer) => string) | null =
  typeof oneShotHash === 'function' ? (data) => oneShotHash('sha1', data, 'hex') : null;
/** The variant's hex digit (10xx) for each value of the hash's digit there. */
const VARIANT_DIGIT = '89ab89ab89ab89ab';

/** UUIDv5 of `name` (UTF-8) in `namespace`. */
export function uuidv5(name: string, namespace: string): string {
  let ns = namespaces.get(namespace);
  if (!ns) {
    if (!UUID_PATTERN.test(namespace)) throw new TypeError(`uuidv5: namespace is not a UUID: ${namespace}`);
    ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
    if (namespaces.size < 64) namespaces.set(namespace, ns);
  }
  if (sha1Hex === null) return uuidFromDigest(createHash('sha1').update(ns).update(name, 'utf8').digest('hex'));
  const most = 16 + name.length * 3;
  if (scratch.length < most) {
    scratch = Buffer.allocUnsafe(Math.max(most, scratch.length * 2));
    views.length = 0;
  }
  ns.copy(scratch, 0);
  const end = 16 + scratch.write(name, 16, 'utf8');
  // The view of the first `end` bytes, made once per length (names of one kind have a few lengths): not a view per id.
  const view = (views[end] ??= scratch.subarray(0, end));
  return uuidFromDigest(sha1Hex(view));
}

/** Views of `scratch` by length (dropped when it grows). */
const views: Buffer[] = [];

/** The UUID's text is laid out here (ASCII: one byte per character), then read as one string. */
const uuidText = Buffer.alloc(36, 0x2d); // the dashes stay where they are
/** Where each of the 32 hex digits of a UUID goes in its text. */
const UUID_DIGIT_AT = Array.from({ length: 32 }, (_, i) => i + (i >= 8 ? 1 : 0) + (i >= 12 ? 1 : 0) + (i >= 16 ? 1 : 0) + (i >= 20 ? 1 : 0));

/**
 * The first 16 bytes of a SHA-1 (hex) as a UUID with version 5 and variant 10xx (RFC 9562 §5.5).
 * Laid out in a buffer and read once: a template of five slices made ≈ 450 bytes of garbage per
 * id, two ids per snapshot row (an allocation profile, bench/results/2026-12-07-save-ahead.md).
 */
function uuidFromDigest(hex: string): string {
  for (let i = 0; i < 32; i++) uuidText[UUID_DIGIT_AT[i]!] = hex.charCodeAt(i);
  uuidText[14] = 0x35; // version 5
  uuidText[19] = VARIANT_DIGIT.charCodeAt(parseInt(hex[16]!, 16));
  return uuidText.toString('latin1', 0, 36);
}

/** Identifying parts of an event mapped from a committed source transaction. */
export interface ChangeEventIdParts {
  readonly assembler: string;
  /** The source system: PostgreSQL's system identifier (see `MapContext.sourceIdentity`). */
  readonly sourceIdentity: string;
  readonly commitLsn: string;
  /** Not unique on its own (xids wrap): always paired with the commit LSN. */
  readonly xid: number;
  readonly mapper: string;
  /** Index of the event in the mapper's output for this transaction. */
  readonly ordinal: number;
}

export function changeEventId(parts: ChangeEventIdParts): string {
  return uuidv5(changeEventIdName(parts), EVENT_ASSEMBLER_NAMESPACE);
}

/** JSON-quoted strings that repeat on every event (assembler, source, mapper): quoted once. */
const quoted = new Map<string, string>();
function quote(s: string): string {
  let q = quoted.get(s);
  if (q === undefined) {
    q = JSON.stringify(s);
    if (quoted.size < 1024) quoted.set(s, q);
  }
  return q;
}

/** An LSN needs no JSON escaping (hex digits and a slash), nor do integers. */
const LSN_TEXT = /^[0-9A-Fa-f]{1,8}\/[0-9A-Fa-f]{1,8}$/;

/**
 * The name hashed for a change event id: exactly `JSON.stringify(['change', assembler,
 * sourceIdentity, commitLsn, xid, mapper, ordinal])` (the published ids depend on it), built
 * from cached pieces on the hot path.
 */
export function changeEventIdName(parts: ChangeEventIdParts): string {
  if (!LSN_TEXT.test(parts.commitLsn) || !Number.isSafeInteger(parts.xid) || !Number.isSafeInteger(parts.ordinal)) {
    return JSON.stringify(['change', parts.assembler, parts.sourceIdentity, parts.commitLsn, parts.xid, parts.mapper, parts.ordinal]);
  }
  return `["change",${quote(parts.assembler)},${quote(parts.sourceIdentity)},"${parts.commitLsn}",${parts.xid},${quote(parts.mapper)},${parts.ordinal}]`;
}

/** Identifying parts of an event mapped from a snapshot record. */
export interface SnapshotEventIdParts {
  readonly assembler: string;
  readonly snapshotGeneration: string;
  readonly table: string;
  /** The record's primary (replica identity) key. */
  readonly key: Row;
  /** `canonicalKey(key)`, when the caller has it (else made here). */
  readonly keyText?: string | undefined;
  readonly mapper: string;
  readonly ordinal: number;
}

export function snapshotEventId(parts: SnapshotEventIdParts): string {
  return uuidv5(snapshotEventIdName(parts), EVENT_ASSEMBLER_NAMESPACE);
}

/**
 * The name hashed for a snapshot event id: exactly `JSON.stringify(['snapshot', assembler,
 * snapshotGeneration, table, keyText, mapper, ordinal])` (the published ids depend on it), built
 * from cached pieces on the hot path (only the key text is quoted per event).
 */
export function snapshotEventIdName(parts: SnapshotEventIdParts): string {
  const keyText = parts.keyText ?? canonicalKey(parts.key);
  if (!Number.isSafeInteger(parts.ordinal)) {
    return JSON.stringify(['snapshot', parts.assembler, parts.snapshotGeneration, parts.table, keyText, parts.mapper, parts.ordinal]);
  }
  return `["snapshot",${quote(parts.assembler)},${quote(parts.snapshotGeneration)},${quote(parts.table)},${JSON.stringify(keyText)},${quote(parts.mapper)},${parts.ordinal}]`;
}

/**
 * A stable text encoding of a key row: columns sorted by name, values tagged by JS type so
 * that `1`, `1n` and `"1"` never collide. Independent of the order columns arrived in.
 */
export function canonicalKey(key: Row): string {
  const columns = Object.keys(key);
  if (columns.length === 1) {
    // The common key, one column of a plain value: the same text as below without the arrays (made for every snapshot record).
    const column = columns[0]!;
    const value = key[column];
    if (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) return `[[${quote(column)},${JSON.stringify(value)}]]`;
    if (typeof value === 'bigint') return `[[${quote(column)},{"bigint":"${value.toString()}"}]]`;
  }
  columns.sort();
  return JSON.stringify(columns.map((column) => [column, canonicalValue(key[column])]));
}

function canonicalValue(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === 'bigint') return { bigint: value.toString() };
  if (typeof value === 'number') return Number.isFinite(value) ? value : { number: String(value) };
  if (Buffer.isBuffer(value)) return { bytes: value.toString('hex') };
  if (value instanceof Date) return { date: value.toISOString() };
  if (Array.isArray(value)) return value.map(canonicalValue);
  if (typeof value === 'object') {
    const record = value as Record<string, unknown>;
    return Object.keys(record)
      .sort()
      .map((k) => [k, canonicalValue(record[k])]);
  }
  return value;
}

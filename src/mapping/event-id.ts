import { createHash } from 'node:crypto';
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

/** UUIDv5 of `name` (UTF-8) in `namespace`. */
export function uuidv5(name: string, namespace: string): string {
  let ns = namespaces.get(namespace);
  if (!ns) {
    if (!UUID_PATTERN.test(namespace)) throw new TypeError(`uuidv5: namespace is not a UUID: ${namespace}`);
    ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
    if (namespaces.size < 64) namespaces.set(namespace, ns);
  }
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50; // version 5
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // variant 10xx
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
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
  return uuidv5(
    JSON.stringify(['change', parts.assembler, parts.sourceIdentity, parts.commitLsn, parts.xid, parts.mapper, parts.ordinal]),
    EVENT_ASSEMBLER_NAMESPACE,
  );
}

/** Identifying parts of an event mapped from a snapshot record. */
export interface SnapshotEventIdParts {
  readonly assembler: string;
  readonly snapshotGeneration: string;
  readonly table: string;
  /** The record's primary (replica identity) key. */
  readonly key: Row;
  readonly mapper: string;
  readonly ordinal: number;
}

export function snapshotEventId(parts: SnapshotEventIdParts): string {
  return uuidv5(
    JSON.stringify(['snapshot', parts.assembler, parts.snapshotGeneration, parts.table, canonicalKey(parts.key), parts.mapper, parts.ordinal]),
    EVENT_ASSEMBLER_NAMESPACE,
  );
}

/**
 * A stable text encoding of a key row: columns sorted by name, values tagged by JS type so
 * that `1`, `1n` and `"1"` never collide. Independent of the order columns arrived in.
 */
export function canonicalKey(key: Row): string {
  const columns = Object.keys(key).sort();
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

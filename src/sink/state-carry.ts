/**
 * The stream-state cache carried over a restart: what the sink knew of its streams (revision and
 * the receipt at the tail) is written to a stream of its own when the sink closes, and read back
 * by the next sink of the same assembler — so a restart after downtime does not read the tail of
 * every stream the backlog touches again (one round trip each; DESIGN: the sink learns a stream's
 * state by reading its tail on first touch).
 *
 * A carried state is a hint, never more (stream-states.ts keeps it marked as such): the append
 * that uses it names its revision as the expected revision, so a stream that moved since fails
 * that append, and the conflict is then treated as a cache miss — the tail is read and the call
 * re-planned — not as another writer; and from that moment no carried state is trusted. What a
 * carried state says is a fact about an immutable event (the event at revision R of the stream
 * carries receipt X), so skipping a replayed unit at or before X is right whatever happened since.
 *
 * The states are read back once: the reader appends a `StreamStatesLoaded` marker first, so a
 * later start (after a crash, with no save of its own) does not take the same, older states.
 *
 * Stream: `event-assembler.streams-<assembler>` (`$maxCount` keeps it short). Events:
 *   `StreamStatesSaved` { save, part, parts, units: [unit, …], states: [stream, revision, unit index | -1, ordinal, count, scope, …] }
 *   `StreamStatesLoaded` { save }
 * A unit is `["t", assembler, source | null, commitLsn, xid]` or a snapshot record's
 * `["r", c, sequence, key]`, where `c` indexes an earlier row of the same part holding what a
 * chunk's records share, `["c", assembler, source | null, lsn, generation, table]` (itself no unit).
 * Saves before 2026-12-06 wrote a snapshot unit whole, `["s", assembler, source | null, lsn,
 * generation, sequence, table, key]`: still read. (A whole unit per cached snapshot state made a
 * save of 100,000 of them 82 parts, ≈ 1 s to write; now 39, ≈ 0.5 s.) Scope `1` = unit, `0` =
 * stream. A reader that does not know a row leaves its streams out (they are read as usual).
 */
import { randomUUID } from 'node:crypto';
import { BACKWARDS, END, jsonEvent, type KurrentDBClient } from '@kurrent/kurrentdb-client';
import { isLsn } from '../source/position.js';
import { appendJsonEvent } from './json-append.js';
import type { ReceiptScope, ReceiptUnit } from './receipt.js';

export const SAVED_TYPE = 'StreamStatesSaved';
export const LOADED_TYPE = 'StreamStatesLoaded';

export function stateStreamName(assembler: string): string {
  return `event-assembler.streams-${assembler}`;
}

/** One carried state: the stream, its revision, the receipt at its tail (or none: not ours). */
export interface CarriedState {
  readonly stream: string;
  readonly revision: bigint;
  readonly unit: ReceiptUnit | null;
  readonly ordinal: number;
  readonly count: number;
  readonly scope: ReceiptScope;
}

/** Characters of JSON per part, about (well under the default max append size of 1 MiB). */
const PART_CHARS = 256 * 1024;
/** Events kept in the stream: a few saves' parts. */
const MAX_COUNT = 512;

type UnitRow = (string | number | null)[];

/** What the snapshot units of one chunk share (a `c` row). */
interface ChunkParts {
  readonly assembler: string;
  readonly source?: string | undefined;
  readonly lsn: string;
  readonly generation: string;
  readonly table: string;
}

/** The unit rows of one part: transaction units once each, snapshot units as `r` rows over shared `c` rows. */
function createUnitTable() {
  const rows: UnitRow[] = [];
  const byUnit = new Map<ReceiptUnit, number>();
  const chunks = new Map<string, number>();
  let chars = 0;
  const push = (row: UnitRow): number => {
    chars += JSON.stringify(row).length + 1;
    return rows.push(row) - 1;
  };
  const chunkIndex = (unit: ChunkParts): number => {
    const key = `${unit.lsn}\u0000${unit.generation}\u0000${unit.table}\u0000${unit.assembler}\u0000${unit.source ?? ''}`;
    let index = chunks.get(key);
    if (index === undefined) chunks.set(key, (index = push(['c', unit.assembler, unit.source ?? null, unit.lsn, unit.generation, unit.table])));
    return index;
  };
  return {
    rows,
    get chars(): number {
      return chars;
    },
    indexOf(unit: ReceiptUnit): number {
      const known = byUnit.get(unit);
      if (known !== undefined) return known;
      const index = unit.kind === 'transaction' ? push(['t', unit.assembler, unit.source ?? null, unit.commitLsn, unit.xid]) : push(['r', chunkIndex(unit), unit.sequence, unit.key]);
      byUnit.set(unit, index);
      return index;
    },
  };
}

/** A `c` row of this assembler: what its chunk's snapshot units share; null otherwise. */
function chunkFromRow(row: unknown, assembler: string): ChunkParts | null {
  if (!Array.isArray(row) || row[0] !== 'c' || row.length !== 6 || row[1] !== assembler) return null;
  if (typeof row[3] !== 'string' || !isLsn(row[3]) || typeof row[4] !== 'string' || typeof row[5] !== 'string') return null;
  return { assembler, source: typeof row[2] === 'string' ? row[2] : undefined, lsn: row[3], generation: row[4], table: row[5] };
}

/** A unit row of this assembler as the unit it names; null for anything else (another assembler's, a `c` row, unreadable). */
function unitFromRow(row: unknown, assembler: string, chunks: readonly (ChunkParts | null | undefined)[]): ReceiptUnit | null {
  if (!Array.isArray(row)) return null;
  if (row[0] === 'r' && row.length === 4 && Number.isInteger(row[1]) && Number.isSafeInteger(row[2]) && typeof row[3] === 'string') {
    const chunk = chunks[row[1] as number];
    if (!chunk) return null;
    const source = chunk.source === undefined ? {} : { source: chunk.source };
    return { kind: 'snapshot', assembler, ...source, lsn: chunk.lsn, generation: chunk.generation, sequence: row[2] as number, table: chunk.table, key: row[3] };
  }
  if (row[1] !== assembler) return null;
  const source = typeof row[2] === 'string' ? { source: row[2] } : {};
  if (row[0] === 't' && row.length === 5 && typeof row[3] === 'string' && isLsn(row[3]) && Number.isSafeInteger(row[4])) {
    return { kind: 'transaction', assembler, ...source, commitLsn: row[3], xid: row[4] as number };
  }
  if (row[0] === 's' && row.length === 8 && typeof row[3] === 'string' && isLsn(row[3]) && typeof row[4] === 'string' && Number.isSafeInteger(row[5]) && typeof row[6] === 'string' && typeof row[7] === 'string') {
    return { kind: 'snapshot', assembler, ...source, lsn: row[3], generation: row[4], sequence: row[5] as number, table: row[6], key: row[7] };
  }
  return null;
}

/** The parts of one save: each self-contained (its own unit table), about PART_CHARS of JSON each. */
export function encodeStates(states: Iterable<CarriedState>, save: string): Record<string, unknown>[] {
  const parts: { units: UnitRow[]; states: (string | number)[] }[] = [];
  let units = createUnitTable();
  let rows: (string | number)[] = [];
  let chars = 0;
  const flush = (): void => {
    if (rows.length === 0) return;
    parts.push({ units: units.rows, states: rows });
    units = createUnitTable();
    rows = [];
    chars = 0;
  };
  for (const state of states) {
    const index = state.unit ? units.indexOf(state.unit) : -1;
    rows.push(state.stream, state.revision.toString(), index, state.ordinal, state.count, state.scope === 'unit' ? 1 : 0);
    chars += state.stream.length + 40;
    if (chars + units.chars >= PART_CHARS) flush();
  }
  flush();
  return parts.map((part, i) => ({ save, part: i, parts: parts.length, ...part }));
}

/** The states of one part; throws on anything malformed (the caller then carries nothing). */
export function decodePart(data: Record<string, unknown>, assembler: string, into: CarriedState[]): void {
  const chunks: (ChunkParts | null)[] = [];
  const units = (data['units'] as unknown[]).map((row, i) => {
    chunks[i] = chunkFromRow(row, assembler);
    return unitFromRow(row, assembler, chunks);
  });
  const rows = data['states'] as unknown[];
  if (!Array.isArray(rows) || rows.length % 6 !== 0) throw new Error('malformed states');
  for (let i = 0; i < rows.length; i += 6) {
    const [stream, revision, index, ordinal, count, scope] = rows.slice(i, i + 6);
    if (typeof stream !== 'string' || typeof revision !== 'string' || !/^\d+$/.test(revision) || !Number.isInteger(index) || !Number.isSafeInteger(ordinal) || !Number.isSafeInteger(count)) {
      throw new Error(`malformed state at ${i / 6}`);
    }
    const unit = (index as number) >= 0 ? units[index as number] : null;
    // A unit of another assembler (or unreadable) is left out: that stream is read as usual.
    if (unit === undefined || ((index as number) >= 0 && unit === null)) continue;
    into.push({ stream, revision: BigInt(revision), unit, ordinal: ordinal as number, count: count as number, scope: scope === 1 ? 'unit' : 'stream' });
  }
}

/** Writes the states (part by part) to `stream`; gives the number of parts. */
export async function saveStates(client: KurrentDBClient, stream: string, states: Iterable<CarriedState>): Promise<number> {
  const parts = encodeStates(states, randomUUID());
  if (parts.length === 0) return 0;
  await client.setStreamMetadata(stream, { maxCount: MAX_COUNT });
  // appendJsonEvent: the event appendToStream(jsonEvent(…)) writes, without the client's base64 detour (a part is ≈ 256 KB of JSON).
  for (const part of parts) await appendJsonEvent(client, stream, SAVED_TYPE, part);
  return parts.length;
}

/**
 * The states of the last save, if it is complete and not taken yet — and then marked taken. Empty
 * when there is none (first start, a start after a crash, a save cut short).
 */
export async function loadStates(client: KurrentDBClient, stream: string, assembler: string): Promise<CarriedState[]> {
  const parts: Record<string, unknown>[] = [];
  let save: unknown;
  try {
    for await (const resolved of client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: MAX_COUNT })) {
      const event = resolved.event;
      if (!event) continue;
      const data = event.data as Record<string, unknown>;
      if (event.type !== SAVED_TYPE) break; // taken (or something else): nothing to carry
      if (save === undefined) save = data['save'];
      if (data['save'] !== save || data['part'] !== (data['parts'] as number) - 1 - parts.length) break;
      parts.push(data);
      if (data['part'] === 0) break;
    }
  } catch (error) {
    if ((error as { type?: unknown }).type === 'stream-not-found') return [];
    throw error;
  }
  if (parts.length === 0 || parts[parts.length - 1]!['part'] !== 0) return [];
  await client.appendToStream(stream, jsonEvent({ type: LOADED_TYPE, data: { save } }));
  const states: CarriedState[] = [];
  try {
    for (const part of parts.reverse()) decodePart(part, assembler, states);
  } catch {
    return [];
  }
  return states;
}

// Source versions: last-write-wins per entity compares where the change happened in the source
// (LSN, then the event's ordinal in its unit), never a clock or the order of arrival.
import { compareGenerations } from '../sink/receipt.js';
import { compareLsn } from '../source/position.js';
import type { SourceVersion } from './types.js';

/**
 * Whether two versions order: same source system. LSNs order across timelines of one system (a
 * promoted standby continues the primary's WAL — the rule of `comparePositions`); across systems
 * they mean nothing, and the receipt guard is all there is.
 */
export function versionsComparable(a: SourceVersion, b: SourceVersion): boolean {
  return a.systemId === b.systemId;
}

/**
 * Orders two versions of one system: by LSN; at one LSN a snapshot record before a change (it
 * holds only what committed before that point); snapshot records by generation, then sequence;
 * then by ordinal. Throws a `RangeError` when they do not compare.
 */
export function compareSourceVersions(a: SourceVersion, b: SourceVersion): number {
  if (!versionsComparable(a, b)) throw new RangeError(`source versions of different systems do not compare: ${a.systemId} vs ${b.systemId}`);
  const byLsn = compareLsn(a.lsn, b.lsn);
  if (byLsn !== 0) return byLsn;
  if (a.kind !== b.kind) return a.kind === 'snapshot' ? -1 : 1;
  if (a.kind === 'snapshot') {
    const byGeneration = compareGenerations(a.generation ?? '', b.generation ?? '');
    if (byGeneration !== 0) return byGeneration;
    const bySequence = (a.sequence ?? 0) - (b.sequence ?? 0);
    if (bySequence !== 0) return bySequence;
  }
  return a.ordinal - b.ordinal;
}

/**
 * Key ranges: entities are spread over ranges by a hash of their stream name, so that each range
 * can be folded and compared in memory on its own (memory bounded by the range size, not the
 * table). Both sides spill their lines to one file per range; each side also sums a 64-bit hash
 * of every entity's (stream, canonical state) per range — order-independent, so it can be summed
 * while the events and rows stream by. Ranges whose sums agree agree entity by entity (up to a
 * hash collision); only the others are compared entity by entity (Datafold data-diff's idea of
 * comparing checksums of ranges before rows, one level deep).
 */
import { hash } from 'node:crypto';
import { appendFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';

const MASK64 = (1n << 64n) - 1n;
const FLUSH_BYTES = 256 * 1024;
/**
 * Lines buffered over all of one side's ranges before every buffer is written. Without it the
 * buffers grew with the number of ranges (table rows / range size), not with the range size:
 * 1,000,000 invoices in ranges of 2,000 (500 ranges) took the process from 0.41 to 0.71 GiB
 * (bench:reconcile), and a table of 100 million rows at the default range size would buffer 1 GiB.
 */
const BUFFERED_BYTES = 8 * 1024 * 1024;

/** JSON with object keys sorted at every level (bigints as decimal strings): equal values, equal text. */
export function canonicalJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'bigint') return JSON.stringify(value.toString());
  if (typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (Buffer.isBuffer(value)) return JSON.stringify(value.toString('base64'));
  const keys = Object.keys(value).filter((k) => (value as Record<string, unknown>)[k] !== undefined).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
}

/** FNV-1a of the stream name: which range an entity belongs to. */
export function rangeOf(stream: string, ranges: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < stream.length; i++) {
    h ^= stream.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % ranges;
}

/**
 * 64-bit hash of one entity as a side sees it: the first 64 bits of SHA-1. One-shot and as hex:
 * a Hash object and a Buffer per entity cost three times as much (1.0 vs 0.25 s per 400,000).
 */
export function entityHash(stream: string, canonicalState: string): bigint {
  return BigInt(`0x${hash('sha1', `${stream}\n${canonicalState}`, 'hex').slice(0, 16)}`);
}

/** Per-range sums of entity hashes, and counts. */
export class RangeSums {
  readonly sums: bigint[];
  readonly counts: number[];
  constructor(ranges: number) {
    this.sums = new Array<bigint>(ranges).fill(0n);
    this.counts = new Array<number>(ranges).fill(0);
  }
  add(range: number, hash: bigint): void {
    this.sums[range] = (this.sums[range]! + hash) & MASK64;
    this.counts[range]! += 1;
  }
}

/** One side's spill files, one per range, written in buffered appends. */
export class RangeFiles {
  private readonly buffers: string[][];
  private readonly sizes: number[];
  private buffered = 0;
  private constructor(private readonly dir: string, readonly ranges: number) {
    this.buffers = Array.from({ length: ranges }, () => []);
    this.sizes = new Array<number>(ranges).fill(0);
  }

  static async create(parent: string, side: string, ranges: number): Promise<RangeFiles> {
    return new RangeFiles(await mkdtemp(join(parent, `ea-reconcile-${side}-`)), ranges);
  }

  private file(range: number): string {
    return join(this.dir, `${range}.ndjson`);
  }

  /** Adds one line to `range`; when the range's buffer (or all of them) is full, the promise of the writes (the caller's backpressure: await it). */
  add(range: number, line: string): Promise<void> | null {
    this.buffers[range]!.push(line);
    this.sizes[range]! += line.length + 1;
    this.buffered += line.length + 1;
    if (this.buffered >= BUFFERED_BYTES) return this.flush();
    return this.sizes[range]! >= FLUSH_BYTES ? this.flushRange(range) : null;
  }

  private async flushRange(range: number): Promise<void> {
    const lines = this.buffers[range]!;
    if (lines.length === 0) return;
    this.buffers[range] = [];
    this.buffered -= this.sizes[range]!;
    this.sizes[range] = 0;
    await appendFile(this.file(range), `${lines.join('\n')}\n`);
  }

  /** Writes every buffer (one append per range, concurrently: each range's lines stay in order). */
  async flush(): Promise<void> {
    const writes: Promise<void>[] = [];
    for (let r = 0; r < this.ranges; r++) writes.push(this.flushRange(r));
    await Promise.all(writes);
  }

  /** The range's lines in the order they were added (the range is small enough to hold). */
  async lines(range: number): Promise<string[]> {
    try {
      const text = await readFile(this.file(range), 'utf8');
      return text === '' ? [] : text.slice(0, -1).split('\n');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw error;
    }
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * The keys a resumed initial snapshot has already "read" ahead of its chunk reader — rows whose
 * first streamed change carried their before-image, rows inserted after the consistent point —
 * per table: a set of key strings (`keyString`) bounded in memory.
 *
 * Up to `maxInMemory` keys live in a `Set`; beyond it the largest table's keys are written to disk
 * as a sorted run (one key per line; `keyString` is JSON, so a key never holds a raw newline)
 * and only a sparse index (every {@link INDEX_EVERY}th key with its byte offset) and a Bloom
 * filter (≈ 10 bits per key) stay in memory. A lookup checks the set, then each run whose Bloom
 * filter says "maybe": one read of one index block. Synchronous, so the pure watermark path can
 * ask it without a promise per row. `delete` forgets a key in memory only (a spilled key stays:
 * harmless, the chunk reader has passed it); `dropTable` forgets a finished table, files included.
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { QualifiedTable } from '../types.js';

/** One spilled key in this many is indexed in memory. */
const INDEX_EVERY = 64;
const BLOOM_BITS_PER_KEY = 10;
const BLOOM_HASHES = 4;

export interface ReadKeySetOptions {
  /** Keys held in memory (all tables) before the largest table's are spilled. Default: 100,000. */
  readonly maxInMemory?: number;
  /** Where spill files go (a directory of its own is made inside). Default: the OS temp directory. */
  readonly spillDir?: string;
}

export interface ReadKeySet {
  has(table: QualifiedTable, key: string): boolean;
  add(table: QualifiedTable, key: string): void;
  /** Forgets a key held in memory (a spilled one stays). */
  delete(table: QualifiedTable, key: string): void;
  /** Forgets every key of `table` (it is finished), spill files included. */
  dropTable(table: QualifiedTable): void;
  /** Keys in memory / on disk. */
  readonly sizes: { readonly memory: number; readonly spilled: number };
  close(): void;
}

interface Run {
  readonly file: string;
  readonly count: number;
  /** First key of each block and the block's byte offset; the last entry's `end` closes it. */
  readonly index: readonly { readonly first: string; readonly offset: number; readonly end: number }[];
  readonly bloom: Uint8Array;
  readonly bloomBits: number;
}

function hashes(key: string, bits: number): number[] {
  // FNV-1a twice (two seeds), combined as Kirsch–Mitzenmacher double hashing.
  let h1 = 0x811c9dc5;
  let h2 = 0x01000193;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193) >>> 0;
    h2 = Math.imul(h2 ^ c, 0x5bd1e995) >>> 0;
  }
  const out: number[] = [];
  for (let i = 0; i < BLOOM_HASHES; i++) out.push(((h1 + Math.imul(i, h2 | 1)) >>> 0) % bits);
  return out;
}

function writeRun(dir: string, n: number, keys: string[]): Run {
  keys.sort();
  const file = path.join(dir, `run-${n}.keys`);
  const fd = openSync(file, 'w', 0o600);
  const bloomBits = Math.max(64, keys.length * BLOOM_BITS_PER_KEY);
  const bloom = new Uint8Array(Math.ceil(bloomBits / 8));
  const index: { first: string; offset: number; end: number }[] = [];
  let offset = 0;
  try {
    for (let start = 0; start < keys.length; start += INDEX_EVERY) {
      const block = keys.slice(start, start + INDEX_EVERY);
      const bytes = Buffer.from(`${block.join('\n')}\n`, 'utf8');
      writeSync(fd, bytes);
      index.push({ first: block[0]!, offset, end: offset + bytes.length });
      offset += bytes.length;
      for (const key of block) for (const bit of hashes(key, bloomBits)) bloom[bit >>> 3]! |= 1 << (bit & 7);
    }
  } finally {
    closeSync(fd);
  }
  return { file, count: keys.length, index, bloom, bloomBits };
}

function inRun(run: Run, key: string): boolean {
  for (const bit of hashes(key, run.bloomBits)) if ((run.bloom[bit >>> 3]! & (1 << (bit & 7))) === 0) return false;
  // The last block whose first key is <= key.
  let lo = 0;
  let hi = run.index.length - 1;
  if (hi < 0 || key < run.index[0]!.first) return false;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (run.index[mid]!.first <= key) lo = mid;
    else hi = mid - 1;
  }
  const block = run.index[lo]!;
  const buffer = Buffer.alloc(block.end - block.offset);
  const fd = openSync(run.file, 'r');
  try {
    readSync(fd, buffer, 0, buffer.length, block.offset);
  } finally {
    closeSync(fd);
  }
  return buffer.toString('utf8').split('\n').includes(key);
}

export function createReadKeySet(options: ReadKeySetOptions = {}): ReadKeySet {
  const maxInMemory = Math.max(1, options.maxInMemory ?? 100_000);
  const memory = new Map<QualifiedTable, Set<string>>();
  const runs = new Map<QualifiedTable, Run[]>();
  let inMemory = 0;
  let spilled = 0;
  let dir: string | null = null;
  let files = 0;

  function spill(): void {
    let largest: [QualifiedTable, Set<string>] | null = null;
    for (const entry of memory) if (!largest || entry[1].size > largest[1].size) largest = entry;
    if (!largest || largest[1].size === 0) return;
    dir ??= mkdtempSync(path.join(options.spillDir ?? os.tmpdir(), 'ea-read-keys-'));
    const [table, keys] = largest;
    const run = writeRun(dir, files++, [...keys]);
    let list = runs.get(table);
    if (!list) runs.set(table, (list = []));
    list.push(run);
    inMemory -= keys.size;
    spilled += run.count;
    memory.delete(table);
  }

  return {
    has(table, key) {
      if (memory.get(table)?.has(key)) return true;
      for (const run of runs.get(table) ?? []) if (inRun(run, key)) return true;
      return false;
    },
    add(table, key) {
      let set = memory.get(table);
      if (!set) memory.set(table, (set = new Set()));
      if (set.has(key)) return;
      set.add(key);
      inMemory += 1;
      if (inMemory > maxInMemory) spill();
    },
    delete(table, key) {
      if (memory.get(table)?.delete(key)) inMemory -= 1;
    },
    dropTable(table) {
      inMemory -= memory.get(table)?.size ?? 0;
      memory.delete(table);
      for (const run of runs.get(table) ?? []) {
        spilled -= run.count;
        rmSync(run.file, { force: true });
      }
      runs.delete(table);
    },
    get sizes() {
      return { memory: inMemory, spilled };
    },
    close() {
      memory.clear();
      runs.clear();
      inMemory = 0;
      spilled = 0;
      if (dir) rmSync(dir, { recursive: true, force: true });
      dir = null;
    },
  };
}

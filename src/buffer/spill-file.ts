/**
 * One transaction's spill file: append-only writes batched through a {@link RecordWriter},
 * streaming reads with bounded memory (one read chunk plus at most one partial record).
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { open, rm, type FileHandle } from 'node:fs/promises';
import { EventAssemblerError } from '../errors.js';
import type { DeleteMessage, InsertMessage, UpdateMessage } from '../source/pgoutput/messages.js';
import type { Change, RelationVersion } from '../source/types.js';
import { RecordReader, RecordWriter, type RelationTable } from './spill-codec.js';

/**
 * Flush the write batch to the file when it holds this many bytes. Kept small because every
 * spilled open transaction holds one batch (many concurrently streamed transactions may spill).
 */
const WRITE_BATCH_BYTES = 256 << 10;
/** Read the file back in chunks of this size. */
const READ_CHUNK_BYTES = 1 << 20;

export class SpillFile {
  private handle: FileHandle | null = null;
  private readonly writer: RecordWriter;
  private bytesWritten = 0;
  private removed = false;

  private constructor(readonly path: string, private readonly relations: RelationTable) {
    this.writer = new RecordWriter(relations, 64 << 10);
  }

  static async create(path: string, relations: RelationTable): Promise<SpillFile> {
    const file = new SpillFile(path, relations);
    file.handle = await open(path, 'wx', 0o600);
    return file;
  }

  get size(): number { return this.bytesWritten + this.writer.length; }

  /**
   * Appends one record; writes to disk once the batch is full. Synchronous (no promise) unless it
   * writes: the hot path then allocates nothing but the encoded bytes.
   */
  append(xid: number, change: Change): Promise<void> | undefined {
    this.writer.write(xid, change);
    return this.writer.length >= WRITE_BATCH_BYTES ? this.flush() : undefined;
  }

  /** Appends a row message as sent (converted to a Change when read back). Like {@link append}. */
  appendRow(xid: number, message: InsertMessage | UpdateMessage | DeleteMessage, relation: RelationVersion): Promise<void> | undefined {
    this.writer.writeRow(xid, message, relation);
    return this.writer.length >= WRITE_BATCH_BYTES ? this.flush() : undefined;
  }

  async flush(): Promise<void> {
    if (this.writer.length === 0 || this.handle === null) return;
    const bytes = this.writer.take();
    let off = 0;
    while (off < bytes.length) {
      const { bytesWritten } = await this.handle.write(bytes, off, bytes.length - off, null);
      off += bytesWritten;
    }
    this.bytesWritten += bytes.length;
  }

  /** Flushes and closes the write handle; the file stays until {@link remove}. */
  async finish(): Promise<void> {
    await this.flush();
    this.writer.release();
    const handle = this.handle;
    this.handle = null;
    await handle?.close();
  }

  /** Reads the records back in order, skipping those of `skipXids`. */
  async *read(skipXids: ReadonlySet<number>): AsyncGenerator<Change> {
    const records = this.splitter(skipXids);
    const fh = await open(this.path, 'r');
    try {
      const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES);
      for (;;) {
        const { bytesRead } = await fh.read(chunk, 0, chunk.length, null);
        if (bytesRead === 0) break;
        yield* records.changes(chunk.subarray(0, bytesRead));
      }
      records.end();
    } finally {
      await fh.close();
    }
  }

  /**
   * {@link read}, synchronously: for the mapping of a large transaction, which runs synchronously
   * (a mapper is a plain function) and pulls changes as it goes. One chunk in memory at a time; a
   * chunk of the local spill file is read in well under a millisecond. Any number of readers.
   */
  *readSync(skipXids: ReadonlySet<number>): Generator<Change> {
    const records = this.splitter(skipXids);
    const fd = openSync(this.path, 'r');
    try {
      const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES);
      for (let position = 0; ; ) {
        const bytesRead = readSync(fd, chunk, 0, chunk.length, position);
        if (bytesRead === 0) break;
        position += bytesRead;
        yield* records.changes(chunk.subarray(0, bytesRead));
      }
      records.end();
    } finally {
      closeSync(fd);
    }
  }

  private splitter(skipXids: ReadonlySet<number>): RecordSplitter {
    if (this.removed) throw new EventAssemblerError('BUFFER_TRANSACTION_RELEASED', `spill file ${this.path} was already released`, { path: this.path });
    return new RecordSplitter(new RecordReader(this.relations), skipXids, this.path);
  }

  /** Closes and deletes the file. Idempotent. */
  async remove(): Promise<void> {
    if (this.removed) return;
    this.removed = true;
    const handle = this.handle;
    this.handle = null;
    await handle?.close().catch(() => undefined);
    await rm(this.path, { force: true });
  }
}

/** Cuts the file's bytes, chunk by chunk, into its records (a record may straddle two chunks). */
class RecordSplitter {
  private carry: Buffer | null = null;

  constructor(
    private readonly reader: RecordReader,
    private readonly skipXids: ReadonlySet<number>,
    private readonly path: string,
  ) {}

  /** The changes of the records that end in `chunk` (which the caller may overwrite afterwards). */
  *changes(chunk: Buffer): Generator<Change> {
    const data: Buffer = this.carry === null ? chunk : Buffer.concat([this.carry, chunk]);
    let off = 0;
    while (off + 4 <= data.length) {
      const len = data.readUInt32LE(off);
      if (off + 4 + len > data.length) break;
      const { xid, change } = this.reader.read(data, off + 4, off + 4 + len);
      off += 4 + len;
      if (this.skipXids.size === 0 || !this.skipXids.has(xid)) yield change;
    }
    // Copy the partial record: `chunk` is overwritten by the next read.
    this.carry = off < data.length ? Buffer.from(data.subarray(off)) : null;
  }

  end(): void {
    if (this.carry !== null) throw new EventAssemblerError('BUFFER_SPILL_CORRUPT', `spill file ${this.path} ends inside a record (${this.carry.length} stray bytes)`, { path: this.path });
  }
}

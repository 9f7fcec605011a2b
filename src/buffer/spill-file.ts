/**
 * One transaction's spill file: append-only writes batched through a {@link RecordWriter},
 * streaming reads with bounded memory (one read chunk plus at most one partial record).
 */
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
    if (this.removed) throw new EventAssemblerError('BUFFER_TRANSACTION_RELEASED', `spill file ${this.path} was already released`, { path: this.path });
    const reader = new RecordReader(this.relations);
    const fh = await open(this.path, 'r');
    try {
      const chunk = Buffer.allocUnsafe(READ_CHUNK_BYTES);
      let carry: Buffer | null = null;
      for (;;) {
        const { bytesRead } = await fh.read(chunk, 0, chunk.length, null);
        if (bytesRead === 0) break;
        const data: Buffer = carry === null ? chunk.subarray(0, bytesRead) : Buffer.concat([carry, chunk.subarray(0, bytesRead)]);
        let off = 0;
        while (off + 4 <= data.length) {
          const len = data.readUInt32LE(off);
          if (off + 4 + len > data.length) break;
          const { xid, change } = reader.read(data, off + 4, off + 4 + len);
          off += 4 + len;
          if (skipXids.size === 0 || !skipXids.has(xid)) yield change;
        }
        // Copy the partial record: `chunk` is overwritten by the next read.
        carry = off < data.length ? Buffer.from(data.subarray(off)) : null;
      }
      if (carry !== null) throw new EventAssemblerError('BUFFER_SPILL_CORRUPT', `spill file ${this.path} ends inside a record (${carry.length} stray bytes)`, { path: this.path });
    } finally {
      await fh.close();
    }
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

/**
 * CopyData messages read straight off a `pg` client's socket, in place.
 *
 * `pg` parses every backend message into an object: for a CopyData (`d`) message a Buffer view
 * of its payload in a message object, emitted through the connection (on a replication
 * connection to two listeners, the client's and ours, so each emit also copies the listener
 * array). A replication stream is almost only CopyData — six or more per small transaction — and
 * a COPY's output is one CopyData per row. Measured: streaming into KurrentDB allocates 27,435 →
 * 26,111 bytes per transaction and takes 6–8 % less CPU per transaction; snapshots are unchanged
 * (bench/results/2026-12-07-copy-data.md).
 *
 * While a COPY or a replication stream runs, {@link interceptCopyData} takes the socket's
 * `data` event from pg's parser: CopyData messages go to `onCopyData(buffer, start, end)` (the
 * payload's bytes, no copy), every other message — CopyOutResponse, CopyBothResponse, notices,
 * errors, CopyDone, CommandComplete — goes to pg's parser as it came, in order, so pg's client
 * sees the protocol as before minus the CopyData messages. At the next ReadyForQuery the socket
 * is handed back to pg's parser with whatever follows it.
 *
 * It must be installed when pg's parser holds no partial message: right before the query that
 * starts the COPY or the replication stream is sent (the server sends nothing unasked on these
 * connections between a ReadyForQuery and the next query).
 */

/** Where a CopyData message's payload lies in `buffer`: bytes `start` … `end - 1`. Do not keep `buffer`. */
export type CopyDataHandler = (buffer: Buffer, start: number, end: number) => void;

/** A pg `Connection`'s `stream` (a socket, or a TLS socket over it), as far as this file uses it. */
export interface DataStream {
  listeners(event: 'data'): readonly unknown[];
  removeListener(event: 'data', listener: (chunk: Buffer) => void): unknown;
  on(event: 'data', listener: (chunk: Buffer) => void): unknown;
}

export interface CopyDataInterception {
  /** The socket went back to pg's parser (a ReadyForQuery passed, or {@link release}). */
  readonly released: boolean;
  /** Hands the socket back to pg's parser now (with any partial message held). */
  release(): void;
}

const COPY_DATA = 0x64; // 'd'
const READY_FOR_QUERY = 0x5a; // 'Z'
const HEADER = 5; // type(1) + length(4), the length counting itself

/**
 * CopyData messages of a pg `Connection` (its `stream` and its events) to `onCopyData`: off the
 * socket while {@link interceptCopyData} can take it, else from pg's `copyData` events.
 */
export function listenCopyData(
  connection: { readonly stream: DataStream; on(event: 'copyData', listener: (message: { chunk: Buffer }) => void): unknown },
  onCopyData: CopyDataHandler,
): void {
  if (!interceptCopyData(connection.stream, onCopyData)) connection.on('copyData', ({ chunk }) => onCopyData(chunk, 0, chunk.length));
}

/**
 * Takes CopyData messages off `stream` (a pg `Connection`'s `stream`) until the next
 * ReadyForQuery. Returns null — and changes nothing — unless pg's parser is the stream's only
 * `data` listener (then the caller keeps listening to pg's `copyData` events).
 * `onCopyData` must not throw: the rest of the chunk it was called from would be lost (pg's own
 * parser loses it the same way when a `copyData` listener throws).
 */
export function interceptCopyData(stream: DataStream, onCopyData: CopyDataHandler): CopyDataInterception | null {
  const existing = stream.listeners('data');
  if (existing.length !== 1 || typeof existing[0] !== 'function') return null;
  const pgParser = existing[0] as (chunk: Buffer) => void;
  let released = false;
  /** A message begun in an earlier chunk: its pieces and its whole length (header included), or 0. */
  let partial: Buffer[] = [];
  let partialBytes = 0;
  let partialNeed = 0;

  /** From here on pg's parser reads the socket; `rest` (with any partial message held before it) goes to it first. */
  function handBack(rest: Buffer | null): void {
    if (released) return;
    released = true;
    stream.removeListener('data', onData);
    stream.on('data', pgParser);
    const held = partialBytes > 0 ? Buffer.concat(partial, partialBytes) : null;
    partial = [];
    partialBytes = 0;
    partialNeed = 0;
    const tail = held && rest ? Buffer.concat([held, rest]) : (held ?? rest);
    if (tail && tail.length > 0) pgParser(tail);
  }

  /** The messages in `chunk` from `offset` on; the bytes of an unfinished last message are kept. */
  function scan(chunk: Buffer, offset: number): void {
    let o = offset;
    let other = -1; // start of a run of non-CopyData messages not yet given to pg
    while (o + HEADER <= chunk.length) {
      const type = chunk[o]!;
      const length = chunk.readInt32BE(o + 1);
      // A ReadyForQuery ends the interception; a length no message has is pg's to report.
      if (type === READY_FOR_QUERY || length < 4) {
        handBack(chunk.subarray(other >= 0 ? other : o));
        return;
      }
      const end = o + 1 + length;
      if (end > chunk.length) break;
      if (type === COPY_DATA) {
        if (other >= 0) {
          pgParser(chunk.subarray(other, o));
          other = -1;
        }
        onCopyData(chunk, o + HEADER, end);
      } else if (other < 0) other = o;
      o = end;
    }
    if (other >= 0) pgParser(chunk.subarray(other, o));
    if (o < chunk.length) {
      hold(chunk.subarray(o));
      if (partialBytes >= HEADER) partialNeed = 1 + Math.max(4, chunk.readInt32BE(o + 1));
    }
  }

  function hold(bytes: Buffer): void {
    partial.push(bytes);
    partialBytes += bytes.length;
  }

  /** Completes the message begun in an earlier chunk from `chunk`'s first bytes; returns the offset after them, or -1 when `chunk` did not finish it. */
  function complete(chunk: Buffer): number {
    let offset = 0;
    if (partialNeed === 0) {
      // The header itself was cut: complete it first.
      const missing = HEADER - partialBytes;
      if (chunk.length < missing) {
        hold(chunk);
        return -1;
      }
      const head = Buffer.concat([...partial, chunk.subarray(0, missing)], HEADER);
      partial = [head];
      partialBytes = HEADER;
      partialNeed = 1 + Math.max(4, head.readInt32BE(1));
      offset = missing;
    }
    const missing = partialNeed - partialBytes;
    if (chunk.length - offset < missing) {
      hold(chunk.subarray(offset));
      return -1;
    }
    const message = Buffer.concat([...partial, chunk.subarray(offset, offset + missing)], partialNeed);
    partial = [];
    partialBytes = 0;
    partialNeed = 0;
    scan(message, 0);
    return offset + missing;
  }

  function onData(chunk: Buffer): void {
    const offset = partialBytes === 0 ? 0 : complete(chunk);
    if (offset < 0 || offset >= chunk.length) return;
    if (released) pgParser(chunk.subarray(offset));
    else scan(chunk, offset);
  }

  stream.removeListener('data', pgParser);
  stream.on('data', onData);
  return {
    get released() {
      return released;
    },
    release: () => handBack(null),
  };
}

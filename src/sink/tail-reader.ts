/**
 * Reads what the sink needs to know of a stream: its last event (revision, id, type, metadata
 * with the receipt), the events of one unit at its end, and the log's head.
 *
 * Tails go first on a hand-framed HTTP/2 connection (h2-read.ts `createFramedTailReader`: a
 * sixth of the CPU per read), which answers what the response's messages prove; the rest, as one
 * HTTP/2 request each (0.4 ms a read one at a time, where the bridge takes milliseconds) or
 * through the client's native bridge. Everything else goes through the bridge. A bridge whose
 * first connection attempt failed keeps answering UNAVAILABLE after the server is back (seen
 * with client 1.3.1), so after such an answer the next read uses a fresh client. Errors are the client's (the sink branches on their `type`); waiting out outages is the
 * caller's (`retrying`).
 */
import { BACKWARDS, END, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { createFramedTailReader, createH2TailReader, type TailRead } from './h2-read.js';
import { transportOf, type H2Transport } from './h2-transport.js';
import { readerConnectionString } from './reader-connection.js';

export type { TailRead } from './h2-read.js';

/** One event read back from a stream's end. */
export interface ReadBackEvent {
  readonly revision: bigint;
  readonly id: string;
  readonly metadata: unknown;
}

export interface TailReader {
  readTail(stream: string): Promise<TailRead>;
  /**
   * The stream's events from its end backwards, as long as `keep` accepts them (the first one
   * it refuses ends the read, and is not returned). `[]` when the stream does not exist.
   */
  readBackWhile(stream: string, keep: (event: ReadBackEvent) => boolean): Promise<ReadBackEvent[]>;
  /** Commit position of the log's last record (`-1n` for an empty log). */
  readLogHead(): Promise<bigint>;
  /** Tail reads answered on the hand-framed connection so far (the rest went through the client's paths). */
  readonly framedReads?: number;
  close(): Promise<void>;
}

function errorType(error: unknown): string | undefined {
  const type = (error as { type?: unknown } | null)?.type;
  return typeof type === 'string' ? type : undefined;
}

/** Tail reads in flight from which further ones go through the bridge (see `createTailReader`). */
const BRIDGE_FROM_IN_FLIGHT = 16;

/**
 * The sink's reader. A tail read goes first as frames on a connection of its own, plain text or
 * TLS as the connection string says (h2-transport.ts; `createFramedTailReader`,
 * bench/tail-read.bench.ts: 24 against 140–170 µs of CPU per read at 64 in flight, 30 against
 * 134–179 over TLS); what that gives back (`null`) goes as one HTTP/2 request through
 * `client` (the appending client: its channel and credentials) while few are in flight — 0.4 ms
 * where the bridge takes several — and through the bridge when many are: the bridge does its I/O
 * on a thread of its own, and with many reads in flight it reads as many per second or more
 * (bench/tail-read.bench.ts: 6,900 against 6,500 at 64, 7,900 against 5,800 at 256). A client
 * without the internals these need: the bridge, for every read.
 */
export function createTailReader(connectionString: string, client: KurrentDBClient, transport: H2Transport = transportOf(connectionString)): TailReader {
  const bridge = createBridgeTailReader(connectionString);
  const h2 = createH2TailReader(client, transport);
  if (!h2) return bridge;
  const framed = createFramedTailReader(client, { transport });
  let inFlight = 0;
  return {
    async readTail(stream) {
      const answer = framed && (await framed.readTail(stream));
      if (answer) return answer;
      inFlight += 1;
      try {
        return await (inFlight > BRIDGE_FROM_IN_FLIGHT ? bridge.readTail(stream) : h2.readTail(stream));
      } finally {
        inFlight -= 1;
      }
    },
    readBackWhile: (stream, keep) => bridge.readBackWhile(stream, keep),
    readLogHead: () => bridge.readLogHead(),
    get framedReads() {
      return framed?.counts.answered ?? 0;
    },
    close: async () => {
      framed?.close();
      h2.close();
      await bridge.close();
    },
  };
}

export function createBridgeTailReader(connectionString: string): TailReader {
  let reader = KurrentDBClient.connectionString(readerConnectionString(connectionString));
  let suspect = false;

  /** The reader for the next read: a fresh one when the last read saw the bridge unavailable. */
  function current(): KurrentDBClient {
    if (suspect) {
      const previous = reader;
      reader = KurrentDBClient.connectionString(readerConnectionString(connectionString));
      suspect = false;
      void previous.dispose().catch(() => undefined);
    }
    return reader;
  }

  async function guarded<T>(read: (client: KurrentDBClient) => Promise<T>): Promise<T> {
    try {
      return await read(current());
    } catch (error) {
      // Only the bridge's own UNAVAILABLE: a slow first read (it connects lazily) just times out.
      if (errorType(error) === 'unavailable') suspect = true;
      throw error;
    }
  }

  return {
    readTail: (stream) =>
      guarded(async (client) => {
        try {
          for await (const resolved of client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
            const event = resolved.event;
            if (event) return { kind: 'event', revision: event.revision, id: event.id, type: event.type, metadata: event.metadata };
          }
          return { kind: 'not-found' };
        } catch (error) {
          if (errorType(error) === 'stream-not-found') return { kind: 'not-found' };
          throw error;
        }
      }),
    readBackWhile: (stream, keep) =>
      guarded(async (client) => {
        const out: ReadBackEvent[] = [];
        try {
          for await (const resolved of client.readStream(stream, { direction: BACKWARDS, fromRevision: END })) {
            const event = resolved.event;
            if (!event) continue;
            const read = { revision: event.revision, id: event.id, metadata: event.metadata };
            if (!keep(read)) break;
            out.push(read);
          }
        } catch (error) {
          if (errorType(error) !== 'stream-not-found') throw error;
        }
        return out;
      }),
    readLogHead: () =>
      guarded(async (client) => {
        for await (const resolved of client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 })) {
          const position = resolved.event?.position?.commit ?? resolved.commitPosition;
          if (position !== undefined) return position;
        }
        return -1n;
      }),
    framedReads: 0,
    close: () => reader.dispose().catch(() => undefined),
  };
}

// How a sink event becomes a KurrentDB event, and how big the server will count it.
import { uuidv5 as uuidv5In } from '../mapping/event-id.js';
import { jsonEvent, type EventData } from '@kurrent/kurrentdb-client';
import { SinkError } from './errors.js';
import { RECEIPT_KEYS, RECEIPT_PREFIX, receiptUnitMetadata, type Receipt } from './receipt.js';
import { encodeAppendRecordSized } from './v2-append.js';

/** What the sink needs of an event (the mapping SDK's `EventToAppend` fits). */
export interface EncodableEvent {
  readonly id: string;
  readonly stream: string;
  readonly type: string;
  readonly data: unknown;
  readonly metadata: Readonly<Record<string, string>>;
}

/** An event ready to append: encoded once, measured once, with its receipt stamped in. */
export interface PreparedEvent {
  readonly id: string;
  readonly stream: string;
  readonly type: string;
  readonly receipt: Receipt;
  /** `Event.SizeOnDisk` as the server counts it against MaxAppendSize (v1 appends). */
  readonly size: number;
  /** The record's size as a multi-stream append counts it (data + properties + schema name). */
  readonly multiStreamSize: number;
  readonly eventData: EventData;
  /** The v2 AppendRecord (multi-stream append), encoded on first use. */
  readonly record: Buffer;
  /** The data as JSON, and the metadata with the receipt (what both append paths send). */
  readonly dataJson: string;
  readonly metadata: Readonly<Record<string, string>>;
}

const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The size KurrentDB counts against MaxAppendSize: data bytes + metadata bytes + 2 × the type's
 * length (`Event.SizeOnDisk`, KurrentDB.Core Data/Event.cs — the type is counted as UTF-16).
 */
export function eventSizeOnDisk(type: string, dataJson: string, metadataJson: string): number {
  return Buffer.byteLength(dataJson, 'utf8') + Buffer.byteLength(metadataJson, 'utf8') + type.length * 2;
}

/**
 * A prepared event. The sizes and the client's `EventData` are computed on first use: a
 * multi-stream append needs only `multiStreamSize` (and encodes the record itself), a per-stream
 * append only `size` and `eventData` — each costs a serialization of the metadata.
 */
class Prepared implements PreparedEvent {
  #size: number | undefined;
  #encoded: { record: Buffer; size: number } | undefined;
  #eventData: EventData | undefined;

  constructor(
    readonly id: string,
    readonly stream: string,
    readonly type: string,
    readonly receipt: Receipt,
    readonly dataJson: string,
    readonly metadata: Readonly<Record<string, string>>,
    private readonly data: unknown,
  ) {}

  #metadataJson: string | undefined;

  get size(): number {
    return (this.#size ??= eventSizeOnDisk(this.type, this.dataJson, (this.#metadataJson ??= JSON.stringify(this.metadata))));
  }

  /** The v2 AppendRecord of this event (multi-stream append), encoded once; its size as the server counts it comes with it. */
  get record(): Buffer {
    return this.#encode().record;
  }

  get multiStreamSize(): number {
    return this.#encode().size;
  }

  #encode(): { record: Buffer; size: number } {
    return (this.#encoded ??= encodeAppendRecordSized(this.id, this.type, this.dataJson, this.metadata));
  }

  get eventData(): EventData {
    return (this.#eventData ??= jsonEvent({ id: this.id, type: this.type, data: this.data as Record<string, unknown>, metadata: this.metadata }));
  }
}

/**
 * Encodes one event: data as JSON (`application/json`), metadata as the flat string map plus the
 * receipt keys — flat and string-valued, so the same event can go through multi-stream append.
 */
export function prepareEvent(event: EncodableEvent, receipt: Receipt, unitReceiptMetadata?: Readonly<Record<string, string>>): PreparedEvent {
  const invalid = (why: string, extra: Record<string, unknown> = {}): SinkError =>
    new SinkError('SINK_INVALID_EVENT', `event ${event.type} (${event.id}) for stream "${event.stream}" ${why}`, {
      stream: event.stream,
      type: event.type,
      eventId: event.id,
      ...extra,
    });
  if (typeof event.stream !== 'string' || event.stream.length === 0) throw invalid('has no stream name');
  if (typeof event.type !== 'string' || event.type.length === 0) throw invalid('has no type');
  if (typeof event.id !== 'string' || !UUID_PATTERN.test(event.id)) throw invalid('has an id that is not a UUID (KurrentDB event ids are UUIDs)');
  const metadata: Record<string, string> = {};
  const source = event.metadata ?? {};
  for (const key in source) {
    const value = source[key];
    if (typeof value !== 'string') throw invalid(`has metadata "${key}" that is not a string (metadata must be flat and string-valued)`, { key });
    if (key.startsWith(RECEIPT_PREFIX)) throw invalid(`brings its own metadata "${key}"; the "${RECEIPT_PREFIX}" keys belong to the sink`, { key });
    metadata[key] = value;
  }
  // The unit's part is the same for all its events: a caller appending several passes it, computed once.
  Object.assign(metadata, unitReceiptMetadata ?? receiptUnitMetadata(receipt));
  metadata[RECEIPT_KEYS.ordinal] = String(receipt.ordinal);
  metadata[RECEIPT_KEYS.count] = String(receipt.count);
  let dataJson: string | undefined;
  try {
    dataJson = JSON.stringify(event.data);
  } catch (cause) {
    throw invalid(`has data that is not JSON-serializable: ${(cause as Error).message}`);
  }
  if (dataJson === undefined) throw invalid('has no data');
  return new Prepared(event.id, event.stream, event.type, receipt, dataJson, metadata, event.data);
}

/** The sink's UUIDv5 namespace (for its own checkpoint events). Never change it. */
export const SINK_NAMESPACE = 'a3f0c7d2-5e84-4b1f-9c6a-2d7e8b0f4a19';

/** UUIDv5 (RFC 9562 §5.5) of `name` in `namespace` (the mapping SDK's implementation; the sink's own namespace by default). */
export function uuidv5(name: string, namespace: string = SINK_NAMESPACE): string {
  return uuidv5In(name, namespace);
}

/**
 * Splits one stream's events into appends of at most `limit` bytes each, keeping order.
 * Callers have already rejected single events over the limit.
 */
export function splitBySize<T>(events: readonly T[], limit: number, sizeOf: (event: T) => number): T[][] {
  const parts: T[][] = [];
  let current: T[] = [];
  let size = 0;
  for (const event of events) {
    const eventSize = sizeOf(event);
    if (current.length > 0 && size + eventSize > limit) {
      parts.push(current);
      current = [];
      size = 0;
    }
    current.push(event);
    size += eventSize;
  }
  if (current.length > 0) parts.push(current);
  return parts;
}

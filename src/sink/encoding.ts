// How a sink event becomes a KurrentDB event, and how big the server will count it.
import { uuidv5 as uuidv5In } from '../mapping/event-id.js';
import { jsonEvent, type EventData } from '@kurrent/kurrentdb-client';
import { SinkError } from './errors.js';
import { isReceiptKey, RECEIPT_KEY, receiptAt, receiptUnitPrefix, receiptValue, type Receipt, type ReceiptScope, type ReceiptUnit } from './receipt.js';
import { encodeAppendRecordSized, encodePlainRecord, plainProperty, PlainPropertiesBuilder, readAppendRecord, type PlainProperties } from './v2-append.js';

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
  /** The parts of the receipt (its unit is shared by the unit's events): what a stream's state keeps. */
  readonly receiptParts: { readonly unit: ReceiptUnit; readonly ordinal: number; readonly count: number; readonly scope: ReceiptScope };
  /** `Event.SizeOnDisk` as the server counts it against MaxAppendSize (v1 appends). */
  readonly size: number;
  /** The record's size as a multi-stream append counts it (data + properties + schema name). */
  readonly multiStreamSize: number;
  readonly eventData: EventData;
  /** The v2 AppendRecord (multi-stream append), encoded on first use. */
  readonly record: Buffer;
  /** The data as JSON, and the metadata with the receipt (what both append paths send). */
  readonly dataJson: string;
  readonly data: unknown;
  readonly metadata: Readonly<Record<string, string>>;
  /** Encodes the record now and drops what it was made of (see `Prepared.compact`). */
  compact(): void;
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
 * What a unit's events share of their receipt, computed once per unit: the unit, and the start
 * of the receipt's value (each event adds its ordinal and count).
 */
export interface UnitReceiptPart {
  readonly unit: ReceiptUnit;
  readonly prefix: string;
}

export function unitReceiptPart(unit: ReceiptUnit): UnitReceiptPart {
  return { unit, prefix: receiptUnitPrefix(unit) };
}

/**
 * A prepared event. The metadata (the event's own keys, then the receipt), the receipt, the
 * sizes and the client's `EventData` are made on first use: a multi-stream append needs only the
 * encoded record and `multiStreamSize` — encoded from the parts, the event's own keys encoded
 * while they were checked — a per-stream append only `size` and `eventData`.
 *
 * {@link Prepared.compact} encodes the record at once and lets go of the parts it was made of.
 */
class Prepared implements PreparedEvent {
  #size: number | undefined;
  #encoded: { record: Buffer; size: number } | undefined;
  #eventData: EventData | undefined;
  #metadata: Record<string, string> | undefined;
  #metadataJson: string | undefined;
  #receipt: Receipt | undefined;
  #receiptValue: string | undefined;
  #dataJson: string | null;
  #data: unknown;
  /** The event's own metadata (checked: flat strings, no receipt key); null once compacted. */
  #own: Readonly<Record<string, string>> | null;
  /** `own` encoded the fast way, or null when something in it is not plain (or once compacted). */
  #ownPlain: PlainProperties | null;

  constructor(
    readonly id: string,
    readonly stream: string,
    readonly type: string,
    dataJson: string,
    data: unknown,
    own: Readonly<Record<string, string>>,
    ownPlain: PlainProperties | null,
    private readonly unitPart: UnitReceiptPart,
    private readonly ordinal: number,
    private readonly count: number,
    private readonly scope: ReceiptScope,
  ) {
    this.#dataJson = dataJson;
    this.#data = data;
    this.#own = own;
    this.#ownPlain = ownPlain;
  }

  /**
   * Encodes the record now and drops the data, the metadata and their JSON: what a queued unit
   * holds until its append is then one record (its bytes outside V8's heap), not the mapper's
   * objects — every young collection copies what units in flight hold. What asks for the parts
   * later (a per-stream append after the server turned out not to serve multi-stream ones) gets
   * them back from the record.
   */
  compact(): void {
    this.#encode();
    this.#receiptValue = undefined;
    this.#metadata = undefined;
    this.#dataJson = null;
    this.#data = undefined;
    this.#own = null;
    this.#ownPlain = null;
  }

  /** The data and metadata back from the encoded record (after {@link compact}). */
  #fromRecord(): { dataJson: string; metadata: Record<string, string> } {
    return readAppendRecord(this.#encoded!.record);
  }

  get dataJson(): string {
    return this.#dataJson ?? this.#fromRecord().dataJson;
  }

  get data(): unknown {
    return this.#dataJson === null ? JSON.parse(this.#fromRecord().dataJson) : this.#data;
  }

  get receipt(): Receipt {
    return (this.#receipt ??= receiptAt(this.unitPart.unit, this.ordinal, this.count, this.scope));
  }

  get receiptParts(): { readonly unit: ReceiptUnit; readonly ordinal: number; readonly count: number; readonly scope: ReceiptScope } {
    return { unit: this.unitPart.unit, ordinal: this.ordinal, count: this.count, scope: this.scope };
  }

  /** The `receipt` property's value. */
  get #value(): string {
    return (this.#receiptValue ??= receiptValue(this.unitPart.prefix, this.ordinal, this.count, this.scope));
  }

  get metadata(): Readonly<Record<string, string>> {
    if (this.#metadata) return this.#metadata;
    // The record's properties are the event's own keys, then the receipt: the metadata as made below.
    if (this.#own === null) return (this.#metadata = this.#fromRecord().metadata);
    const metadata: Record<string, string> = { ...this.#own };
    metadata[RECEIPT_KEY] = this.#value;
    return (this.#metadata = metadata);
  }

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
    if (this.#encoded) return this.#encoded;
    // The receipt's value is plain ASCII by construction (its free text is escaped); null here would fall back to the general encoder.
    const ownPlain = this.#ownPlain;
    const receipt = ownPlain && plainProperty(RECEIPT_KEY, this.#value);
    const plain = ownPlain && receipt ? encodePlainRecord(this.id, this.type, this.#dataJson!, [ownPlain, receipt]) : null;
    return (this.#encoded = plain ?? encodeAppendRecordSized(this.id, this.type, this.#dataJson!, this.metadata));
  }

  get eventData(): EventData {
    return (this.#eventData ??= jsonEvent({ id: this.id, type: this.type, data: this.data as Record<string, unknown>, metadata: this.metadata }));
  }
}

/**
 * Encodes one event: data as JSON (`application/json`), metadata as the flat string map plus the
 * receipt (one string property, see receipt.ts) — flat and string-valued, so the same event can go through multi-stream append.
 * `unit` is the event's unit (or its shared receipt part, computed once for a unit's events);
 * `ordinal` and `count` place the event among the unit's events in its stream — or, with `scope`
 * `unit` (a unit appended in slices), among all the unit's events.
 */
export function prepareEvent(event: EncodableEvent, unit: ReceiptUnit | UnitReceiptPart, ordinal: number, count: number, scope: ReceiptScope = 'stream'): PreparedEvent {
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
  const source = event.metadata ?? {};
  // Checked, and collected for the multi-stream encoding in the same pass (while all of it is plain).
  let plain: PlainPropertiesBuilder | null = new PlainPropertiesBuilder();
  for (const key in source) {
    const value = source[key];
    if (typeof value !== 'string') throw invalid(`has metadata "${key}" that is not a string (metadata must be flat and string-valued)`, { key });
    if (isReceiptKey(key)) throw invalid(`brings its own metadata "${key}"; "${RECEIPT_KEY}" and the "${RECEIPT_KEY}." keys belong to the sink`, { key });
    if (plain !== null && !plain.add(key, value)) plain = null;
  }
  let dataJson: string | undefined;
  try {
    dataJson = JSON.stringify(event.data);
  } catch (cause) {
    throw invalid(`has data that is not JSON-serializable: ${(cause as Error).message}`);
  }
  if (dataJson === undefined) throw invalid('has no data');
  const part = 'prefix' in unit ? unit : unitReceiptPart(unit);
  // The event's own keys are kept as given (not copied): with a plain encoding they are not read again for multi-stream appends.
  const own = plain === null ? { ...source } : source;
  return new Prepared(event.id, event.stream, event.type, dataJson, event.data, own, plain, part, ordinal, count, scope);
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

// Streams.Read: stream and $all reads, and catch-up subscriptions (the same RPC with the
// `subscription` count option). Follows Services/Transport/Grpc/Streams.Read.cs and the
// enumerators in Services/Transport/Enumerators (ReadStreamForwards, AllSubscriptionFiltered, ...).
import { randomUUID } from 'node:crypto';
import type * as grpc from '@grpc/grpc-js';
import type { ServerContext } from './context.js';
import { streamDeletedError } from './errors.js';
import { sharedPb, streamsPb, timestampPb } from './proto.js';
import type { RecordedEvent } from './store.js';
import { DELETED_STREAM } from './store.js';

type ReadCall = grpc.ServerWritableStream<streamsPb.ReadReq, streamsPb.ReadResp>;
type Options = streamsPb.ReadReq.Options;

/** Default window of a filtered read/subscription (Enumerator.DefaultReadBatchSize = 32). */
const DEFAULT_MAX_SEARCH_WINDOW = 32;

const { CountOptionCase, StreamOptionCase, ReadDirection } = streamsPb.ReadReq.Options;

interface EncodeOptions {
  /** UUIDOption: the client asks for ids as strings or as two int64s. */
  readonly uuidAsString: boolean;
}

function encodeUuid(id: string, options: EncodeOptions): sharedPb.UUID {
  const uuid = new sharedPb.UUID();
  if (options.uuidAsString) {
    uuid.setString(id);
    return uuid;
  }
  const hex = id.replace(/-/g, '');
  const structured = new sharedPb.UUID.Structured();
  structured.setMostSignificantBits(BigInt.asIntN(64, BigInt(`0x${hex.slice(0, 16)}`)).toString());
  structured.setLeastSignificantBits(BigInt.asIntN(64, BigInt(`0x${hex.slice(16)}`)).toString());
  uuid.setStructured(structured);
  return uuid;
}

/** ResponseConverter.ConvertToReadEvent: `type`, `content-type` and `created` travel as gRPC metadata. */
export function toReadResp(event: RecordedEvent, options: EncodeOptions): streamsPb.ReadResp {
  const recorded = new streamsPb.ReadResp.ReadEvent.RecordedEvent();
  recorded.setId(encodeUuid(event.id, options));
  const identifier = new sharedPb.StreamIdentifier();
  identifier.setStreamName(Buffer.from(event.streamName, 'utf8'));
  recorded.setStreamIdentifier(identifier);
  recorded.setStreamRevision(event.revision.toString());
  recorded.setCommitPosition(event.position.toString());
  recorded.setPreparePosition(event.position.toString());
  recorded.getMetadataMap().set('type', event.type);
  recorded.getMetadataMap().set('content-type', event.contentType);
  recorded.getMetadataMap().set('created', event.created.toString());
  recorded.setData(event.data);
  recorded.setCustomMetadata(event.metadata);

  const readEvent = new streamsPb.ReadResp.ReadEvent();
  readEvent.setEvent(recorded);
  readEvent.setCommitPosition(event.position.toString());
  const response = new streamsPb.ReadResp();
  response.setEvent(readEvent);
  return response;
}

function now(): timestampPb.Timestamp {
  return timestampPb.Timestamp.fromDate(new Date());
}

type EventFilter = (event: RecordedEvent) => boolean;

/**
 * EventFilter.EventType / EventFilter.StreamName (Services/Storage/ReaderIndex/EventFilter.cs):
 * prefixes, or a regular expression (unanchored, like .NET Regex.IsMatch).
 */
function toEventFilter(filter: streamsPb.ReadReq.Options.FilterOptions): EventFilter {
  const { FilterCase } = streamsPb.ReadReq.Options.FilterOptions;
  const onStreamName = filter.getFilterCase() === FilterCase.STREAM_IDENTIFIER;
  const expression = onStreamName ? filter.getStreamIdentifier() : filter.getEventType();
  const field = (event: RecordedEvent) => (onStreamName ? event.streamName : event.type);
  const regex = expression?.getRegex() ?? '';
  if (regex !== '') {
    const pattern = new RegExp(regex);
    return (event) => pattern.test(field(event));
  }
  const prefixes = expression?.getPrefixList() ?? [];
  return (event) => prefixes.some((prefix) => field(event).startsWith(prefix));
}

function streamNameOf(options: Options): string {
  return Buffer.from(options.getStream()?.getStreamIdentifier()?.getStreamName_asU8() ?? new Uint8Array()).toString('utf8');
}

export function createReadHandler(context: ServerContext, registerSubscription: (cancel: () => void) => () => void) {
  const { store } = context;

  function readStream(call: ReadCall, options: Options, encode: EncodeOptions): void {
    const streamName = streamNameOf(options);
    const streamOptions = options.getStream()!;
    const { RevisionOptionCase } = streamsPb.ReadReq.Options.StreamOptions;
    const from =
      streamOptions.getRevisionOptionCase() === RevisionOptionCase.REVISION
        ? BigInt(streamOptions.getRevision())
        : streamOptions.getRevisionOptionCase() === RevisionOptionCase.END
          ? 'end'
          : 'start';
    const direction = options.getReadDirection() === ReadDirection.BACKWARDS ? 'backwards' : 'forwards';
    const result = store.readStream(streamName, direction, from, BigInt(options.getCount()));

    if (result.kind === 'deleted') {
      call.emit('error', streamDeletedError(streamName));
      return;
    }
    if (result.kind === 'not_found') {
      // ReadStreamForwards/Backwards: NoStream -> a StreamNotFound message, then a normal end.
      const notFound = new streamsPb.ReadResp.StreamNotFound();
      const identifier = new sharedPb.StreamIdentifier();
      identifier.setStreamName(Buffer.from(streamName, 'utf8'));
      notFound.setStreamIdentifier(identifier);
      const response = new streamsPb.ReadResp();
      response.setStreamNotFound(notFound);
      call.write(response);
      call.end();
      return;
    }
    for (const event of result.events) call.write(toReadResp(event, encode));
    // compatibility >= 1 (sent by the Rust client inside @kurrent/bridge): report the stream's end.
    if ((options.getControlOption()?.getCompatibility() ?? 0) >= 1) {
      const last = new streamsPb.ReadResp();
      last.setLastStreamPosition(result.lastRevision.toString());
      call.write(last);
    }
    call.end();
  }

  function readAll(call: ReadCall, options: Options, encode: EncodeOptions): void {
    const all = options.getAll()!;
    const { AllOptionCase } = streamsPb.ReadReq.Options.AllOptions;
    const backwards = options.getReadDirection() === ReadDirection.BACKWARDS;
    const log = store.log();
    const filter = options.hasFilter() ? toEventFilter(options.getFilter()!) : () => true;
    const maxCount = BigInt(options.getCount());
    let sent = 0n;

    if (!backwards) {
      // Forwards from a position: inclusive.
      let index = 0;
      if (all.getAllOptionCase() === AllOptionCase.END) index = log.length;
      else if (all.getAllOptionCase() === AllOptionCase.POSITION) index = store.logIndexAtOrAfter(BigInt(all.getPosition()!.getCommitPosition()));
      for (; index < log.length && sent < maxCount; index++) {
        const event = log[index]!;
        if (!filter(event)) continue;
        call.write(toReadResp(event, encode));
        sent++;
      }
    } else {
      // Backwards from a position: the records before it.
      let index = log.length - 1;
      if (all.getAllOptionCase() === AllOptionCase.START) index = -1;
      else if (all.getAllOptionCase() === AllOptionCase.POSITION) index = store.logIndexAtOrAfter(BigInt(all.getPosition()!.getCommitPosition())) - 1;
      for (; index >= 0 && sent < maxCount; index--) {
        const event = log[index]!;
        if (!filter(event)) continue;
        call.write(toReadResp(event, encode));
        sent++;
      }
    }
    call.end();
  }

  function confirm(call: ReadCall): void {
    const confirmation = new streamsPb.ReadResp.SubscriptionConfirmation();
    confirmation.setSubscriptionId(randomUUID());
    const response = new streamsPb.ReadResp();
    response.setConfirmation(confirmation);
    call.write(response);
  }

  function caughtUp(call: ReadCall, at: { revision?: bigint; position?: bigint }): void {
    const message = new streamsPb.ReadResp.CaughtUp();
    message.setTimestamp(now());
    if (at.revision !== undefined && at.revision >= 0n) message.setStreamRevision(at.revision.toString());
    if (at.position !== undefined) {
      const position = new streamsPb.ReadResp.Position();
      position.setCommitPosition(at.position.toString());
      position.setPreparePosition(at.position.toString());
      message.setPosition(position);
    }
    const response = new streamsPb.ReadResp();
    response.setCaughtUp(message);
    call.write(response);
  }

  function checkpoint(call: ReadCall, position: bigint): void {
    const message = new streamsPb.ReadResp.Checkpoint();
    message.setCommitPosition(position.toString());
    message.setPreparePosition(position.toString());
    message.setTimestamp(now());
    const response = new streamsPb.ReadResp();
    response.setCheckpoint(message);
    call.write(response);
  }

  /** Ties a live subscription's lifetime to the call (client cancel, server stop). */
  function keepOpen(call: ReadCall, stopListening: () => void): void {
    let unregister = () => {};
    const close = () => {
      stopListening();
      unregister();
    };
    // On server stop the subscription just detaches; the dropped connection tells the client.
    unregister = registerSubscription(close);
    call.on('cancelled', close);
    call.on('close', close);
    call.on('error', close);
  }

  /**
   * Enumerator.StreamSubscription: from start, from end, or after a revision (exclusive);
   * catch up through the readable range, report CaughtUp, then deliver live events.
   */
  function subscribeToStream(call: ReadCall, options: Options, encode: EncodeOptions): void {
    const streamName = streamNameOf(options);
    const streamOptions = options.getStream()!;
    const { RevisionOptionCase } = streamsPb.ReadReq.Options.StreamOptions;
    let lastSent: bigint;
    switch (streamOptions.getRevisionOptionCase()) {
      case RevisionOptionCase.REVISION:
        lastSent = BigInt(streamOptions.getRevision());
        break;
      case RevisionOptionCase.END:
        lastSent = store.lastEventNumber(streamName) === DELETED_STREAM ? -1n : store.lastEventNumber(streamName);
        break;
      default:
        lastSent = -1n;
    }

    confirm(call);
    const catchUp = store.readStream(streamName, 'forwards', lastSent + 1n, BigInt(Number.MAX_SAFE_INTEGER));
    if (catchUp.kind === 'deleted') {
      call.emit('error', streamDeletedError(streamName));
      return;
    }
    if (catchUp.kind === 'ok') {
      for (const event of catchUp.events) {
        call.write(toReadResp(event, encode));
        lastSent = event.revision;
      }
    }
    caughtUp(call, { revision: lastSent });

    const stopListening = store.onCommit((events) => {
      for (const event of events) {
        if (event.streamName !== streamName) continue;
        if (event.revision === DELETED_STREAM) {
          stopListening();
          call.emit('error', streamDeletedError(streamName));
          return;
        }
        if (event.revision <= lastSent) continue;
        call.write(toReadResp(event, encode));
        lastSent = event.revision;
      }
    });
    keepOpen(call, stopListening);
  }

  /**
   * Enumerator.AllSubscription / AllSubscriptionFiltered: after a position (exclusive). A filtered
   * subscription sends a checkpoint every `checkpointIntervalMultiplier x maxSearchWindow` records
   * considered, and one when catch-up ends; then CaughtUp, then live events.
   */
  function subscribeToAll(call: ReadCall, options: Options, encode: EncodeOptions): void {
    const all = options.getAll()!;
    const { AllOptionCase } = streamsPb.ReadReq.Options.AllOptions;
    const filterOptions = options.hasFilter() ? options.getFilter()! : undefined;
    const filter = filterOptions ? toEventFilter(filterOptions) : () => true;
    const window = filterOptions?.hasMax() ? filterOptions.getMax() : DEFAULT_MAX_SEARCH_WINDOW;
    const checkpointInterval = filterOptions ? Math.max(1, filterOptions.getCheckpointintervalmultiplier()) * window : 0;

    const log = store.log();
    const fromEnd = all.getAllOptionCase() === AllOptionCase.END;
    let index = fromEnd ? log.length : 0;
    // The position the subscription has reached: the start position, then each record considered.
    let reached: bigint | undefined;
    if (all.getAllOptionCase() === AllOptionCase.POSITION) {
      reached = BigInt(all.getPosition()!.getCommitPosition());
      index = store.logIndexAtOrAfter(reached);
      if (index < log.length && log[index]!.position === reached) index++;
    }

    let considered = 0;
    const consider = (event: RecordedEvent) => {
      if (filter(event)) call.write(toReadResp(event, encode));
      reached = event.position;
      if (checkpointInterval > 0 && ++considered >= checkpointInterval) {
        considered = 0;
        checkpoint(call, event.position);
      }
    };

    confirm(call);
    for (; index < log.length; index++) consider(log[index]!);
    // Catch-up ends with a checkpoint (AllSubscriptionFiltered.CatchUp); from END there is no catch-up.
    if (filterOptions && !fromEnd && reached !== undefined) checkpoint(call, reached);
    caughtUp(call, { position: reached ?? log.at(-1)?.position });

    const stopListening = store.onCommit((events) => {
      for (const event of events) consider(event);
    });
    keepOpen(call, stopListening);
  }

  return function read(call: ReadCall): void {
    const options = call.request.getOptions();
    if (!options) {
      call.end();
      return;
    }
    const encode: EncodeOptions = { uuidAsString: options.getUuidOption()?.hasString() ?? true };
    const subscription = options.getCountOptionCase() === CountOptionCase.SUBSCRIPTION;
    const onStream = options.getStreamOptionCase() === StreamOptionCase.STREAM;
    if (onStream) {
      if (subscription) subscribeToStream(call, options, encode);
      else readStream(call, options, encode);
    } else if (subscription) subscribeToAll(call, options, encode);
    else readAll(call, options, encode);
  };
}

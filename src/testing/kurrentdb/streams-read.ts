// Streams.Read: the entry point of the RPC, and the two plain reads — a stream read and a $all
// read, forwards or backwards. Catch-up subscriptions (the same RPC with the `subscription` count
// option) live in streams-subscribe.ts, the messages in read-messages.ts. Follows
// Services/Transport/Grpc/Streams.Read.cs and the enumerators ReadStreamForwards/Backwards,
// ReadAllForwards/Backwards (filtered or not).
import type { ServerContext } from './context.js';
import { streamDeletedError, type RpcError } from './errors.js';
import { toEventFilter } from './event-filter.js';
import { streamsPb } from './proto.js';
import { encodeLastStreamPosition, encodeReadEvent, encodeStreamNotFound, StreamReadRequest } from './read-codec.js';
import { streamNameOf, type EncodeOptions, type ReadCall } from './read-messages.js';
import type { EventStore, RecordedEvent } from './store.js';
import { isSubscription, subscribe, type RegisterSubscription } from './streams-subscribe.js';

export { toReadResp } from './read-messages.js';

type Options = streamsPb.ReadReq.Options;
type ReadableStore = Pick<EventStore, 'readStream' | 'log' | 'logIndexAtOrAfter'>;

const { StreamOptionCase, ReadDirection } = streamsPb.ReadReq.Options;

/** A stream read's parameters from the options google-protobuf decoded (what `decodeStreamReadRequest` leaves to it). */
function streamReadOf(options: Options, encode: EncodeOptions): StreamReadRequest {
  const streamOptions = options.getStream()!;
  const { RevisionOptionCase } = streamsPb.ReadReq.Options.StreamOptions;
  const from =
    streamOptions.getRevisionOptionCase() === RevisionOptionCase.REVISION
      ? BigInt(streamOptions.getRevision())
      : streamOptions.getRevisionOptionCase() === RevisionOptionCase.END
        ? 'end'
        : 'start';
  const direction = options.getReadDirection() === ReadDirection.BACKWARDS ? 'backwards' : 'forwards';
  const compatibility = options.getControlOption()?.getCompatibility() ?? 0;
  return new StreamReadRequest(streamNameOf(options), from, direction, BigInt(options.getCount()), encode.uuidAsString, compatibility);
}

/**
 * A plain stream read's answer: its messages (encoded), or the error that is the whole answer.
 * ReadStreamForwards/Backwards: a missing stream is a StreamNotFound message and a normal end.
 */
export function streamReadAnswer(store: Pick<EventStore, 'readStream'>, read: StreamReadRequest): { messages: Buffer[]; error?: undefined } | { error: RpcError } {
  const { streamName } = read;
  const result = store.readStream(streamName, read.direction, read.from, read.count);
  if (result.kind === 'deleted') return { error: streamDeletedError(streamName) };
  if (result.kind === 'not_found') return { messages: [encodeStreamNotFound(streamName)] };
  const messages = result.events.map((event) => encodeReadEvent(event, read.uuidAsString));
  // compatibility >= 1 (sent by the Rust client inside @kurrent/bridge): report the stream's end.
  if (read.compatibility >= 1) messages.push(encodeLastStreamPosition(result.lastRevision));
  return { messages };
}

function readStream(store: ReadableStore, call: ReadCall, read: StreamReadRequest): void {
  const answer = streamReadAnswer(store, read);
  if (answer.error) {
    call.emit('error', answer.error);
    return;
  }
  for (const message of answer.messages) call.write(message);
  call.end();
}

/**
 * Resolves once `call` can take more (its buffer drained), or is gone (cancelled, closed): each
 * response waits for the client's HTTP/2 flow-control window, as KurrentDB's reads do.
 */
function writable(call: ReadCall): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      call.off('drain', done);
      call.off('cancelled', done);
      call.off('close', done);
      resolve();
    };
    call.on('drain', done);
    call.on('cancelled', done);
    call.on('close', done);
  });
}

/**
 * A $all read streams its records with back-pressure. Written all in one go (as before), a read
 * of 1,000,000 events held every encoded response in this process (4.8 GB) and sent nothing for
 * 17 s while encoding them — long enough, on a busy server, for the client's keep-alive to give
 * up (UNAVAILABLE). KurrentDB reads in pages and its gRPC writes wait for the window. The records
 * read are those in the log when the read starts, as before.
 */
async function readAll(store: ReadableStore, call: ReadCall, options: Options, encode: EncodeOptions): Promise<void> {
  const all = options.getAll()!;
  const { AllOptionCase } = streamsPb.ReadReq.Options.AllOptions;
  const backwards = options.getReadDirection() === ReadDirection.BACKWARDS;
  const log = store.log();
  const filter = options.hasFilter() ? toEventFilter(options.getFilter()!) : () => true;
  const maxCount = BigInt(options.getCount());
  let sent = 0n;
  const send = async (event: RecordedEvent): Promise<boolean> => {
    if (!call.write(encodeReadEvent(event, encode.uuidAsString))) await writable(call);
    sent++;
    return !call.cancelled && !call.destroyed;
  };

  if (!backwards) {
    // Forwards from a position: inclusive.
    let index = 0;
    const end = log.length;
    if (all.getAllOptionCase() === AllOptionCase.END) index = end;
    else if (all.getAllOptionCase() === AllOptionCase.POSITION) index = store.logIndexAtOrAfter(BigInt(all.getPosition()!.getCommitPosition()));
    for (; index < end && sent < maxCount; index++) {
      const event = log[index]!;
      if (!filter(event)) continue;
      if (!(await send(event))) return;
    }
  } else {
    // Backwards from a position: the records before it.
    let index = log.length - 1;
    if (all.getAllOptionCase() === AllOptionCase.START) index = -1;
    else if (all.getAllOptionCase() === AllOptionCase.POSITION) index = store.logIndexAtOrAfter(BigInt(all.getPosition()!.getCommitPosition())) - 1;
    for (; index >= 0 && sent < maxCount; index--) {
      const event = log[index]!;
      if (!filter(event)) continue;
      if (!(await send(event))) return;
    }
  }
  call.end();
}

export function createReadHandler(context: ServerContext, registerSubscription: RegisterSubscription) {
  const { store } = context;
  const subscriptions = { store, registerSubscription };
  return function read(call: ReadCall): void {
    // A plain stream read arrives decoded by hand (read-codec.ts, streamsV1ServiceDefinition).
    if (call.request instanceof StreamReadRequest) return readStream(store, call, call.request);
    const options = call.request.getOptions();
    if (!options) {
      call.end();
      return;
    }
    if (isSubscription(options)) return subscribe(subscriptions, call, options);
    const encode: EncodeOptions = { uuidAsString: options.getUuidOption()?.hasString() ?? true };
    if (options.getStreamOptionCase() === StreamOptionCase.STREAM) readStream(store, call, streamReadOf(options, encode));
    else void readAll(store, call, options, encode).catch((error: unknown) => call.destroy(error as Error));
  };
}

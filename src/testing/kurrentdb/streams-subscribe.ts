// Catch-up subscriptions of Streams.Read (the `subscription` count option), to a stream or to
// $all: catch up through the log, report CaughtUp, then deliver live commits until the call ends.
// Follows the enumerators in Services/Transport/Enumerators (StreamSubscription, AllSubscription,
// AllSubscriptionFiltered).
import { DELETED_STREAM } from './check-commit.js';
import { streamDeletedError } from './errors.js';
import { toEventFilter } from './event-filter.js';
import { streamsPb } from './proto.js';
import { encodeReadEvent } from './read-codec.js';
import { caughtUp, checkpoint, confirmation, streamNameOf, type EncodeOptions, type SubscriptionCall } from './read-messages.js';
import type { EventStore } from './store.js';
import type { RecordedEvent } from './store-types.js';

type Options = streamsPb.ReadReq.Options;

/** Registers a live subscription with the server so `stop()` can detach it; returns the unregister. */
export type RegisterSubscription = (cancel: () => void) => () => void;

/** What a subscription needs: the store to read and listen to, and the server's registry. */
export interface SubscriptionContext {
  readonly store: Pick<EventStore, 'readStream' | 'lastEventNumber' | 'log' | 'logIndexAtOrAfter' | 'onCommit'>;
  readonly registerSubscription: RegisterSubscription;
}

/** Default window of a filtered read/subscription (Enumerator.DefaultReadBatchSize = 32). */
const DEFAULT_MAX_SEARCH_WINDOW = 32;

/** Ties a live subscription's lifetime to the call (client cancel, server stop). */
function keepOpen(call: SubscriptionCall, registerSubscription: RegisterSubscription, stopListening: () => void): void {
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
export function subscribeToStream(context: SubscriptionContext, call: SubscriptionCall, options: Options, encode: EncodeOptions): void {
  const { store } = context;
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

  call.write(confirmation());
  const catchUp = store.readStream(streamName, 'forwards', lastSent + 1n, BigInt(Number.MAX_SAFE_INTEGER));
  if (catchUp.kind === 'deleted') {
    call.emit('error', streamDeletedError(streamName));
    return;
  }
  if (catchUp.kind === 'ok') {
    for (const event of catchUp.events) {
      call.write(encodeReadEvent(event, encode.uuidAsString));
      lastSent = event.revision;
    }
  }
  call.write(caughtUp({ revision: lastSent }));

  const stopListening = store.onCommit((events) => {
    for (const event of events) {
      if (event.streamName !== streamName) continue;
      if (event.revision === DELETED_STREAM) {
        stopListening();
        call.emit('error', streamDeletedError(streamName));
        return;
      }
      if (event.revision <= lastSent) continue;
      call.write(encodeReadEvent(event, encode.uuidAsString));
      lastSent = event.revision;
    }
  });
  keepOpen(call, context.registerSubscription, stopListening);
}

/**
 * Enumerator.AllSubscription / AllSubscriptionFiltered: after a position (exclusive). A filtered
 * subscription sends a checkpoint every `checkpointIntervalMultiplier x maxSearchWindow` records
 * considered, and one when catch-up ends; then CaughtUp, then live events.
 */
export function subscribeToAll(context: SubscriptionContext, call: SubscriptionCall, options: Options, encode: EncodeOptions): void {
  const { store } = context;
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
    if (filter(event)) call.write(encodeReadEvent(event, encode.uuidAsString));
    reached = event.position;
    if (checkpointInterval > 0 && ++considered >= checkpointInterval) {
      considered = 0;
      call.write(checkpoint(event.position));
    }
  };

  call.write(confirmation());
  for (; index < log.length; index++) consider(log[index]!);
  // Catch-up ends with a checkpoint (AllSubscriptionFiltered.CatchUp); from END there is no catch-up.
  if (filterOptions && !fromEnd && reached !== undefined) call.write(checkpoint(reached));
  call.write(caughtUp({ position: reached ?? log.at(-1)?.position }));

  const stopListening = store.onCommit((events) => {
    for (const event of events) consider(event);
  });
  keepOpen(call, context.registerSubscription, stopListening);
}

/** A subscription request (the `subscription` count option): to a stream or to $all. */
export function subscribe(context: SubscriptionContext, call: SubscriptionCall, options: Options): void {
  const encode: EncodeOptions = { uuidAsString: options.getUuidOption()?.hasString() ?? true };
  if (options.getStreamOptionCase() === streamsPb.ReadReq.Options.StreamOptionCase.STREAM) subscribeToStream(context, call, options, encode);
  else subscribeToAll(context, call, options, encode);
}

/** True when the request asks for a subscription. */
export function isSubscription(options: Options): boolean {
  return options.getCountOptionCase() === streamsPb.ReadReq.Options.CountOptionCase.SUBSCRIPTION;
}

// The server-side filter of $all reads and subscriptions (EventFilter.EventType / EventFilter.
// StreamName, Services/Storage/ReaderIndex/EventFilter.cs): prefixes, or a regular expression
// (unanchored, like .NET Regex.IsMatch), on the event type or the stream name.
import { streamsPb } from './proto.js';
import type { RecordedEvent } from './store-types.js';

export type EventFilter = (event: RecordedEvent) => boolean;

export function toEventFilter(filter: streamsPb.ReadReq.Options.FilterOptions): EventFilter {
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

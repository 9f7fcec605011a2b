/**
 * Per-stream appends (servers without multi-stream append): each stream's remaining events in
 * appends of at most the max append size, each at a specific revision; streams of a call go
 * concurrently (bounded), each in order. A crash may leave any subset of them written: the
 * receipts make the replay exact. Re-plans go on while they teach something, as in
 * multi-stream.ts.
 */
import { explainConflict, learnServerLimit, oversized, remainingOf } from './conflicts.js';
import { errorType, MAX_STALLED_ROUNDS, revisionText, type SinkContext } from './context.js';
import { splitBySize, type PreparedEvent } from './encoding.js';
import { SinkError } from './errors.js';
import type { Group } from './plan.js';
import { ASSUMED_NEW, deletedError, EMPTY_STREAM, type CallStates } from './stream-states.js';

/** Streams of one call appended at the same time. */
export const PER_STREAM_CONCURRENCY = 16;

/**
 * Appends the groups, up to `concurrency` streams at once, each in order; the first failure stops
 * taking new ones. One whole unit goes one stream after the other (a conflict stops the rest);
 * a batch of units, or a slice of a large one, goes {@link PER_STREAM_CONCURRENCY} at once.
 */
export async function appendStreams(ctx: SinkContext, groups: readonly Group[], appended: Set<string>, known: CallStates, concurrency: number): Promise<void> {
  // Tails that must be read (after a failure, or when first touches read first) are read in parallel.
  await ctx.states.resolve(groups.map((group) => group.stream), known);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (next < groups.length && !failed) {
      try {
        await appendPerStream(ctx, groups[next++]!, appended, known);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  // Settles only when every worker has: no append of this call is still in flight when it fails.
  const results = await Promise.allSettled(Array.from({ length: Math.max(1, Math.min(concurrency, groups.length)) }, worker));
  const failure = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failure) throw failure.reason;
}

/** One stream's remaining events, in appends of at most the max append size, each at a specific revision. */
export async function appendPerStream(ctx: SinkContext, group: Group, appended: Set<string>, known: CallStates): Promise<void> {
  const { stream } = group;
  // After an optimistic first attempt met an existing stream, the next request re-sends it at
  // the right revision: a retry of the same request, so the hook is not called again.
  let resend = false;
  let stalled = 0;
  for (;;) {
    await ctx.states.resolve([stream], known);
    const todo = await remainingOf(ctx, group, known);
    if (todo.length === 0) return;
    const round = await appendParts(ctx, stream, splitBySize(todo, ctx.limit, (event) => event.size), appended, known, resend);
    if (round.kind === 'done') return;
    resend = round.resend;
    stalled = round.progressed ? 0 : stalled + 1;
    if (stalled >= MAX_STALLED_ROUNDS) {
      throw new SinkError('SINK_APPEND_FAILED', `stream "${stream}" kept changing under the sink (${MAX_STALLED_ROUNDS} re-plans in a row without progress)`, { stream });
    }
  }
}

type Round = { readonly kind: 'done' } | { readonly kind: 'replan'; readonly progressed: boolean; readonly resend: boolean };

async function appendParts(ctx: SinkContext, stream: string, parts: PreparedEvent[][], appended: Set<string>, known: CallStates, resendFirst: boolean): Promise<Round> {
  let resend = resendFirst;
  let progressed = false;
  while (parts.length > 0) {
    const part = parts.shift()!;
    const state = known.get(stream)!;
    const optimistic = state === ASSUMED_NEW;
    const expected = state.revision;
    if (!resend) await ctx.hooks.beforeAppend?.({ streams: [stream], events: part.length, mode: 'per-stream' });
    resend = false;
    const head = ctx.states.head();
    try {
      const result = await ctx.retrying('append', { stream, events: part.length, expectedRevision: revisionText(expected) }, () =>
        ctx.client.appendToStream(
          stream,
          part.map((event) => event.eventData),
          { streamState: expected },
        ),
      );
      const answer = ctx.states.classify(result.position?.commit, head);
      if (optimistic && answer !== 'fresh') {
        // The stream existed and began with these very events (or we cannot tell): nothing was
        // duplicated, but the stream may go on after them — learn its tail and re-plan.
        if (answer === 'unknown') for (const event of part) appended.add(event.id);
        ctx.states.optimisticMissed(1);
        await ctx.states.refresh([stream], known);
        return { kind: 'replan', progressed: true, resend: false };
      }
      const last = part[part.length - 1]!;
      ctx.states.learned(stream, result.nextExpectedRevision, last, known);
      for (const event of part) appended.add(event.id);
      progressed = true;
    } catch (error) {
      const type = errorType(error);
      if (type === 'wrong-expected-version') {
        if (optimistic) {
          // Not a new stream: nothing was written; read its tail and apply the receipts.
          await ctx.states.refresh([stream], known);
          if (known.get(stream) !== EMPTY_STREAM) ctx.states.optimisticMissed(1);
          return { kind: 'replan', progressed: true, resend: true };
        }
        const moved = await explainConflict(ctx, stream, expected, part[0]!.receipt, known, error);
        return { kind: 'replan', progressed: progressed || moved, resend: false };
      }
      if (type === 'maximum-append-size-exceeded') {
        const serverLimit = (error as { maxAppendSize?: unknown }).maxAppendSize;
        const before = ctx.limit;
        learnServerLimit(ctx, serverLimit);
        if (part.length === 1) throw oversized(part[0]!, part[0]!.size, typeof serverLimit === 'number' ? serverLimit : ctx.limit);
        if (ctx.limit < before) {
          // The server's limit is smaller than configured: re-cut this part by it.
          parts.unshift(...splitBySize(part, ctx.limit, (event) => event.size));
        } else {
          // Our measure and the server's disagree: halve and go on (revisions continue part by part).
          const half = Math.ceil(part.length / 2);
          parts.unshift(part.slice(0, half), part.slice(half));
        }
        continue;
      }
      ctx.states.drop(stream, known); // did it land? the next call re-reads the tail
      if (type === 'stream-deleted' || type === 'stream-tombstoned') throw deletedError(stream, error);
      throw error;
    }
  }
  return { kind: 'done' };
}

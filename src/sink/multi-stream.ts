/**
 * Multi-stream appends (KurrentDB 25.1+ AppendSession): a call's events across all its streams
 * in one atomic append — several when the call exceeds the max append size, cut at unit
 * boundaries where possible.
 *
 * Each round plans what remains (stream states → receipts), cuts it into appends and sends them
 * in order. A wrong expected version ends the round: the streams it concerns are learned (tails
 * read, or the conflict explained by our own earlier write — a foreign writer stops the line,
 * naming the stream) and the next round re-plans. Rounds go on as long as each one teaches
 * something (events written, stream states learned); `MAX_STALLED_ROUNDS` rounds in a row that
 * teach nothing end in `SINK_APPEND_FAILED`. After an optimistic first touch met existing
 * streams, every other stream of the call still assumed new has its tail read in the same
 * parallel pass, so a call over many existing streams costs one failed append, not one per cut.
 */
import type { AppendStreamRequest } from '@kurrent/kurrentdb-client';
import { explainConflict, oversized, learnServerLimit, remainingGroups } from './conflicts.js';
import { errorMessage, errorType, MAX_STALLED_ROUNDS, type SinkContext } from './context.js';
import type { PreparedEvent } from './encoding.js';
import { SinkError } from './errors.js';
import { chunkByUnits, type Group } from './plan.js';
import { ASSUMED_NEW, deletedError, EMPTY_STREAM, type CallStates, type Revision } from './stream-states.js';

/** How one round ended. */
type Round =
  | { readonly kind: 'done' }
  /** Re-plan: `progressed` when the round wrote events or learned a stream's state. */
  | { readonly kind: 'replan'; readonly progressed: boolean; readonly resend: boolean }
  /** The server does not serve multi-stream append (mode `auto` falls back to per-stream). */
  | { readonly kind: 'unsupported' };

interface CallInput {
  readonly label: string;
  readonly groups: readonly Group[];
  readonly unitOf: ReadonlyMap<PreparedEvent, number>;
  /** Units (by index) that are slices of a larger unit: their cuts were announced already. */
  readonly slices: ReadonlySet<number>;
  /** Ids of events the appends wrote (or found written by identical earlier attempts). */
  readonly appended: Set<string>;
  /** The call's stream states (see stream-states.ts). */
  readonly known: CallStates;
}

/** Appends the call. Resolves `false` when the server turned out not to serve multi-stream append. */
export async function appendMultiStream(ctx: SinkContext, input: CallInput): Promise<boolean> {
  const { groups, known } = input;
  let callLimit = ctx.limit;
  let resend = false; // re-sending after an optimistic first attempt is a retry: no second hook call
  let stalled = 0;
  for (;;) {
    await ctx.states.resolve(groups.map((group) => group.stream), known);
    const plans = await remainingGroups(ctx, groups, known);
    if (plans.length === 0) return true;
    const max = Math.min(callLimit, ctx.limit);
    const { chunks, split } = chunkByUnits(plans, max, input.unitOf);
    if (chunks.length > 1) ctx.stats.splitCalls += 1;
    const whole = split.filter((unit) => !input.slices.has(unit));
    if (whole.length > 0) {
      ctx.logger.warn('kurrentdb sink: unit exceeds the max append size; it is appended in several multi-stream appends (each atomic, the unit not)', {
        unit: input.label,
        appends: chunks.length,
        maxAppendSize: max,
      });
    }
    const round = await appendChunks(ctx, input, chunks, resend, (smaller) => (callLimit = smaller));
    if (round.kind === 'done') return true;
    if (round.kind === 'unsupported') return false;
    resend = round.resend;
    stalled = round.progressed ? 0 : stalled + 1;
    if (stalled >= MAX_STALLED_ROUNDS) {
      throw new SinkError('SINK_APPEND_FAILED', `streams of ${input.label} kept changing under the sink (${MAX_STALLED_ROUNDS} re-plans in a row without progress)`, { unit: input.label });
    }
  }
}

/** Sends the chunks in order; the first that fails ends the round. */
async function appendChunks(ctx: SinkContext, input: CallInput, chunks: readonly Group[][], resendFirst: boolean, shrink: (limit: number) => void): Promise<Round> {
  const { known, appended } = input;
  let resend = resendFirst;
  let progressed = false;
  for (const chunk of chunks) {
    const requests = chunk.map((plan) => ({ streamName: plan.stream, expectedState: known.get(plan.stream)!.revision, events: plan.events }));
    const optimistic = new Set(chunk.filter((plan) => known.get(plan.stream) === ASSUMED_NEW).map((plan) => plan.stream));
    const eventCount = chunk.reduce((n, plan) => n + plan.events.length, 0);
    if (!resend) await ctx.hooks.beforeAppend?.({ streams: chunk.map((plan) => plan.stream), events: eventCount, mode: 'multi-stream' });
    resend = false;
    const head = ctx.states.head();
    try {
      const result = await ctx.retrying('multi-stream-append', { streams: chunk.map((plan) => plan.stream), events: eventCount }, () =>
        ctx.encoded
          ? ctx.sendEncoded(requests.map((r) => ({ streamName: r.streamName, expectedState: r.expectedState, records: r.events.map((event) => event.record) })))
          : ctx.client.multiStreamAppend(requests.map((r): AppendStreamRequest => ({ streamName: r.streamName, expectedState: r.expectedState, events: r.events.map((event) => event.eventData) }))),
      );
      const answer = ctx.states.classify(result.position, head);
      const revisions = new Map(result.responses.map((response) => [response.streamName, response.revision]));
      for (const plan of chunk) {
        if (optimistic.has(plan.stream) && answer !== 'fresh') {
          // Idempotent (every stream of the call, or it would have failed) or cannot tell: these
          // streams existed with these events and may go on after them — tails below.
          if (answer === 'unknown') for (const event of plan.events) appended.add(event.id);
          continue;
        }
        const revision = revisions.get(plan.stream);
        const last = plan.events[plan.events.length - 1]!;
        if (revision === undefined) ctx.states.drop(plan.stream, known);
        else ctx.states.learned(plan.stream, revision, last, known);
        for (const event of plan.events) appended.add(event.id);
      }
      progressed = true;
      if (optimistic.size > 0 && answer !== 'fresh') {
        ctx.states.optimisticMissed(optimistic.size);
        await ctx.states.refresh(optimistic, known);
        return { kind: 'replan', progressed, resend: false };
      }
    } catch (error) {
      const type = errorType(error);
      if (type === 'wrong-expected-version') {
        const learned = await learnAfterConflict(ctx, input, chunk, requests, optimistic, error);
        return { kind: 'replan', progressed: learned.progressed || progressed, resend: learned.resend };
      }
      for (const plan of chunk) ctx.states.drop(plan.stream, known);
      if (type === 'unsupported' || (error as { code?: unknown }).code === 12 /* UNIMPLEMENTED */) {
        if (ctx.config.mode === 'multi-stream') {
          throw new SinkError('SINK_MULTI_STREAM_UNSUPPORTED', 'the server no longer serves multi-stream append (mode "multi-stream" was required)', {}, { cause: error });
        }
        ctx.logger.warn('kurrentdb sink: the server does not serve multi-stream append; switching to per-stream appends', { error: errorMessage(error) });
        ctx.mode = 'per-stream';
        return { kind: 'unsupported' };
      }
      if (type === 'append-record-size-exceeded') {
        const e = error as { stream?: string; recordId?: string; size?: number; maxSize?: number };
        const event = chunk.flatMap((plan) => plan.events).find((candidate) => candidate.id === e.recordId) ?? chunk[0]!.events[0]!;
        throw oversized(event, e.size ?? event.multiStreamSize, e.maxSize ?? ctx.limit);
      }
      if (type === 'transaction-max-size-exceeded' || type === 'maximum-append-size-exceeded') {
        const serverLimit = (error as { maxSize?: unknown; maxAppendSize?: unknown }).maxSize ?? (error as { maxAppendSize?: unknown }).maxAppendSize;
        const before = ctx.limit;
        learnServerLimit(ctx, serverLimit);
        const only = chunk.length === 1 && chunk[0]!.events.length === 1 ? chunk[0]!.events[0]! : null;
        if (only) throw oversized(only, only.multiStreamSize, typeof serverLimit === 'number' ? serverLimit : ctx.limit);
        if (ctx.limit >= before) {
          // Our measure and the server's disagree: halve the chunk size for this call.
          const chunkSize = chunk.reduce((n, plan) => n + plan.events.reduce((m, event) => m + event.multiStreamSize, 0), 0);
          shrink(Math.max(1, Math.floor(chunkSize / 2)));
        }
        return { kind: 'replan', progressed: true, resend: false };
      }
      if (type === 'stream-deleted' || type === 'stream-tombstoned') {
        const stream = (error as { streamName?: string; stream?: string }).streamName ?? (error as { stream?: string }).stream ?? chunk[0]!.stream;
        throw deletedError(stream, error);
      }
      throw error;
    }
  }
  return { kind: 'done' };
}

/**
 * A chunk met a wrong expected version: nothing of it was written. The error names one failing
 * stream; streams assumed new may exist too. Their tails are read at once (and, once first
 * touches read first, every other stream of the call still assumed new), and a known stream's
 * conflict is explained. Says whether anything was learned, and whether the next attempt re-sends
 * this one (only optimistic streams were in the way: same events, right revisions).
 */
async function learnAfterConflict(
  ctx: SinkContext,
  input: CallInput,
  chunk: readonly Group[],
  requests: readonly { readonly expectedState: Revision; readonly events: readonly PreparedEvent[] }[],
  optimistic: ReadonlySet<string>,
  error: unknown,
): Promise<{ progressed: boolean; resend: boolean }> {
  const { known } = input;
  const conflicted = (error as { streamName?: unknown }).streamName;
  const found = chunk.findIndex((plan) => plan.stream === conflicted);
  const index = found >= 0 ? found : optimistic.size > 0 ? -1 : 0;
  const named = index >= 0 && !optimistic.has(chunk[index]!.stream) ? index : -1;
  const [, moved] = await Promise.all([
    ctx.states.refresh(optimistic, known),
    named >= 0 ? explainConflict(ctx, chunk[named]!.stream, requests[named]!.expectedState, chunk[named]!.events[0]!.receipt, known, error) : Promise.resolve(false),
  ]);
  let existing = 0;
  for (const stream of optimistic) if (known.get(stream) !== EMPTY_STREAM) existing += 1;
  ctx.states.optimisticMissed(existing);
  if (ctx.states.firstTouch === 'read') {
    const rest: string[] = [];
    for (const [stream, state] of known) if (state === ASSUMED_NEW) rest.push(stream);
    await ctx.states.refresh(rest, known);
  }
  return { progressed: optimistic.size > 0 || moved, resend: named < 0 };
}

/**
 * Conflicts and limits met while appending: what remains of a group given what the stream holds
 * (a tail that is not ours stops the line, loudly, naming the stream), why a revision moved
 * (an earlier attempt of ours landed, or another writer), events over the max append size.
 */
import type { PreparedEvent } from './encoding.js';
import { OversizedEventError, StreamConflictError, type StreamConflictDetails } from './errors.js';
import { remaining, remainingById, type Group } from './plan.js';
import { compareReceipts, ordinalsComparable, receiptsComparable, flatReceiptMetadata, type Receipt } from './receipt.js';
import type { CallStates, Revision, StreamState } from './stream-states.js';
import { revisionText, type SinkContext } from './context.js';

export function conflictError(
  ctx: SinkContext,
  stream: string,
  reason: StreamConflictDetails['reason'],
  expected: string,
  state: StreamState,
  ours: Receipt | null,
  known?: CallStates,
  cause?: unknown,
): StreamConflictError {
  ctx.states.drop(stream, known);
  return new StreamConflictError(
    {
      stream,
      expected,
      actual: revisionText(state.revision),
      ours: ours ? flatReceiptMetadata(ours) : null,
      theirs: state.receipt ? flatReceiptMetadata(state.receipt) : null,
      tailEvent: state.tail ? { id: state.tail.id, type: state.tail.type, revision: state.tail.revision.toString() } : null,
      reason,
    },
    cause === undefined ? undefined : { cause },
  );
}

/**
 * After a wrong-expected-version on a stream whose state we knew: re-read the tail (a state
 * carried over a restart that was out of date is a cache miss, nothing more: re-plan). If its
 * receipt is ours and at or past the first event we tried (or of the same unit numbered in the
 * other scope: the re-plan tells by id), an earlier attempt landed — the caller re-plans.
 * Otherwise: another writer. Says whether the stream's revision moved (progress).
 */
export async function explainConflict(ctx: SinkContext, stream: string, expected: Revision, first: Receipt, known: CallStates, cause: unknown): Promise<boolean> {
  const wasCarried = known.get(stream)?.carried === true;
  // Carried over a restart (state-carry.ts): hints, which the first conflict ends — their streams
  // are first touches again, and this call's are read now with the stream in conflict.
  const dropped = ctx.states.distrustCarried();
  const toRead = new Set([stream]);
  for (const [name, state] of known) if (state.carried) toRead.add(name);
  if (dropped > 0) ctx.logger.info('kurrentdb sink: a stream had moved since its state was carried over the restart; carried states are not used from now on', { stream, dropped, readNow: toRead.size });
  await ctx.states.refresh(toRead, known);
  const fresh = known.get(stream)!;
  // A carried state that was out of date: as a cache miss — re-plan with the tail as it is now.
  if (wasCarried) return fresh.revision !== expected;
  const theirs = fresh.receipt;
  if (theirs && receiptsComparable(theirs, first) && (!ordinalsComparable(theirs, first) || compareReceipts(theirs, first) >= 0)) {
    ctx.logger.info('kurrentdb sink: an earlier attempt had landed; continuing after its receipt', {
      stream,
      expected: revisionText(expected),
      actual: revisionText(fresh.revision),
    });
    return fresh.revision !== expected;
  }
  const reason = !theirs || theirs.assembler !== first.assembler ? 'foreign-tail' : receiptsComparable(theirs, first) ? 'unexplained-revision' : 'receipt-from-other-source';
  throw conflictError(ctx, stream, reason, revisionText(expected), fresh, first, known, cause);
}

export function oversized(event: PreparedEvent, size: number, max: number): OversizedEventError {
  const { receipt } = event;
  const position = receipt.kind === 'transaction' ? { commitLsn: receipt.commitLsn, xid: receipt.xid } : null;
  return new OversizedEventError({ stream: event.stream, type: event.type, eventId: event.id, size, limit: max, position });
}

/** The server said its max append size is smaller than ours: use the server's. */
export function learnServerLimit(ctx: SinkContext, serverLimit: unknown): void {
  if (typeof serverLimit === 'number' && serverLimit > 0 && serverLimit < ctx.limit) {
    ctx.logger.warn('kurrentdb sink: the server\'s max append size is smaller than configured; using the server\'s', { configured: ctx.limit, server: serverLimit });
    ctx.limit = serverLimit;
  }
}

/**
 * What remains of `group` after what its stream holds (`known` has its state): the events, or —
 * when the tail holds the same unit numbered the other way — a promise of them (a read-back).
 * Throws on a conflict.
 */
function remainingNow(ctx: SinkContext, group: Group, known: CallStates): PreparedEvent[] | Promise<PreparedEvent[]> {
  const state = known.get(group.stream)!;
  const plan = remaining(group, state);
  if (plan.kind === 'todo') return plan.events;
  if (plan.kind === 'conflict') throw conflictError(ctx, group.stream, plan.reason, plan.expected, state, group.events[0]!.receipt, known);
  return ctx.states.unitIds(group.stream, plan.unit).then((applied) => remainingById(group, plan.unit, applied));
}

/** {@link remainingNow} of one group, as a promise. */
export async function remainingOf(ctx: SinkContext, group: Group, known: CallStates): Promise<PreparedEvent[]> {
  return remainingNow(ctx, group, known);
}

/**
 * {@link remainingNow} for every group; only groups with something left. Synchronous work for
 * every group (no promise per group: a call carries hundreds); read-backs, rare, in parallel.
 */
export async function remainingGroups(ctx: SinkContext, groups: readonly Group[], known: CallStates): Promise<Group[]> {
  const todo: (PreparedEvent[] | Promise<PreparedEvent[]>)[] = [];
  try {
    for (const group of groups) todo.push(remainingNow(ctx, group, known));
  } catch (error) {
    // A conflict: the read-backs already under way are of no use, and must not fail unheard.
    for (const events of todo) if (events instanceof Promise) events.catch(() => undefined);
    throw error;
  }
  const reading = todo.some((events) => events instanceof Promise);
  const settled = reading ? await Promise.all(todo) : (todo as PreparedEvent[][]);
  const plans: Group[] = [];
  groups.forEach((group, i) => {
    if (settled[i]!.length > 0) plans.push({ stream: group.stream, events: settled[i]! });
  });
  return plans;
}

/**
 * The transaction loop: transactions taken from the source one by one, in commit order, each
 * handed on (synchronously when it can be) until a stop is requested or the source ends. A
 * transaction taken but not handed on is released unacknowledged: the slot sends it again.
 */
import type { CommittedTransaction } from '../buffer/index.js';
import type { PostgresSource } from '../source/index.js';
import type { RunControl } from './run-control.js';

/** Runs the loop; resolves `'source-ended'` when the source ended, `'stopped'` on a stop. */
export async function runTransactionLoop(
  source: Pick<PostgresSource, 'takeNow' | 'transactions'>,
  control: RunControl,
  handle: (tx: CommittedTransaction) => Promise<void> | undefined,
): Promise<'stopped' | 'source-ended'> {
  const iterator = source.transactions()[Symbol.asyncIterator]();
  for (;;) {
    if (control.stopRequested) return 'stopped';
    // A queue of transactions is taken one by one without waiting; the iterator when it is empty.
    const queuedNow = source.takeNow();
    if (queuedNow) {
      const pending = handle(queuedNow);
      if (pending) await pending;
      continue;
    }
    const next = iterator.next();
    const winner = await control.until(next);
    if (winner === 'stop') {
      // The pending next() settles when the source closes; a transaction it yields is not acknowledged (replayed later).
      void next.then((r) => (r.done ? undefined : r.value.release()), () => undefined);
      return 'stopped';
    }
    if (winner.done) return 'source-ended';
    if (control.stopRequested) {
      await winner.value.release();
      return 'stopped';
    }
    const pending = handle(winner.value);
    if (pending) await pending;
  }
}

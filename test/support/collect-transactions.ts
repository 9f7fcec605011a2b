// Drains a source's transactions in the background, for capture tests: what arrived, and a
// deadline-bound wait for a condition on it (never a fixed sleep).
import { vi } from 'vitest';
import type { CommittedTransaction } from '../../src/buffer/index.js';
import type { PostgresSource } from '../../src/source/index.js';
import type { Change, InsertChange } from '../../src/source/types.js';

export interface Received {
  readonly tx: CommittedTransaction;
  readonly changes: Change[];
}

export interface CollectOptions {
  /** Acknowledge (and release) each transaction once collected, as a durable consumer would. Default: false. */
  readonly acknowledge?: boolean;
}

export interface Collector {
  readonly received: Received[];
  readonly state: { error: unknown };
  /** Settles when the source's iterator ends (after `close()`). */
  readonly done: Promise<void>;
  /** Waits, with a deadline, until `n` transactions arrived or `predicate` holds. */
  until(condition: number | ((received: Received[]) => boolean), timeout?: number): Promise<Received[]>;
}

export function collectTransactions(source: PostgresSource, options: CollectOptions = {}): Collector {
  const received: Received[] = [];
  const state: { error: unknown } = { error: undefined };
  const done = (async () => {
    try {
      for await (const tx of source.transactions()) {
        received.push({ tx, changes: await tx.toArray() });
        if (options.acknowledge) {
          source.acknowledge(tx);
          await tx.release();
        }
      }
    } catch (error) {
      state.error = error;
    }
  })();
  return {
    received,
    state,
    done,
    async until(condition, timeout = 30_000) {
      const holds = typeof condition === 'number' ? (r: Received[]) => r.length >= condition : condition;
      await vi.waitFor(
        () => {
          if (state.error) throw new Error(`source failed: ${String(state.error)}`);
          if (!holds(received)) throw new Error(`waiting; ${received.length} transactions so far`);
        },
        { timeout, interval: 20 },
      );
      return received;
    },
  };
}

/** The `id` of each transaction's first change (an insert), in arrival order. */
export const insertedIds = (received: readonly Received[]): unknown[] => received.map((r) => (r.changes[0] as InsertChange).after.id);

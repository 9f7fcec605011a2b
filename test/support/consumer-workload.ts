// The live workload of the consumer crash test: ledger transactions of 1–3 rows (70 % deposits of
// 1–1,000, 30 % withdrawals of 1–500) over a fixed set of accounts, their content from a seeded
// PRNG, written in the background at a steady rate in rounds: `addRound(n)` lets n more
// transactions through, so a round is written while the consumer it belongs to runs (and, when it
// is killed first, while the next one starts). The model holds what was written, per account.
import { createPrng } from '../../examples/invoicing/workload.js';
import type { LedgerEntry, LedgerWriter } from './consumer-ledger-writer.js';

export interface LedgerWorkload {
  /** Balance per account of everything written. */
  readonly model: Readonly<Record<string, number>>;
  /** Transactions per round, as added. */
  readonly rounds: readonly number[];
  readonly transactions: number;
  readonly events: number;
  addRound(transactions: number): void;
  /** Resolves once every round added so far is written (deadline). */
  written(timeoutMs?: number): Promise<void>;
  /** Ends the background writer; rethrows its failure, if any. */
  stop(): Promise<void>;
}

export function startLedgerWorkload(writer: LedgerWriter, options: { seed: number; accounts: number; transactionsPerSecond: number }): LedgerWorkload {
  const random = createPrng(options.seed);
  const model: Record<string, number> = {};
  const rounds: number[] = [];
  let quota = 0;
  let transactions = 0;
  let events = 0;
  let stopping = false;
  let failure: unknown = null;
  let wake: (() => void) | null = null;

  async function writeOne(): Promise<void> {
    const entries: LedgerEntry[] = Array.from({ length: 1 + Math.floor(random() * 3) }, () => {
      const account = `acc${String(Math.floor(random() * options.accounts)).padStart(2, '0')}`;
      const withdrawal = random() < 0.3;
      const amount = 1 + Math.floor(random() * (withdrawal ? 500 : 1_000));
      model[account] = (model[account] ?? 0) + (withdrawal ? -amount : amount);
      return { account, kind: withdrawal ? 'withdrawal' : 'deposit', amount };
    });
    events += await writer.write(entries);
    transactions++;
  }

  const loop = (async () => {
    let due = Date.now();
    while (!stopping) {
      if (transactions >= quota) {
        await new Promise<void>((resolve) => (wake = resolve));
        due = Date.now();
        continue;
      }
      await writeOne();
      due += 1_000 / options.transactionsPerSecond;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
  })().catch((error: unknown) => {
    failure = error;
  });

  return {
    model,
    rounds,
    get transactions() {
      return transactions;
    },
    get events() {
      return events;
    },
    addRound(count) {
      rounds.push(count);
      quota += count;
      wake?.();
    },
    async written(timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      while (transactions < quota) {
        if (failure) throw failure;
        if (Date.now() > deadline) throw new Error(`the workload wrote ${transactions} of ${quota} transactions within ${timeoutMs} ms`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    async stop() {
      stopping = true;
      wake?.();
      await loop;
      if (failure) throw failure;
    },
  };
}

/**
 * The consumer bench's events, written the way the assembler writes them (as
 * test/integration/consumer-rig.ts does): ledger rows of deposits and withdrawals, mapped by a real
 * mapper (`mapUnit`: standard metadata, deterministic ids) and appended by the real sink (receipts)
 * into a KurrentDB. Streams `account-<n>`, entity `account/<n>`; several events per source
 * transaction, on distinct accounts. Returns the balance each account should end with.
 */
import { createKurrentDBSink, defineMapper, encodeCheckpoint, formatLsn, insert, mapUnit, transaction } from './subject.js';

export const LEDGER_SYSTEM_ID = '7400000000000000042';

export interface LedgerWrite {
  readonly events: number;
  readonly transactions: number;
  /** Account id → balance after every event (deposits add, withdrawals subtract). */
  readonly expected: ReadonlyMap<string, number>;
  readonly seconds: number;
}

/** Deposits → `Deposited`, withdrawals → `Withdrawn`, on `account-<id>`. */
const ledger = defineMapper({
  name: 'ledger',
  tables: { 'public.ledger': { columns: ['id', 'account', 'kind', 'amount'] } },
  map: (tx) =>
    tx.inserts('public.ledger').map(({ after: row }) => ({
      stream: `account-${String(row['account'])}`,
      entity: { type: 'account', id: String(row['account']) },
      type: row['kind'] === 'withdrawal' ? 'Withdrawn' : 'Deposited',
      version: 1,
      data: { account: row['account'], amount: row['amount'] },
    })),
});

export type LedgerEvents = { Deposited: { account: string; amount: number }; Withdrawn: { account: string; amount: number } };

/** A small deterministic PRNG (mulberry32), so every run writes the same ledger. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Writes `events` events over `accounts` accounts, `perTransaction` per source transaction (the last may be smaller). */
export async function writeLedger(connectionString: string, events: number, accounts: number, perTransaction: number): Promise<LedgerWrite> {
  const sink = await createKurrentDBSink({ connectionString, assembler: 'ledger-asm', checkpointStream: false });
  const context = { assembler: 'ledger-asm', sourceIdentity: LEDGER_SYSTEM_ID };
  const next = random(42);
  const expected = new Map<string, number>();
  const t0 = performance.now();
  let rowId = 0;
  let written = 0;
  let transactions = 0;
  try {
    while (written < events) {
      const size = Math.min(perTransaction, events - written, accounts);
      const picked = new Set<string>();
      while (picked.size < size) picked.add(String(1 + Math.floor(next() * accounts)));
      const changes = [...picked].map((account) => {
        const kind = next() < 0.7 ? 'deposit' : 'withdrawal';
        const amount = 1 + Math.floor(next() * 100);
        expected.set(account, (expected.get(account) ?? 0) + (kind === 'deposit' ? amount : -amount));
        return insert('public.ledger', { id: ++rowId, account, kind, amount });
      });
      transactions++;
      const commitLsn = formatLsn(0x1_0000_0000n + BigInt(transactions) * 0x200n);
      const xid = 10_000 + transactions;
      const base = transaction(changes, { commitLsn, xid, systemId: LEDGER_SYSTEM_ID });
      const checkpoint = encodeCheckpoint({ systemId: LEDGER_SYSTEM_ID, timeline: 1, slot: 'ledger', commitLsn, xid });
      const { events: mapped } = mapUnit([ledger], { ...base, position: { ...base.position, checkpoint } }, context);
      await sink.append({ position: { checkpoint, commitLsn, xid, systemId: LEDGER_SYSTEM_ID }, events: mapped });
      written += mapped.length;
    }
  } finally {
    await sink.close();
  }
  return { events: written, transactions, expected, seconds: (performance.now() - t0) / 1000 };
}

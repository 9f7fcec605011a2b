// The source side of the consumer crash test's ledger: ledger rows (deposits and withdrawals of
// accounts) mapped by a real mapper (`mapUnit`: standard metadata, deterministic event ids) and
// appended by the real sink, so the events carry the metadata the assembler writes. The consumer
// side (the projection) is consumer-ledger.ts.
import { defineMapper } from '../../src/mapping/define-mapper.js';
import { mapUnit } from '../../src/mapping/map-unit.js';
import { createKurrentDBSink } from '../../src/sink/index.js';
import type { Sink } from '../../src/sink/types.js';
import { encodeCheckpoint } from '../../src/source/position.js';
import { insert, transaction } from '../../src/testing/mapper-kit.js';

export const LEDGER_SYSTEM_ID = '7400000000000000077';

export interface LedgerEntry {
  readonly account: string;
  readonly kind: 'deposit' | 'withdrawal';
  readonly amount: number;
}

const ledgerMapper = defineMapper({
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

export interface LedgerWriter {
  /** Maps and appends one source transaction of ledger rows; returns the number of events written. */
  write(entries: readonly LedgerEntry[]): Promise<number>;
  close(): Promise<void>;
}

/** Writes source transactions at increasing commit LSNs and xids, through the real sink. */
export async function createLedgerWriter(kurrentdb: string): Promise<LedgerWriter> {
  const sink: Sink = await createKurrentDBSink({ connectionString: kurrentdb, assembler: 'ledger-asm', checkpointStream: false });
  const context = { assembler: 'ledger-asm', sourceIdentity: LEDGER_SYSTEM_ID };
  let rowId = 0;
  let xid = 1000;
  let lsn = 0x100000;
  return {
    async write(entries) {
      xid++;
      lsn += 0x100;
      const commitLsn = `0/${lsn.toString(16).toUpperCase()}`;
      const changes = entries.map((e) => insert('public.ledger', { id: ++rowId, account: e.account, kind: e.kind, amount: e.amount }));
      const base = transaction(changes, { commitLsn, xid, systemId: LEDGER_SYSTEM_ID });
      const checkpoint = encodeCheckpoint({ systemId: LEDGER_SYSTEM_ID, timeline: 1, slot: 'ledger', commitLsn, xid });
      const { events } = mapUnit([ledgerMapper], { ...base, position: { ...base.position, checkpoint } }, context);
      await sink.append({ position: { checkpoint, commitLsn, xid, systemId: LEDGER_SYSTEM_ID }, events });
      return events.length;
    },
    close: () => sink.close(),
  };
}


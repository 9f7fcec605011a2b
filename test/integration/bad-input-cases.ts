// The bad-input corpus: each case is bad input met by `event-assembler run` — in the
// configuration, in the servers it finds at start-up, or in a transaction while it streams — with
// what the user must see (what is wrong, where, the fix), the exit code, and what may be
// acknowledged. docs/reliability.md carries this table for readers.
import type { ConfigTree, CorpusRig } from './bad-input-rig.js';
import { foreignEvent } from './bad-input-rig.js';

/** Where the bad input meets the line: before anything connects, before streaming, or in a streamed transaction. */
export type Stage = 'config' | 'start-up' | 'stream';

export interface Refusal {
  readonly exitCode: number;
  /** The error's stable code. */
  readonly code: string;
  /** The message names what is wrong, where (field, table, column, stream, position) and the fix. */
  readonly what: RegExp;
  readonly where: RegExp;
  readonly fix: RegExp;
}

export interface CorpusCase {
  /** What is wrong, as the table in docs/reliability.md says it. */
  readonly name: string;
  /** Names the case's table (`public.<tag>`), publication, slot, assembler and streams (`<tag>-<id>`). */
  readonly tag: string;
  readonly stage: Stage;
  /** The world before the run. Default: the table, its publication and a pgoutput slot. */
  setup?(rig: CorpusRig, tag: string): Promise<void>;
  /** Changes to the case's configuration, as TypeScript source; or a function writing the module itself. */
  readonly config?: ConfigTree | ((rig: CorpusRig, tag: string) => string);
  /** Environment of the CLI, over the rig's (EA_BI_CAPTURE_URL, EA_BI_KURRENTDB_URL). */
  env?(rig: CorpusRig): Record<string, string>;
  /** Stage `stream`: the bad transaction, one statement, run once the line streams. */
  bad?(tag: string): string;
  /** The refusal expected — or `'handled'`: the input is processed (nothing refused) and acknowledged. */
  readonly expected: Refusal | 'handled';
}

/** The default world of a case. */
export async function standardSetup(rig: CorpusRig, tag: string): Promise<void> {
  await rig.createTable(tag);
  await rig.createPublication(tag, [`public.${tag}`]);
  await rig.createSlot(tag);
}

const MiB = 1024 * 1024;
const insert = (tag: string, columns: string, values: string): string => `INSERT INTO public.${tag} (id, ${columns}) VALUES ('bad', ${values})`;

/** Cases whose bad input is a transaction met while streaming. */
export const STREAM_CASES: readonly CorpusCase[] = [
  {
    name: 'a throwing mapper',
    tag: 'bi_throws',
    stage: 'stream',
    config: { mappers: "[itemMapper('bi_throws', 'throws')]" },
    bad: (tag) => insert(tag, 'label', "'boom'"),
    expected: {
      exitCode: 1,
      code: 'MAPPER_FAILED',
      what: /mapper "bi_throws-items" failed .*Error: cannot map item bad: label "boom" is not a known kind/,
      where: /at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+ .* on public\.bi_throws; keys: public\.bi_throws insert \{"id":"bad"\}/,
      fix: /fix: fix the mapper \(or give it onError: 'park' to park such input as MapperFailed records\) and start again/,
    },
  },
  {
    name: 'a non-deterministic mapper (a transaction of 10,001 rows, which the assembler maps twice)',
    tag: 'bi_impure',
    stage: 'stream',
    config: { mappers: "[itemMapper('bi_impure', 'impure')]" },
    bad: (tag) => `INSERT INTO public.${tag} (id, label) SELECT 'r' || n, 'row' FROM generate_series(1, 10001) n`,
    expected: {
      exitCode: 1,
      code: 'MAPPER_IMPURE',
      what: /mapper "bi_impure-items" is not pure: two runs over .* differ at events\[\d+\] \(first run: \d+ events in all, second run: more events\)/,
      where: /the transaction at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+/,
      fix: /fix: derive events only from the transaction given: no clocks .* use tx\.commitTime for time/,
    },
  },
  {
    name: 'an event violating its contract (an empty label)',
    tag: 'bi_contract',
    stage: 'stream',
    bad: (tag) => insert(tag, 'label', "''"),
    expected: {
      exitCode: 1,
      code: 'CONTRACT_VIOLATION_HALT',
      what: /violates its contract: \/label must NOT have fewer than 1 characters/,
      where: /event ItemAdded@1 for stream "bi_contract-bad" \(mapper bi_contract-items\) at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+/,
      fix: /fix the mapper or the contract \(or set failurePolicy\.contractViolation to 'park'\)/,
    },
  },
  {
    name: "numeric 'NaN' against a contract's decimal pattern",
    tag: 'bi_nan',
    stage: 'stream',
    bad: (tag) => insert(tag, 'label, amount', "'nan', 'NaN'"),
    expected: {
      exitCode: 1,
      code: 'CONTRACT_VIOLATION_HALT',
      what: /violates its contract: \/amount must match pattern/,
      where: /event ItemAdded@1 for stream "bi_nan-bad" .* at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+/,
      fix: /fix the mapper or the contract/,
    },
  },
  {
    name: "numeric 'NaN' made a JavaScript number by the mapper",
    tag: 'bi_nan_number',
    stage: 'stream',
    config: { mappers: "[itemMapper('bi_nan_number', 'number')]" },
    bad: (tag) => insert(tag, 'label, amount', "'nan', 'NaN'"),
    expected: {
      exitCode: 1,
      code: 'MAPPER_FAILED',
      what: /events\[0\]\.data\.amount is NaN; JSON has no such number/,
      where: /at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+ .* on public\.bi_nan_number; keys: public\.bi_nan_number insert \{"id":"bad"\}/,
      fix: /fix: use null or a string[\s\S]*fix: fix the mapper/,
    },
  },
  {
    name: 'a huge numeric (1e20) against a contract allowing 12 digits',
    tag: 'bi_huge',
    stage: 'stream',
    bad: (tag) => insert(tag, 'label, amount', "'huge', 1e20"),
    expected: {
      exitCode: 1,
      code: 'CONTRACT_VIOLATION_HALT',
      what: /violates its contract: \/amount must match pattern/,
      where: /for stream "bi_huge-bad" .* at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+/,
      fix: /fix the mapper or the contract/,
    },
  },
  {
    name: "an invalid date: timestamptz 'infinity' against format date-time",
    tag: 'bi_infinity',
    stage: 'stream',
    bad: (tag) => insert(tag, 'label, at', "'forever', 'infinity'"),
    expected: {
      exitCode: 1,
      code: 'CONTRACT_VIOLATION_HALT',
      what: /violates its contract: \/at must match format "date-time"/,
      where: /for stream "bi_infinity-bad" .* at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+/,
      fix: /fix the mapper or the contract/,
    },
  },
  {
    name: 'an event over the max append size (a 2 MiB text value in the event)',
    tag: 'bi_oversized',
    stage: 'stream',
    config: { mappers: "[itemMapper('bi_oversized', 'body')]" },
    bad: (tag) => insert(tag, 'label, body', `'big', repeat('x', ${2 * MiB})`),
    expected: {
      exitCode: 1,
      code: 'SINK_EVENT_OVERSIZED',
      what: /is \d{7} bytes, over the append limit of 1048576 bytes/,
      where: /event ItemAdded \(\S+\) for stream "bi_oversized-bad" \(source transaction at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+\)/,
      fix: /shrink the event in its mapper or raise the server's MaxAppendSize/,
    },
  },
  {
    name: 'a 50 MB text value mapped into an event',
    tag: 'bi_text_50mb',
    stage: 'stream',
    config: { mappers: "[itemMapper('bi_text_50mb', 'body')]" },
    bad: (tag) => insert(tag, 'label, body', `'huge', repeat('y', ${50 * MiB})`),
    expected: {
      exitCode: 1,
      code: 'SINK_EVENT_OVERSIZED',
      what: /is \d{8} bytes, over the append limit of 1048576 bytes/,
      where: /for stream "bi_text_50mb-bad" \(source transaction at commitLsn [0-9A-F]+\/[0-9A-F]+ xid \d+\)/,
      fix: /shrink the event in its mapper/,
    },
  },
  {
    name: 'a very wide row (1,006 columns) with a 50 MB jsonb value in a column no mapper allowlists',
    tag: 'bi_wide',
    stage: 'stream',
    async setup(rig, tag) {
      await rig.createTable(tag, { extraColumns: 1000 });
      await rig.createPublication(tag, [`public.${tag}`]);
      await rig.createSlot(tag);
    },
    bad: (tag) => {
      const columns = Array.from({ length: 1000 }, (_, i) => `c${i + 1}`);
      return insert(tag, `label, doc, ${columns.join(', ')}`, `'wide', jsonb_build_object('blob', repeat('z', ${50 * MiB})), ${columns.map((_, i) => i + 1).join(', ')}`);
    },
    expected: 'handled',
  },
  {
    name: 'a tombstoned destination stream',
    tag: 'bi_tombstoned',
    stage: 'stream',
    async setup(rig, tag) {
      await standardSetup(rig, tag);
      await rig.destination().appendToStream(`${tag}-bad`, foreignEvent());
      await rig.destination().tombstoneStream(`${tag}-bad`);
    },
    bad: (tag) => insert(tag, 'label', "'again'"),
    expected: {
      exitCode: 1,
      code: 'SINK_STREAM_DELETED',
      what: /is deleted or tombstoned in KurrentDB/,
      where: /stream "bi_tombstoned-bad"/,
      fix: /fix: find who deleted it .* map this entity to another stream/,
    },
  },
  {
    name: 'a destination stream written by another writer',
    tag: 'bi_foreign',
    stage: 'stream',
    async setup(rig, tag) {
      await standardSetup(rig, tag);
      await rig.destination().appendToStream(`${tag}-bad`, foreignEvent());
    },
    bad: (tag) => insert(tag, 'label', "'mine'"),
    expected: {
      exitCode: 1,
      code: 'SINK_STREAM_CONFLICT',
      what: /another writer on stream "bi_foreign-bad"/,
      where: /tail event WrittenByHand \S+ at 0/,
      fix: /stop the other writer before resuming/,
    },
  },
];

/** Cases refused at start-up: the servers answer, and what they show cannot work. */
export const START_UP_CASES: readonly CorpusCase[] = [
  {
    name: 'a wrong password',
    tag: 'bi_password',
    stage: 'start-up',
    env: (rig) => ({ EA_BI_CAPTURE_URL: rig.captureUrl.replace(`:${rig.password}@`, ':not-the-password@') }),
    expected: {
      exitCode: 1,
      code: 'SOURCE_CONNECTION_FAILED',
      what: /refused the capture connection: password authentication failed for user "bi_cap_\w+" \(SQLSTATE 28P01\)/,
      where: /PostgreSQL at 127\.0\.0\.1:\d+ \(source\.connection\)/,
      fix: /fix: check the user and password in source\.connection/,
    },
  },
  {
    name: 'TLS required by the client, not served by PostgreSQL (sslmode=require)',
    tag: 'bi_pg_tls',
    stage: 'start-up',
    env: (rig) => ({ EA_BI_CAPTURE_URL: `${rig.captureUrl}?sslmode=require` }),
    expected: {
      exitCode: 1,
      code: 'SOURCE_CONNECTION_FAILED',
      what: /The server does not support SSL connections/,
      where: /PostgreSQL at 127\.0\.0\.1:\d+ \(source\.connection\)/,
      fix: /fix: .*sslmode/,
    },
  },
  {
    name: 'TLS required by the client, not served by KurrentDB (tls=true)',
    tag: 'bi_kdb_tls',
    stage: 'start-up',
    env: (rig) => ({ EA_BI_KURRENTDB_URL: rig.kdb.connectionString.replace('tls=false', 'tls=true') }),
    expected: {
      exitCode: 1,
      code: 'DESTINATION_CONNECTION_FAILED',
      what: /refused the connection: the TLS handshake failed \(wrong version number\)/,
      where: /KurrentDB at 127\.0\.0\.1:\d+ \(destination\.connectionString\)/,
      fix: /fix: the server does not speak TLS at that address: set tls=false in destination\.connectionString/,
    },
  },
  {
    name: 'a KurrentDB certificate the client does not trust (tls=true without tlsCAFile)',
    tag: 'bi_kdb_ca',
    stage: 'start-up',
    env: (rig) => ({ EA_BI_KURRENTDB_URL: `kurrentdb://127.0.0.1:${rig.kdbTls.port}?tls=true` }),
    expected: {
      exitCode: 1,
      code: 'DESTINATION_CONNECTION_FAILED',
      what: /refused the connection: the TLS handshake failed \(unable to verify the first certificate\)/,
      where: /KurrentDB at 127\.0\.0\.1:\d+ \(destination\.connectionString\)/,
      fix: /fix: make the server's certificate trusted: tlsCAFile=<its CA file> in destination\.connectionString/,
    },
  },
  {
    name: 'a missing publication',
    tag: 'bi_no_pub',
    stage: 'start-up',
    async setup(rig, tag) {
      await rig.createTable(tag);
      await rig.createSlot(tag);
    },
    expected: {
      exitCode: 1,
      code: 'SOURCE_PUBLICATION_MISSING',
      what: /publication "bi_no_pub" does not exist/,
      where: /publication "bi_no_pub"/,
      fix: /fix: .*CREATE PUBLICATION bi_no_pub FOR TABLE public\.bi_no_pub/,
    },
  },
  {
    name: 'a publication missing a captured table',
    tag: 'bi_pub_partial',
    stage: 'start-up',
    async setup(rig, tag) {
      await rig.createTable(tag);
      await rig.createTable(`${tag}_b`);
      await rig.createPublication(tag, [`public.${tag}`]);
      await rig.createSlot(tag);
    },
    config: { mappers: "[itemMapper('bi_pub_partial'), itemMapper('bi_pub_partial_b')]" },
    expected: {
      exitCode: 1,
      code: 'SOURCE_PUBLICATION_MISMATCH',
      what: /publication bi_pub_partial does not contain exactly the configured tables/,
      where: /publication bi_pub_partial does not contain exactly the configured tables: missing public\.bi_pub_partial_b/,
      fix: /fix: ALTER PUBLICATION bi_pub_partial (SET|ADD) TABLE .*public\.bi_pub_partial_b/,
    },
  },
  {
    name: 'a table without a primary key',
    tag: 'bi_no_key',
    stage: 'start-up',
    async setup(rig, tag) {
      await rig.createTable(tag, { primaryKey: false });
      await rig.createPublication(tag, [`public.${tag}`]);
      await rig.createSlot(tag);
    },
    expected: {
      exitCode: 1,
      code: 'SOURCE_TABLE_NO_KEY',
      what: /captured table public\.bi_no_key has no primary key and no replica identity index/,
      where: /public\.bi_no_key/,
      fix: /fix: ALTER TABLE public\.bi_no_key ADD PRIMARY KEY/,
    },
  },
  {
    name: 'REPLICA IDENTITY NOTHING where a mapper declares before-columns',
    tag: 'bi_ri_nothing',
    stage: 'start-up',
    async setup(rig, tag) {
      await rig.createTable(tag, { replicaIdentity: 'nothing' });
      await rig.createPublication(tag, [`public.${tag}`]);
      await rig.createSlot(tag);
    },
    config: { mappers: "[itemMapper('bi_ri_nothing', 'before')]" },
    expected: {
      exitCode: 1,
      code: 'SOURCE_REPLICA_IDENTITY_NOTHING',
      what: /captured table public\.bi_ri_nothing has REPLICA IDENTITY NOTHING/,
      where: /public\.bi_ri_nothing/,
      fix: /fix: ALTER TABLE public\.bi_ri_nothing REPLICA IDENTITY FULL;/,
    },
  },
  {
    name: 'REPLICA IDENTITY DEFAULT where a mapper declares before-columns',
    tag: 'bi_ri_default',
    stage: 'start-up',
    config: { mappers: "[itemMapper('bi_ri_default', 'before')]" },
    expected: {
      exitCode: 1,
      code: 'SOURCE_REPLICA_IDENTITY_INSUFFICIENT',
      what: /needs REPLICA IDENTITY FULL \(it has DEFAULT: old rows would carry only the key\)/,
      where: /captured table public\.bi_ri_default/,
      fix: /fix: ALTER TABLE public\.bi_ri_default REPLICA IDENTITY FULL;/,
    },
  },
  {
    name: 'a slot of another output plugin (test_decoding)',
    tag: 'bi_slot_plugin',
    stage: 'start-up',
    async setup(rig, tag) {
      await rig.createTable(tag);
      await rig.createPublication(tag, [`public.${tag}`]);
      await rig.createSlot(tag, { plugin: 'test_decoding' });
    },
    expected: {
      exitCode: 1,
      code: 'SOURCE_SLOT_WRONG_KIND',
      what: /is a logical slot with plugin test_decoding; capture needs a logical slot with plugin pgoutput/,
      where: /replication slot "bi_slot_plugin_\w+"/,
      fix: /fix: .*pg_drop_replication_slot/,
    },
  },
  {
    name: 'a slot of another database',
    tag: 'bi_slot_db',
    stage: 'start-up',
    async setup(rig, tag) {
      await rig.createTable(tag);
      await rig.createPublication(tag, [`public.${tag}`]);
      await rig.createSlot(tag, { database: rig.other });
    },
    expected: {
      exitCode: 1,
      code: 'SOURCE_SLOT_WRONG_DATABASE',
      what: /replication slot "bi_slot_db_\w+" belongs to database bad_input_other_\w+, not bad_input_\w+/,
      where: /replication slot "bi_slot_db_\w+"/,
      fix: /fix: connect to database bad_input_other_\w+, or create a slot for bad_input_\w+ with a different name/,
    },
  },
  {
    name: 'a status interval the server would time out (source.statusIntervalMs over half of wal_sender_timeout)',
    tag: 'bi_status_interval',
    stage: 'start-up',
    config: { source: { statusIntervalMs: '40000' } },
    expected: {
      exitCode: 1,
      code: 'SOURCE_CONFIG_INVALID',
      what: /invalid source option "statusIntervalMs": 40000 ms is not well below the server's wal_sender_timeout \(60000 ms\)/,
      where: /source\.statusIntervalMs/,
      fix: /fix: use at most 30000 ms .* or raise wal_sender_timeout/,
    },
  },
];

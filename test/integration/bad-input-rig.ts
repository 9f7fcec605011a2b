// The bad-input corpus's rig (bad-input-corpus.test.ts): one database and one in-memory KurrentDB
// for every case, each case on its own table `public.<tag>`, publication `<tag>`, slot and
// assembler name — so cases run side by side and one case's bad rows reach only its own slot and
// its own streams (`<tag>-<id>`). A case runs `event-assembler run` as a user does: a TypeScript
// configuration module written into a temporary directory, secrets from the environment.
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { jsonEvent, KurrentDBClient } from '@kurrent/kurrentdb-client';
import { inject, vi } from 'vitest';
import { startInMemoryKurrentDB, type InMemoryKurrentDB } from '../../src/testing/kurrentdb/index.js';
import { createTestDatabase, type TestDatabase } from '../../src/testing/postgres.js';
import { CORPUS_ITEM_TABLE } from '../support/corpus-mappers.js';
import { dropRole } from '../support/roles.js';
import { createTestCertificate } from '../support/tls-cert.js';
import { startCli, type CliProcess } from './pipeline-rig.js';

/** A configuration as TypeScript source: leaves are source text (`"'bi_x'"`, `'500'`), `null` removes a field. */
export interface ConfigTree {
  readonly [field: string]: ConfigTree | string | null;
}

export interface StoredCaseEvent {
  readonly stream: string;
  readonly type: string;
  readonly data: Record<string, unknown>;
  readonly metadata: Record<string, string>;
}

export interface CorpusRig {
  readonly db: TestDatabase;
  /** A second database on the same server (for a slot that belongs to another database). */
  readonly other: TestDatabase;
  readonly kdb: InMemoryKurrentDB;
  /** A second in-memory KurrentDB serving TLS (a certificate signed by a CA made for the rig: test/support/tls-cert.ts). */
  readonly kdbTls: InMemoryKurrentDB;
  /** The capture role's connection string (LOGIN REPLICATION, SELECT on the case tables). */
  readonly captureUrl: string;
  readonly password: string;
  /** The corpus's contracts (ItemAdded v1, v2), copied into the temporary directory. */
  readonly contractsDir: string;
  readonly dir: string;
  /** The environment a case's CLI gets: EA_BI_CAPTURE_URL and EA_BI_KURRENTDB_URL. */
  env(): Record<string, string>;
  /** The cluster-wide slot name of a case (slots of concurrent test files must not collide). */
  slotName(tag: string): string;
  /** `public.<tag>` with the corpus's columns (`primaryKey: false`: none), readable by the capture role. */
  createTable(tag: string, options?: { readonly primaryKey?: boolean; readonly replicaIdentity?: 'full' | 'nothing'; readonly extraColumns?: number }): Promise<void>;
  createPublication(tag: string, tables: readonly string[]): Promise<void>;
  /** A logical slot for the case (`plugin` default pgoutput; `database` default the corpus's). */
  createSlot(tag: string, options?: { readonly plugin?: string; readonly database?: TestDatabase }): Promise<void>;
  /**
   * The case's slot's confirmed_flush_lsn (`null` when it has none, or no slot of that name
   * exists), read once no walsender holds the slot: a status update still in the socket when the
   * CLI exited has been applied by then.
   */
  confirmedFlushLsn(tag: string): Promise<string | null>;
  dropSlot(tag: string): Promise<void>;
  /** Writes `<tag>.config.ts`: the case's base configuration with `patch` merged in. */
  writeConfig(tag: string, patch?: ConfigTree, options?: { readonly contractsDir?: string }): string;
  /** Writes a file into the temporary directory (a broken module, a contracts directory). */
  writeFile(name: string, text: string): string;
  /** `event-assembler run --config <file>` with the rig's environment and `env` added. */
  run(file: string, env?: Record<string, string>): CliProcess;
  /** Every event in the case's streams (`<tag>-…`), as stored. */
  events(tag: string): StoredCaseEvent[];
  /** A KurrentDB client for writes of another writer (a foreign event, a tombstone). */
  destination(): KurrentDBClient;
  sql<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  until(check: () => void | Promise<void>, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const src = (path: string): string => pathToFileURL(join(process.cwd(), path)).href;

function decode(bytes: Uint8Array): unknown {
  const text = Buffer.from(bytes).toString('utf8');
  return text === '' ? {} : JSON.parse(text);
}

/** `base` with `patch` merged in, field by field (`null` removes a field). */
export function mergeConfig(base: ConfigTree, patch: ConfigTree): ConfigTree {
  const out: Record<string, ConfigTree | string | null> = { ...base };
  for (const [field, value] of Object.entries(patch)) {
    const current = out[field];
    if (value === null) delete out[field];
    else if (typeof value === 'object' && current !== null && typeof current === 'object') out[field] = mergeConfig(current, value);
    else out[field] = value;
  }
  return out;
}

export function renderConfig(tree: ConfigTree, indent = '  '): string {
  const fields = Object.entries(tree).map(([field, value]) => {
    const key = /^[A-Za-z_$][\w$]*$/.test(field) ? field : JSON.stringify(field);
    return `${indent}${key}: ${typeof value === 'string' ? value : renderConfig(value as ConfigTree, `${indent}  `)},`;
  });
  return `{\n${fields.join('\n')}\n${indent.slice(2)}}`;
}

export async function createCorpusRig(): Promise<CorpusRig> {
  const server = inject('postgres');
  const db = await createTestDatabase(server, 'bad_input');
  const other = await createTestDatabase(server, 'bad_input_other');
  const suffix = db.database.slice(-8);
  const role = `bi_cap_${suffix}`;
  const password = 'corpus-capture-secret';
  await db.query(`CREATE ROLE ${role} LOGIN REPLICATION PASSWORD '${password}'`);
  const kdb = await startInMemoryKurrentDB();
  const dir = mkdtempSync(join(tmpdir(), 'ea-bad-input-'));
  const kdbTls = await startInMemoryKurrentDB({ tls: createTestCertificate(dir) });
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
  const contractsDir = join(dir, 'contracts');
  cpSync(join(process.cwd(), 'test/support/corpus-contracts'), contractsDir, { recursive: true });
  const captureUrl = `postgresql://${role}:${password}@${server.host}:${server.port}/${db.database}`;
  let client: KurrentDBClient | null = null;
  const rigEnv = (): Record<string, string> => ({ EA_BI_CAPTURE_URL: captureUrl, EA_BI_KURRENTDB_URL: kdb.connectionString });

  const slotName = (tag: string): string => `${tag}_${suffix}`.slice(0, 63);
  const baseConfig = (tag: string, contracts: string): ConfigTree => ({
    name: `'${tag}'`,
    source: { connection: `'env:EA_BI_CAPTURE_URL'`, slot: `'${slotName(tag)}'`, publication: `'${tag}'`, statusIntervalMs: '500' },
    destination: { connectionString: `'env:EA_BI_KURRENTDB_URL'`, timeoutMs: '5000', retry: '{ initialDelayMs: 50, maxDelayMs: 500 }' },
    mappers: `[itemMapper('${tag}')]`,
    contracts: { dir: JSON.stringify(contracts) },
    // A start-up that waits for a server it cannot reach ends (exit 4) instead of hanging the case.
    lifecycle: { drainTimeoutMs: '5000', startupTimeoutMs: '20000' },
  });

  return {
    db,
    other,
    kdb,
    kdbTls,
    captureUrl,
    password,
    contractsDir,
    dir,
    env: rigEnv,
    slotName,
    async createTable(tag, options = {}) {
      const extra = Array.from({ length: options.extraColumns ?? 0 }, (_, i) => `, c${i + 1} int`).join('');
      const shape = options.primaryKey === false ? CORPUS_ITEM_TABLE.replace(' PRIMARY KEY', ' NOT NULL') : CORPUS_ITEM_TABLE;
      await db.query(`CREATE TABLE public.${tag} ${shape.slice(0, -1)}${extra})`);
      if (options.replicaIdentity) await db.query(`ALTER TABLE public.${tag} REPLICA IDENTITY ${options.replicaIdentity.toUpperCase()}`);
      await db.query(`GRANT SELECT ON public.${tag} TO ${role}`);
    },
    async createPublication(tag, tables) {
      await db.query(`CREATE PUBLICATION ${tag} FOR TABLE ${tables.join(', ')}`);
    },
    async createSlot(tag, options = {}) {
      await (options.database ?? db).query(`SELECT pg_create_logical_replication_slot($1, $2)`, [slotName(tag), options.plugin ?? 'pgoutput']);
    },
    async confirmedFlushLsn(tag) {
      let lsn: string | null = null;
      await vi.waitFor(
        async () => {
          const [row] = await db.query<{ lsn: string | null; active: boolean }>(`SELECT confirmed_flush_lsn::text AS lsn, active FROM pg_replication_slots WHERE slot_name = $1`, [slotName(tag)]);
          if (row?.active) throw new Error(`slot ${slotName(tag)} is still active`);
          lsn = row?.lsn ?? null;
        },
        { timeout: 15_000, interval: 50 },
      );
      return lsn;
    },
    async dropSlot(tag) {
      // Only a slot of this database (a slot of another database goes with that database).
      await db.query(`SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND database = current_database()`, [slotName(tag)]);
    },
    writeConfig(tag, patch = {}, options = {}) {
      const tree = mergeConfig(baseConfig(tag, options.contractsDir ?? contractsDir), patch);
      const file = join(dir, `${tag}.config.ts`);
      writeFileSync(
        file,
        `import { defineConfig } from '${src('src/config/index.ts')}';\n` +
          `import { itemMapper } from '${src('test/support/corpus-mappers.ts')}';\n` +
          `export default defineConfig(${renderConfig(tree)});\n`,
      );
      return file;
    },
    writeFile(name, text) {
      const file = join(dir, name);
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
      return file;
    },
    run: (file, env = {}) => startCli(['run', '--config', file], { ...rigEnv(), ...env }),
    events(tag) {
      return kdb
        .streamNames()
        .filter((stream) => stream.startsWith(`${tag}-`))
        .flatMap((stream) =>
          kdb.readStreamEvents(stream).map((e) => ({ stream, type: e.type, data: decode(e.data) as Record<string, unknown>, metadata: decode(e.metadata) as Record<string, string> })),
        );
    },
    destination() {
      client ??= KurrentDBClient.connectionString(kdb.connectionString);
      return client;
    },
    sql: (text, params) => db.query(text, params),
    async until(check, timeoutMs = 30_000) {
      await vi.waitFor(check, { timeout: timeoutMs, interval: 50 });
    },
    async close() {
      await client?.dispose().catch(() => undefined);
      await kdb.close().catch(() => undefined);
      await kdbTls.close().catch(() => undefined);
      await db.drop().catch(() => undefined);
      await other.drop().catch(() => undefined);
      await dropRole(role).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A foreign writer's event, for a stream the assembler will think it owns. */
export function foreignEvent() {
  return jsonEvent({ type: 'WrittenByHand', data: { by: 'an operator' } });
}

// The bad-input corpus's configuration cases: refused before anything connects, exit code 2,
// every problem at once. One configuration malforms every field (FIELD_ROWS: each field's line
// must say what is wrong and the fix); the others are a module that does not compile,
// connection strings of the wrong form and a contract file that does not load (contracts load
// before anything connects).
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import type { CorpusCase } from './bad-input-cases.js';
import { mergeConfig, type ConfigTree } from './bad-input-rig.js';

export interface FieldRow {
  /** The field as the message names it. */
  readonly field: string;
  /** Its malformed value, as TypeScript source. */
  readonly patch: ConfigTree;
  readonly problem: RegExp;
  readonly fix: RegExp;
}

const TAG = 'bi_config_all';

/** Every field of the configuration, malformed — all in one module. */
export const FIELD_ROWS: readonly FieldRow[] = [
  { field: 'name', patch: { name: "'shop assembler'" }, problem: /must be 1-100 letters, digits, "_", "\." or "-"/, fix: /set name to the assembler's name/ },
  { field: 'source.connection', patch: { source: { connection: "'env:EA_BI_NOT_SET'" } }, problem: /environment variable EA_BI_NOT_SET is not set/, fix: /export EA_BI_NOT_SET=<connection string> before starting/ },
  { field: 'source.slot', patch: { source: { slot: "'Shop-Slot'" } }, problem: /slot names are lower-case letters, digits and _/, fix: /set source\.slot to the slot created by `event-assembler setup`/ },
  { field: 'source.publication', patch: { source: { publication: '[]' } }, problem: /expected array to have >=1 items/, fix: /set source\.publication to the publication created by `event-assembler setup`/ },
  { field: 'source.tables.0', patch: { source: { tables: `['${TAG}']` } }, problem: /"bi_config_all" is not schema-qualified/, fix: /write it as public\.bi_config_all/ },
  { field: 'source.statusIntervalMs', patch: { source: { statusIntervalMs: '50' } }, problem: /expected number to be >=100/, fix: /wal_sender_timeout/ },
  { field: 'source.spillDir', patch: { source: { spillDir: "'/no/such/spill/dir'" } }, problem: /directory \/no\/such\/spill\/dir does not exist/, fix: /set source\.spillDir to an existing directory/ },
  { field: 'source.slotName', patch: { source: { slotName: "'typo'" } }, problem: /unknown field\(s\) "slotName"/, fix: /remove it or check its spelling/ },
  { field: 'destination.connectionString', patch: { destination: { connectionString: "'http://localhost:2113'" } }, problem: /not a KurrentDB connection string: Unexpected "http:\/\/" at position 0/, fix: /kurrentdb:\/\/host:2113\?tls=false/ },
  { field: 'destination.mode', patch: { destination: { mode: "'fast'" } }, problem: /Invalid option: expected one of "auto"\|"multi-stream"\|"per-stream"/, fix: /use 'auto' \(default\), 'multi-stream' or 'per-stream'/ },
  { field: 'destination.maxAppendSize', patch: { destination: { maxAppendSize: '-1' } }, problem: /expected number to be >0/, fix: /the server's MaxAppendSize in bytes/ },
  { field: 'destination.timeoutMs', patch: { destination: { timeoutMs: '0' } }, problem: /expected number to be >0/, fix: /milliseconds/ },
  { field: 'destination.retry.initialDelayMs', patch: { destination: { retry: '{ initialDelayMs: 1.5 }' } }, problem: /expected int, received number/, fix: /initialDelayMs, maxDelayMs, maxAttempts/ },
  { field: 'mappers.1', patch: { mappers: `[itemMapper('${TAG}'), itemMapper('${TAG}')]` }, problem: /two mappers are named "bi_config_all-items"/, fix: /give each mapper a unique name/ },
  { field: 'contracts.dir', patch: { contracts: { dir: "'no/such/contracts'" } }, problem: /directory \S*no\/such\/contracts .*does not exist/, fix: /set contracts\.dir to the directory of your JSON Schema contracts/ },
  { field: 'snapshot.mode', patch: { snapshot: { mode: "'sometimes'" } }, problem: /Invalid option: expected one of/, fix: /use 'never', 'initial', 'when_needed' or 'initial_only'/ },
  { field: 'snapshot.chunkSize', patch: { snapshot: { chunkSize: '0' } }, problem: /expected number to be >0/, fix: /rows per chunk/ },
  { field: 'failurePolicy.contractViolation', patch: { failurePolicy: { contractViolation: "'ignore'" } }, problem: /Invalid option: expected one of "halt"\|"park"/, fix: /use 'halt' \(default\) or 'park'/ },
  { field: 'limits.maxInFlightTransactions', patch: { limits: { maxInFlightTransactions: '0' } }, problem: /expected number to be >0/, fix: /use positive integers/ },
  { field: 'limits.maxConcurrentAppends', patch: { limits: { maxConcurrentAppends: '65' } }, problem: /expected number to be <=64/, fix: /at most 64/ },
  { field: 'lifecycle.drainTimeoutMs', patch: { lifecycle: { drainTimeoutMs: '0' } }, problem: /expected number to be >0/, fix: /milliseconds/ },
  { field: 'lifecycle.startupTimeoutMs', patch: { lifecycle: { startupTimeoutMs: "'soon'" } }, problem: /expected number, received string/, fix: /milliseconds/ },
  { field: 'standby.pollIntervalMs', patch: { standby: { pollIntervalMs: '5' } }, problem: /expected number to be >=10/, fix: /pollIntervalMs: 1000/ },
  { field: 'observability.port', patch: { observability: { port: '70000' } }, problem: /expected number to be <=65535/, fix: /0-65535; 0 picks a free one/ },
  { field: 'observability.heartbeatIntervalMs', patch: { observability: { heartbeatIntervalMs: '10' } }, problem: /expected number to be >=100/, fix: /between 100 and 3600000/ },
  { field: 'reconcilers.0', patch: { reconcilers: '[{}]' }, problem: /is not a reconciler/, fix: /defineReconciler/ },
];

/** Cases refused while the configuration is loaded and parsed. */
export const CONFIG_CASES: readonly CorpusCase[] = [
  {
    name: 'every configuration field malformed (one module; each field on its own line, FIELD_ROWS)',
    tag: TAG,
    stage: 'config',
    config: FIELD_ROWS.reduce<ConfigTree>((tree, row) => mergeConfig(tree, row.patch), {}),
    expected: {
      exitCode: 2,
      code: 'CONFIG_INVALID',
      what: new RegExp(`invalid configuration: ${FIELD_ROWS.length} problems:`),
      where: /^ {2}- name: /m,
      fix: / — fix: /,
    },
  },
  {
    name: 'connection strings of the wrong form (from the environment)',
    tag: 'bi_config_urls',
    stage: 'config',
    env: () => ({ EA_BI_CAPTURE_URL: 'db.internal:5432/shop', EA_BI_KURRENTDB_URL: 'kurrentdb://db.internal:2113?tls=maybe' }),
    expected: {
      exitCode: 2,
      code: 'CONFIG_INVALID',
      what: /source\.connection: "db\.internal:5432\/shop" is not a postgres:\/\/ URL[\s\S]*destination\.connectionString: not a KurrentDB connection string: Unexpected "maybe"/,
      where: /source\.connection: [\s\S]*destination\.connectionString: /,
      fix: /fix: write it as postgres:\/\/user:password@host:5432\/database[\s\S]*fix: set destination\.connectionString/,
    },
  },
  {
    name: 'a configuration module that does not compile',
    tag: 'bi_config_syntax',
    stage: 'config',
    config: (rig, tag) => rig.writeFile(`${tag}.config.ts`, ['// a configuration with a typo', 'export default {', `  name: '${tag}',`, "  source: { slot: , publication: 'x' },", '};', ''].join('\n')),
    expected: {
      exitCode: 2,
      code: 'CONFIG_LOAD_FAILED',
      what: /could not load the configuration module \S+: Unexpected ","/,
      where: /bi_config_syntax\.config\.ts:4:\d+/,
      fix: /fix: correct line 4 of \S+bi_config_syntax\.config\.ts: the module must load without an error and default-export defineConfig/,
    },
  },
  {
    name: 'a contracts directory with a broken file',
    tag: 'bi_contracts',
    stage: 'config',
    config: (rig, tag) => {
      // The corpus's contracts, one of them cut short (a merge gone wrong, a truncated copy).
      const dir = join(rig.dir, 'contracts-broken');
      cpSync(rig.contractsDir, dir, { recursive: true });
      rig.writeFile('contracts-broken/ItemAdded.v2.schema.json', '{ "title": "ItemAdded v2", ');
      return rig.writeConfig(tag, {}, { contractsDir: dir });
    },
    expected: {
      exitCode: 2,
      code: 'CONFIG_INVALID',
      what: /not valid JSON/,
      where: /contracts\.dir: \S*contracts-broken\/ItemAdded\.v2\.schema\.json/,
      fix: /fix: repair or remove that file \(`event-assembler contracts check --dir \S+ --no-against` lists every problem\)/,
    },
  },
];

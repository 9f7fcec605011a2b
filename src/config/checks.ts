/**
 * The checks of `parseConfig` beyond the schema: zod issues as problems, secrets from the
 * environment, mapper names, captured tables, the contracts directory. Each adds to the problems
 * found instead of throwing, so an invalid configuration is reported whole.
 */
import { normalizeSourceConnection, parseSourceHosts, SourceConnectionStringError } from '../source/multi-host.js';
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
// The client's own parser (a pure function): what it refuses here, the client would refuse at start-up.
import { parseConnectionString } from '@kurrent/kurrentdb-client/dist/Client/parseConnectionString.js';
import type { z } from 'zod';
import { mapperRequirements, type AnyMapper } from '../mapping/index.js';
import type { PostgresSourceTable } from '../source/index.js';
import type { ConfigErrorDetails } from './config-error.js';
import { redactConnectionString } from './redact.js';

/** How to fix a field, by its top-level path (the zod message says what is wrong). */
export const FIXES: Record<string, string> = {
  name: 'set name to the assembler\'s name, e.g. name: \'invoicing\'',
  'source.connection': 'set source.connection to env:VARIABLE (a postgres:// URL of the capture role in that environment variable)',
  'source.slot': 'set source.slot to the slot created by `event-assembler setup`',
  'source.publication': 'set source.publication to the publication created by `event-assembler setup`',
  'source.tables': 'leave source.tables out to capture every table the mappers declare, or list schema-qualified tables',
  'source.statusIntervalMs': "use whole milliseconds, at least 100 and at most half the server's wal_sender_timeout (default 10000)",
  'source.spillDir': 'set source.spillDir to an existing directory with room for your largest transaction, or leave it out (the OS temp directory)',
  'destination.connectionString': 'set destination.connectionString to env:VARIABLE holding e.g. kurrentdb://host:2113?tls=false',
  'destination.mode': "use 'auto' (default), 'multi-stream' or 'per-stream'",
  'destination.maxAppendSize': "set destination.maxAppendSize to the server's MaxAppendSize in bytes (default 1048576)",
  'destination.timeoutMs': 'use whole milliseconds (default 30000)',
  'destination.retry': 'use { initialDelayMs, maxDelayMs, maxAttempts } as positive whole numbers (default { initialDelayMs: 100, maxDelayMs: 5000 }, attempts unlimited)',
  mappers: 'import your mappers (each made with defineMapper) and pass them as mappers: [...]',
  'contracts.dir': 'set contracts.dir to the directory of your JSON Schema contracts, e.g. contracts/invoicing',
  'snapshot.mode': "use 'never', 'initial', 'when_needed' or 'initial_only'",
  'snapshot.chunkSize': 'use a positive whole number of rows per chunk (default 256 for the initial snapshot, 1024 for incremental ones)',
  'snapshot.parallelism': 'use a positive whole number of tables snapshotted at once (default 1)',
  'snapshot.readAhead': 'use 0 (default), 1, 2 or 3: chunks an incremental snapshot reads while the chunk before is appended',
  'failurePolicy.contractViolation': "use 'halt' (default) or 'park'",
  limits: 'use positive integers',
  lifecycle: 'use positive integers (milliseconds)',
  standby: 'use a whole number of milliseconds, e.g. standby: { pollIntervalMs: 1000 }',
  'observability.port': 'set observability.port to a TCP port (0-65535; 0 picks a free one), or leave observability out to run without a listener',
  'observability.host': "set observability.host to an interface address, e.g. '127.0.0.1' (default) or '0.0.0.0'",
  'observability.heartbeatIntervalMs': 'use milliseconds between 100 and 3600000 (default 10000)',
  observability: 'use { port, host?, heartbeatIntervalMs?, maxFreshnessMs? } (milliseconds as positive integers)',
};

function fixFor(field: string): string {
  for (let path = field; path; path = path.includes('.') ? path.slice(0, path.lastIndexOf('.')) : '') {
    const fix = FIXES[path.replace(/\.\d+(?=\.|$)/g, '')];
    if (fix) return fix;
  }
  return 'see the field\'s documentation in AssemblerConfig';
}

/** A bound zod reports that the field's fix does not mention yet ("use positive integers" → "… (at most 64)"). */
function withBound(fix: string, issue: Issue): string {
  const bound = issue.code === 'too_big' ? { word: 'at most', value: issue.maximum } : issue.code === 'too_small' ? { word: 'at least', value: issue.minimum } : null;
  if (!bound || (issue.code === 'too_small' && Number(bound.value) <= 1) || fix.includes(String(bound.value))) return fix;
  return `${fix} (${bound.word} ${String(bound.value)})`;
}

/**
 * What parsing found wrong so far. `reported` holds the fields zod reported: a check zod cannot
 * make (an environment variable, a directory, a table the mappers read) skips a field reported
 * there, and runs on every other one — so one run lists every problem.
 */
export interface Findings {
  readonly problems: ConfigErrorDetails[];
  readonly reported: string[];
}

export function add(findings: Findings, field: string, problem: string, fix: string): void {
  findings.problems.push({ field, problem, fix });
}

/** Whether zod reported `field`, a field under it, or one above it. */
export function reported(findings: Findings, field: string): boolean {
  return findings.reported.some((r) => r === field || r.startsWith(`${field}.`) || field.startsWith(`${r}.`));
}

/** `value[key]` when `value` is an object (the configuration as given may be anything). */
export function member(value: unknown, key: string): unknown {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
}

type Issue = z.ZodError['issues'][number];

/** One zod issue as a problem: the dotted field, what is wrong, the fix. */
export function zodProblem(config: object, issue: Issue): ConfigErrorDetails {
  const field = issue.path.length ? issue.path.map(String).join('.') : '(config)';
  if (issue.code === 'unrecognized_keys') {
    return { field: `${field === '(config)' ? '' : `${field}.`}${issue.keys[0]}`, problem: `unknown field(s) ${issue.keys.map((k) => `"${k}"`).join(', ')}`, fix: 'remove it or check its spelling' };
  }
  let value: unknown = config;
  for (const key of issue.path) value = member(value, key as string);
  return { field, problem: value === undefined ? 'is required' : issue.message, fix: withBound(fixFor(field), issue) };
}

/** The secret's value, or null (a problem added, or the field already reported by zod). */
export function resolveSecret(value: unknown, field: string, findings: Findings): string | null {
  if (reported(findings, field)) return null;
  if (typeof value === 'function') {
    let resolved: unknown;
    try {
      resolved = (value as () => unknown)();
    } catch (error) {
      add(findings, field, `the function threw: ${error instanceof Error ? error.message : String(error)}`, 'make it return the value (e.g. () => process.env.MY_URL)');
      return null;
    }
    if (typeof resolved !== 'string' || resolved === '') {
      add(findings, field, 'the function returned no value (is the environment variable it reads set?)', 'export the environment variable it reads');
      return null;
    }
    return resolved;
  }
  if (typeof value !== 'string') return null;
  const env = /^env:([A-Za-z_][A-Za-z0-9_]*)$/.exec(value);
  if (!env) {
    if (!value.startsWith('env:')) return value;
    add(findings, field, `"${value}" is not env:VARIABLE_NAME`, 'write env: followed by a variable name, e.g. env:CAPTURE_DATABASE_URL');
    return null;
  }
  const name = env[1]!;
  const resolved = process.env[name];
  if (resolved !== undefined && resolved !== '') return resolved;
  add(findings, field, `environment variable ${name} is not set`, `export ${name}=<connection string> before starting`);
  return null;
}

export function checkMapperNames(mappers: unknown, findings: Findings): void {
  if (!Array.isArray(mappers)) return;
  const names = new Set<string>();
  mappers.forEach((m, i) => {
    const name = member(m, 'name');
    if (typeof name !== 'string') return;
    if (names.has(name)) add(findings, `mappers.${i}`, `two mappers are named "${name}"`, 'give each mapper a unique name (names are part of event ids)');
    names.add(name);
  });
}

/** The captured tables: listed in `source.tables`, or every table the mappers declare (`mappers` null: invalid, not looked at). */
export function capturedTables(listed: unknown, mappers: readonly AnyMapper[] | null, findings: Findings): PostgresSourceTable[] {
  const requirements = mappers ? mapperRequirements(mappers) : {};
  if (listed === undefined) {
    const tables = Object.entries(requirements).map(([table, req]) => ({ table, needsOldValues: req.needsOldValues, requiredColumns: [...req.columns] }));
    if (mappers && tables.length === 0) add(findings, 'mappers', 'the mappers declare no tables', 'declare tables in each mapper (tables: { "public.x": { columns: [...] } })');
    return tables;
  }
  if (!Array.isArray(listed) || reported(findings, 'source.tables')) return [];
  const unqualified = new Set<string>();
  const tables = (listed as (string | PostgresSourceTable)[]).map((t, i) => {
    const entry: PostgresSourceTable = typeof t === 'string' ? { table: t } : t;
    if (!/^[^.]+\.[^.]+$/.test(entry.table)) {
      add(findings, `source.tables.${i}`, `"${entry.table}" is not schema-qualified`, `write it as public.${entry.table}`);
      unqualified.add(entry.table);
    }
    const req = requirements[entry.table];
    return { table: entry.table, needsOldValues: entry.needsOldValues ?? req?.needsOldValues ?? false, requiredColumns: entry.requiredColumns ?? req?.columns ?? [] };
  });
  const captured = new Set(tables.map((t) => t.table));
  for (const [table, req] of Object.entries(requirements)) {
    // `customer` for public.customer is one problem (reported above), not two.
    if (captured.has(table) || unqualified.has(table.slice(table.indexOf('.') + 1))) continue;
    add(findings, 'source.tables', `${table} is read by mapper(s) ${req.mappers.join(', ')} but not captured`, `add "${table}" to source.tables, or leave source.tables out`);
  }
  return tables;
}

/** The contracts directory, resolved (relative: against the working directory, then `baseDir`), or null. */
export function contractsDir(dir: unknown, options: { readonly baseDir?: string }, findings: Findings): string | null {
  if (reported(findings, 'contracts.dir') || typeof dir !== 'string' || dir === '') return null;
  if (isAbsolute(dir)) {
    if (existsSync(dir)) return dir;
    add(findings, 'contracts.dir', `directory ${dir} does not exist`, FIXES['contracts.dir']!);
    return null;
  }
  const candidates = [resolve(process.cwd(), dir), ...(options.baseDir ? [resolve(options.baseDir, dir)] : [])];
  const found = candidates.find((d) => existsSync(d));
  if (found !== undefined) return found;
  add(findings, 'contracts.dir', `directory ${candidates.join(' (or ') + (candidates.length > 1 ? ')' : '')} does not exist`, FIXES['contracts.dir']!);
  return null;
}

/**
 * The source's connection string: pg reads only the URL form (`postgres://`, `postgresql://`,
 * `socket:`); anything else it takes for a database name on a host called "base" and waits for
 * that host at start-up instead of saying what is wrong. Adds a problem and returns false when
 * it is not one.
 */
export function checkPostgresConnection(given: string, findings: Findings): boolean {
  // Several hosts (failover): `postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write`
  // or the keyword form `host=h1,h2 …`; each host is then checked as its own URL.
  let connection = given;
  try {
    connection = normalizeSourceConnection(given);
    const { configs } = parseSourceHosts(connection);
    if (configs.length > 1) return configs.every((c) => checkPostgresConnection(c.connectionString ?? '', findings));
  } catch (error) {
    if (!(error instanceof SourceConnectionStringError)) throw error;
    add(findings, 'source.connection', `"${redactConnectionString(given)}": ${error.message.replace(/^source\.connection: /, '').replace(/ — fix: .*$/, '')}`, String((error.details as { fix?: unknown }).fix ?? ''));
    return false;
  }
  const url = /^(postgres(ql)?:\/\/|socket:)/i.test(connection);
  let problem = url ? null : `"${redactConnectionString(connection)}" is not a postgres:// URL`;
  if (url && !/^socket:/i.test(connection)) {
    // A user without a host (`postgres://u@/db?host=/socket`) is no WHATWG URL, and pg reads it: check it with a host.
    try {
      new URL(connection.replace(/@\//, '@localhost/'));
    } catch (error) {
      problem = `"${redactConnectionString(connection)}" is not a valid URL (${error instanceof Error ? error.message : String(error)})`;
    }
  }
  if (problem === null) return true;
  add(findings, 'source.connection', problem, 'write it as postgres://user:password@host:5432/database (percent-encode special characters in the password); several hosts for failover: postgres://user:password@host1:5432,host2:5432/database?target_session_attrs=read-write');
  return false;
}

/** The destination's connection string, as the KurrentDB client parses it. Adds a problem and returns false when it does not parse. */
export function checkKurrentDBConnection(connectionString: string, findings: Findings): boolean {
  try {
    parseConnectionString(connectionString);
    return true;
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    add(findings, 'destination.connectionString', `not a KurrentDB connection string: ${redactConnectionString(reason)}`, FIXES['destination.connectionString']!);
    return false;
  }
}

/** `source.spillDir`, when given, must be a directory already: spilling starts in the middle of a large transaction, too late to find out. */
export function checkSpillDir(dir: unknown, findings: Findings): void {
  if (typeof dir !== 'string' || dir === '' || reported(findings, 'source.spillDir')) return;
  const path = resolve(process.cwd(), dir);
  let isDirectory = false;
  try {
    isDirectory = statSync(path).isDirectory();
  } catch {
    // missing: said below
  }
  if (!isDirectory) add(findings, 'source.spillDir', `directory ${path} does not exist`, FIXES['source.spillDir']!);
}

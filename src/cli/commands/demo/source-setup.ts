// The source side, as an operator would set it up: the example's tables in the demo's own
// schema, a least-privilege capture role (USAGE on that schema, SELECT on its tables) and the
// publication. The assembler creates its slot itself. Each step registers its undo at once.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { mapperRequirements, type AnyMapper } from '../../../mapping/index.js';
import { captureRoleSql, setupCapture } from '../../../source/setup.js';
import { dropReferenceSlot } from '../../../testing/verify-destination.js';
import type { Cleanups } from './cleanups.js';
import { withClient, withUser } from './connections.js';
import { exampleSchemaSql } from './example.js';
import type { DemoNames } from './names.js';
import type { Say } from './types.js';

export interface PreparedSource {
  /** The captured tables: every table the mappers declare (what the assembler's configuration defaults to). */
  readonly tables: readonly string[];
  /** Connection of the capture role. */
  readonly capture: string;
}

export async function prepareSource(admin: string, names: DemoNames, mappers: readonly AnyMapper[], cleanups: Cleanups, say: Say): Promise<PreparedSource> {
  const tables = Object.keys(mapperRequirements(mappers));
  const schema = pg.escapeIdentifier(names.schema);
  const database = await withClient(admin, async (c) => (await c.query<{ db: string }>('SELECT current_database() AS db')).rows[0]!.db);
  // One implicit transaction (a multi-statement query): the schema exists with all its tables, or
  // not at all. CREATE SCHEMA without IF NOT EXISTS: a schema of that name that is not ours is an error, never reused.
  const sql = await exampleSchemaSql();
  await withClient(admin, (c) => c.query(`CREATE SCHEMA ${schema};\nSET search_path TO ${schema};\n${sql}`));
  if (names.shared) cleanups.push(`schema ${names.schema}`, () => withClient(admin, (c) => c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)));
  say(`schema: examples/invoicing/schema.sql applied in schema ${names.schema} (the demo's own${names.shared ? ', dropped at the end' : ''})`);

  const role = pg.escapeIdentifier(names.role);
  const password = randomBytes(16).toString('hex');
  await withClient(admin, (c) => c.query(captureRoleSql({ role: names.role, tables: [...tables], database, password })));
  if (names.shared) cleanups.push(`role ${names.role}`, () => withClient(admin, (c) => c.query(`DROP OWNED BY ${role}; DROP ROLE ${role}`)));
  // The publication only: the assembler creates its slot itself, with an exported snapshot (snapshot.mode 'initial').
  const setup = await setupCapture({ connection: admin, publication: names.publication, slot: names.slot, tables: [...tables], createSlot: false });
  if (names.shared) {
    cleanups.push(`publication ${names.publication} and slot ${names.slot}`, async () => {
      await dropReferenceSlot(admin, names.slot);
      await withClient(admin, (c) => c.query(`DROP PUBLICATION IF EXISTS ${pg.escapeIdentifier(names.publication)}`));
    });
  }
  say(`capture: role ${names.role} (LOGIN REPLICATION, USAGE on schema ${names.schema}, SELECT on its ${tables.length} tables); ${setup.lines.filter((l) => !/slot/.test(l)).join('; ')}`);
  return { tables, capture: withUser(admin, names.role, password) };
}

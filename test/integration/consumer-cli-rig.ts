// Shared by the tests of `event-assembler project …` as processes: the accounts projection of
// consumer-rig.ts written as a user's TypeScript config module (secrets from EA_PROJ_PG and
// EA_PROJ_KDB), with the parts each test varies, and a wait for a CLI process's exit.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CliProcess } from './pipeline-rig.js';

const src = join(process.cwd(), 'src/index.js');

export interface AccountsConfigParts {
  /** Lines before the projection (imports). */
  readonly imports?: string;
  /** Extra fields of defineProjection, e.g. `onError: 'park',`. */
  readonly options?: string;
  /** Statements at the start of the Deposited handler (a fault to throw, a lock to wait on). */
  readonly beforeDeposit?: string;
  /** Statements between the projection and the default export. */
  readonly between?: string;
  /** Extra fields of defineProjectionConfig, e.g. `rebuild: { … },`. */
  readonly config?: string;
}

/** Writes `projection.config.ts` into `dir`: the accounts projection (balances by increments, closings delete) and its configuration. */
export function writeAccountsConfig(dir: string, parts: AccountsConfigParts = {}): string {
  const file = join(dir, 'projection.config.ts');
  writeFileSync(
    file,
    `${parts.imports ?? ''}
import { defineProjection, defineProjectionConfig } from '${src}';

type Events = { Deposited: { account: string; amount: number }; AccountClosed: { account: string } };

const accounts = defineProjection<Events>({
  name: 'accounts',
  from: { categories: ['account'] },
  deletes: ['AccountClosed'],
  ${parts.options ?? ''}
  setup: async (client, schema) => {
    await client.query(\`CREATE TABLE IF NOT EXISTS "\${schema}".accounts (id text PRIMARY KEY, balance bigint NOT NULL)\`);
  },
  handlers: {
    Deposited: async (event, ctx) => {
      ${parts.beforeDeposit ?? ''}
      await ctx.client.query(
        \`INSERT INTO "\${ctx.schema}".accounts (id, balance) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET balance = accounts.balance + EXCLUDED.balance\`,
        [event.data.account, event.data.amount],
      );
    },
    AccountClosed: async (event, ctx) => {
      await ctx.client.query(\`DELETE FROM "\${ctx.schema}".accounts WHERE id = $1\`, [event.data.account]);
    },
  },
});
${parts.between ?? ''}
export default defineProjectionConfig({
  postgres: 'env:EA_PROJ_PG',
  kurrentdb: 'env:EA_PROJ_KDB',
  projections: [accounts],
  ${parts.config ?? ''}
});
`,
  );
  return file;
}

/** The process's exit code (or 'timeout'); a process still running afterwards is killed. */
export async function finished(cli: CliProcess, timeoutMs = 60_000): Promise<number | null | 'timeout'> {
  try {
    return await cli.exit(timeoutMs);
  } finally {
    if (cli.child.exitCode === null) cli.child.kill('SIGKILL');
  }
}

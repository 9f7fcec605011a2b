// Creating a rig cluster on disk: the base and data directories (owned by the server's OS user
// when we run as root), `initdb` with the superuser's password, pg_hba.conf and the rig's
// postgresql.conf settings. Also the environment every server process runs with.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { configurationLines } from './postgres-parameters.js';
import type { ServerUser } from './postgres-process.js';
import type { ParameterValue } from './postgres-types.js';

export const SUPERUSER = 'postgres';

/** Where a cluster lives: `<baseDir>/data` and `<baseDir>/postgres.log`. */
export interface ClusterLayout {
  readonly baseDir: string;
  /** True when the rig made `baseDir` (and removes it whole on destroy). */
  readonly ownsBaseDir: boolean;
  readonly dataDir: string;
  readonly logFile: string;
}

export function clusterLayout(baseDir: string, ownsBaseDir: boolean): ClusterLayout {
  return { baseDir, ownsBaseDir, dataDir: path.join(baseDir, 'data'), logFile: path.join(baseDir, 'postgres.log') };
}

/**
 * Makes the data directory (mode 0700) and, as root, hands it to the server's user: a base
 * directory the rig made is chowned too; a given one only gains search permission for others.
 */
export async function prepareDirectories(layout: ClusterLayout, user: ServerUser): Promise<void> {
  const { baseDir, dataDir } = layout;
  await fs.mkdir(baseDir, { recursive: true });
  await fs.mkdir(dataDir, { mode: 0o700 });
  await fs.chmod(dataDir, 0o700);
  if (user.uid === undefined) return;
  if (layout.ownsBaseDir) {
    await fs.chown(baseDir, user.uid, user.gid!);
  } else {
    // The server's user must reach <baseDir>/data: add search permission for others if missing.
    const mode = (await fs.stat(baseDir)).mode & 0o7777;
    if ((mode & 0o001) === 0) await fs.chmod(baseDir, mode | 0o001);
  }
  await fs.chown(dataDir, user.uid, user.gid!);
}

export async function initCluster(
  initdb: string,
  layout: ClusterLayout,
  password: string,
  user: ServerUser,
  parameters: Record<string, ParameterValue>,
): Promise<void> {
  const { baseDir, dataDir } = layout;
  const pwFile = path.join(baseDir, `.pwfile-${randomBytes(4).toString('hex')}`);
  await fs.writeFile(pwFile, `${password}\n`, { mode: 0o600 });
  if (user.uid !== undefined) await fs.chown(pwFile, user.uid, user.gid!);
  try {
    const args = [
      `--pgdata=${dataDir}`,
      `--username=${SUPERUSER}`,
      `--pwfile=${pwFile}`,
      '--auth=scram-sha-256',
      '--encoding=UTF8',
      '--locale=C',
      // Test clusters: skip the fsync of the freshly written files (see DEFAULT_PARAMETERS).
      '--no-sync',
      '--no-instructions',
    ];
    const output = await runToCompletion(initdb, args, user);
    if (output.code !== 0) throw new Error(`initdb failed (exit ${output.code}): ${output.text}`);
  } finally {
    await fs.rm(pwFile, { force: true });
  }
  // pg_hba written explicitly: password (SCRAM) logins over TCP from this host only, for
  // normal and replication connections. No unix sockets are opened (see DEFAULT_PARAMETERS).
  const hba = [
    '# event-assembler test rig',
    '# TYPE  DATABASE     USER  ADDRESS        METHOD',
    'host    all          all   127.0.0.1/32   scram-sha-256',
    'host    replication  all   127.0.0.1/32   scram-sha-256',
    '',
  ].join('\n');
  await fs.writeFile(path.join(dataDir, 'pg_hba.conf'), hba);
  const conf = configurationLines(parameters);
  await fs.appendFile(path.join(dataDir, 'postgresql.conf'), `\n# event-assembler test rig\n${conf.join('\n')}\n`);
}

function runToCompletion(command: string, args: string[], user: ServerUser): Promise<{ code: number | null; text: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...user, env: serverEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (text += c.toString('utf8')));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, text }));
  });
}

export function serverEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LC_ALL: 'C', LANG: 'C' };
  // Client-side PG* variables have no business in the server's environment.
  for (const key of Object.keys(env)) if (key.startsWith('PG')) delete env[key];
  return env;
}

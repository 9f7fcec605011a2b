// The embedded PostgreSQL rig's pure parts, without a server: how settings are written
// (postgres-parameters.ts), connection strings and the CREATE ROLE statement (postgres-sql.ts),
// and where a cluster lives and what environment its processes get (postgres-init.ts).
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { clusterLayout, serverEnv } from '../../src/testing/postgres-init.js';
import { checkParameterName, configurationLines, DEFAULT_PARAMETERS, parameterLiteral } from '../../src/testing/postgres-parameters.js';
import { connectionConfigFor, connectionStringFor, createRoleStatement } from '../../src/testing/postgres-sql.js';

const SERVER = { host: '127.0.0.1', port: 54321, superuser: 'postgres', password: 'p@ss/word' };

describe('postgres-parameters', () => {
  it('writes booleans as on/off, numbers as they are, strings as quoted literals', () => {
    expect(parameterLiteral(true)).toBe('on');
    expect(parameterLiteral(false)).toBe('off');
    expect(parameterLiteral(64)).toBe('64');
    expect(parameterLiteral('64MB')).toBe("'64MB'");
    expect(parameterLiteral("it's")).toBe("'it''s'");
    expect(() => parameterLiteral(Number.NaN)).toThrow(/Invalid PostgreSQL parameter value/);
  });

  it('accepts parameter names (dotted ones too) and refuses anything that could inject SQL', () => {
    expect(() => checkParameterName('max_slot_wal_keep_size')).not.toThrow();
    expect(() => checkParameterName('auto_explain.log_min_duration')).not.toThrow();
    expect(() => checkParameterName('fsync = on; DROP')).toThrow(/Invalid PostgreSQL parameter name/);
    expect(() => configurationLines({ 'bad name': 1 })).toThrow(/Invalid PostgreSQL parameter name/);
  });

  it('the defaults: logical WAL on loopback, TCP only, no fsync but synchronous commit', () => {
    const lines = configurationLines(DEFAULT_PARAMETERS);
    expect(lines).toContain("wal_level = 'logical'");
    expect(lines).toContain("listen_addresses = '127.0.0.1'");
    expect(lines).toContain("unix_socket_directories = ''");
    expect(lines).toContain("fsync = 'off'");
    expect(lines).toContain("synchronous_commit = 'on'");
  });
});

describe('postgres-sql', () => {
  it('connection settings default to the superuser, the server password and the postgres database', () => {
    expect(connectionConfigFor(SERVER)).toEqual({ host: '127.0.0.1', port: 54321, user: 'postgres', password: 'p@ss/word', database: 'postgres' });
    expect(connectionConfigFor(SERVER, { user: 'capture', database: 'shop' })).toMatchObject({ user: 'capture', database: 'shop', password: 'p@ss/word' });
  });

  it('connection strings percent-encode user, password and database', () => {
    expect(connectionStringFor(SERVER, { user: 'a b', database: 'db/1' })).toBe('postgresql://a%20b:p%40ss%2Fword@127.0.0.1:54321/db%2F1');
  });

  it('CREATE ROLE: login roles get the server password unless given one; flags spelled out', () => {
    expect(createRoleStatement('capture', { replication: true }, 'secret')).toBe(
      `CREATE ROLE "capture" WITH LOGIN REPLICATION NOSUPERUSER PASSWORD 'secret'`,
    );
    expect(createRoleStatement('owner', { login: false }, 'secret')).toBe('CREATE ROLE "owner" WITH NOLOGIN NOREPLICATION NOSUPERUSER');
    expect(createRoleStatement('Admin', { superuser: true, password: "o'k" }, 'secret')).toBe(
      `CREATE ROLE "Admin" WITH LOGIN NOREPLICATION SUPERUSER PASSWORD 'o''k'`,
    );
  });
});

describe('postgres-init', () => {
  it('a cluster lives in <baseDir>/data and logs to <baseDir>/postgres.log', () => {
    expect(clusterLayout('/tmp/rig', true)).toEqual({
      baseDir: '/tmp/rig',
      ownsBaseDir: true,
      dataDir: path.join('/tmp/rig', 'data'),
      logFile: path.join('/tmp/rig', 'postgres.log'),
    });
  });

  it('server processes run in the C locale without the client-side PG* variables', () => {
    const saved = { PGHOST: process.env.PGHOST, PGPASSWORD: process.env.PGPASSWORD };
    process.env.PGHOST = 'elsewhere';
    process.env.PGPASSWORD = 'leak';
    try {
      const env = serverEnv();
      expect(env.LC_ALL).toBe('C');
      expect(env.LANG).toBe('C');
      expect(Object.keys(env).filter((k) => k.startsWith('PG'))).toEqual([]);
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key];
        else process.env[key] = value;
      }
    }
  });
});

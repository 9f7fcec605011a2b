// Multi-host source connections (src/source/multi-host.ts): what a host list means for `pg`, and
// the errors of one that does not parse. The host walk itself runs against real servers in
// test/resilience/failover.test.ts.
import { describe, expect, it } from 'vitest';
import { describeSourceHosts, normalizeSourceConnection, parseSourceHosts, SourceConnectionStringError } from '../../src/source/multi-host.js';
import { parsePostgresSourceOptions } from '../../src/source/source-options.js';

describe('parseSourceHosts', () => {
  it.each([
    [
      'postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write&sslmode=disable',
      'read-write',
      ['postgres://u:p@h1:5432/db?sslmode=disable', 'postgres://u:p@h2:5433/db?sslmode=disable'],
    ],
    ['postgres://u:p@h1,h2/db', 'read-write', ['postgres://u:p@h1:5432/db', 'postgres://u:p@h2:5432/db']],
    ['postgres://u@/db?host=x,y&port=6000', 'read-write', ['postgres://u@x:6000/db', 'postgres://u@y:6000/db']],
    ['postgres://u@[::1]:5,h2/db?target_session_attrs=any', 'any', ['postgres://u@[::1]:5/db', 'postgres://u@h2:5432/db']],
    ["host=a,b port=5432,5433 user=u password='p w' dbname=d", 'read-write', ['postgres://u:p%20w@a:5432/d', 'postgres://u:p%20w@b:5433/d']],
    ['postgres://u:p@h1:5432/db?target_session_attrs=primary', 'primary', ['postgres://u:p@h1:5432/db']],
  ])('%s: one pg setting per host, in order', (connection, attrs, strings) => {
    const parsed = parseSourceHosts(connection);
    expect(parsed.targetSessionAttrs).toBe(attrs);
    expect(parsed.configs.map((c) => c.connectionString)).toEqual(strings);
  });

  it('passes a single-host string through unchanged', () => {
    const url = 'postgresql://capture:pw@db.internal:5432/shop?sslmode=require';
    expect(parseSourceHosts(url)).toEqual({ hosts: [{ host: 'db.internal', port: 5432 }], targetSessionAttrs: 'any', configs: [{ connectionString: url }] });
  });

  it('splits pg settings whose host lists several hosts', () => {
    const parsed = parseSourceHosts({ host: 'a,b', port: 6000, user: 'u', database: 'd' });
    expect(parsed.configs).toEqual([{ host: 'a', port: 6000, user: 'u', database: 'd' }, { host: 'b', port: 6000, user: 'u', database: 'd' }]);
  });

  it.each([
    ['postgres://u@h1,,h2/db', 'the host list has an empty entry'],
    ['postgres://u@h1,h2/db?port=1,2,3', '2 hosts but 3 ports'],
    ['postgres://u@h1:99999,h2/db', '"99999" is not a port'],
    ['postgres://u@h1,h2/db?target_session_attrs=standby', 'target_session_attrs=standby would connect to a standby'],
    ['postgres://u@h1,h2/db?target_session_attrs=sometimes', 'target_session_attrs "sometimes" is not one of any, read-write, primary'],
    ["host=a,b user='unterminated", 'cannot read'],
  ])('%s: a clear error', (connection, message) => {
    expect(() => parseSourceHosts(connection)).toThrow(SourceConnectionStringError);
    expect(() => parseSourceHosts(connection)).toThrow(message);
  });

  it('names the hosts for logs without the password, and turns the keyword form into a URL', () => {
    expect(describeSourceHosts('postgres://u:secret@h1:5432,h2:5433/db')).toBe('h1:5432,h2:5433');
    expect(normalizeSourceConnection('host=a,b port=5432 user=u dbname=d')).toBe('postgres://u@/d?host=a,b&port=5432');
    expect(normalizeSourceConnection('postgres://u@h/d')).toBe('postgres://u@h/d');
  });

  it('the source options name the connection field for a bad host list', () => {
    expect(() => parsePostgresSourceOptions({ connection: 'postgres://u@h1,,h2/db', slot: 's', publication: 'p', tables: ['public.t'] })).toThrow(/invalid source option "connection": the host list has an empty entry/);
  });
});

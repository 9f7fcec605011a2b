/**
 * Multi-host source connections, as libpq spells them: `postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=read-write`,
 * `postgres://u:p@/db?host=h1,h2&port=5432,5433`, or the keyword form `host=h1,h2 port=5432,5433 user=u dbname=db`.
 * node-postgres knows one host only, so this file turns such a string into one `pg` setting per
 * host (tried in order by connect-source.ts). A string with one host and no
 * `target_session_attrs` is passed to `pg` unchanged.
 *
 * `target_session_attrs`: `read-write` (the default with several hosts) and `primary` take the
 * first host that accepts and is not in recovery; `any` the first that accepts. The assembler
 * needs the primary (it streams a slot and writes watermarks), so `read-only`, `standby` and
 * `prefer-standby` are refused.
 */
import type pg from 'pg';
import { EventAssemblerError } from '../errors.js';

export type TargetSessionAttrs = 'any' | 'read-write' | 'primary';

export interface SourceHost {
  readonly host: string;
  readonly port: number;
}

export interface SourceHosts {
  readonly hosts: readonly SourceHost[];
  /** Which host is taken: see the file's comment. Default: `read-write` with several hosts, else `any`. */
  readonly targetSessionAttrs: TargetSessionAttrs;
  /** `pg` settings for each host, in order. */
  readonly configs: readonly pg.ClientConfig[];
}

/** A source connection string that names hosts wrongly; `field` is `source.connection`. */
export class SourceConnectionStringError extends EventAssemblerError {
  constructor(problem: string, fix: string) {
    super('SOURCE_CONNECTION_INVALID', `source.connection: ${problem} — fix: ${fix}`, { field: 'source.connection', fix });
  }
}

const URL_FORM = /^(postgres(?:ql)?:\/\/)(?:([^@/?#]*)@)?([^/?#]*)([^?#]*)(\?[^#]*)?(#.*)?$/i;
const KEYWORD_FORM = /^\s*[A-Za-z_]+\s*=/;
const DEFAULT_PORT = 5432;
const MULTI_HOST_FIX = 'write the hosts as postgres://user:password@host1:5432,host2:5432/database?target_session_attrs=read-write';

/** `host[:port]` or `[v6]:port` of an authority list entry. */
function splitAuthorityHost(entry: string): { host: string; port: string | null } {
  const v6 = /^\[([^\]]+)\](?::(.*))?$/.exec(entry);
  if (v6) return { host: v6[1]!, port: v6[2] ?? null };
  const colon = entry.lastIndexOf(':');
  return colon < 0 ? { host: entry, port: null } : { host: entry.slice(0, colon), port: entry.slice(colon + 1) };
}

function parsePort(text: string): number {
  const port = Number(text);
  if (!/^\d+$/.test(text) || port < 1 || port > 65_535) throw new SourceConnectionStringError(`"${text}" is not a port`, MULTI_HOST_FIX);
  return port;
}

function parseAttrs(value: string | null, several: boolean): TargetSessionAttrs {
  if (value === null || value === '') return several ? 'read-write' : 'any';
  if (value === 'any' || value === 'read-write' || value === 'primary') return value;
  if (['read-only', 'standby', 'prefer-standby'].includes(value)) {
    throw new SourceConnectionStringError(
      `target_session_attrs=${value} would connect to a standby, but capture needs the primary (it streams a replication slot)`,
      'use target_session_attrs=read-write (or primary, or leave it out)',
    );
  }
  throw new SourceConnectionStringError(`target_session_attrs "${value}" is not one of any, read-write, primary`, 'use target_session_attrs=read-write');
}

/** The hosts and ports of a host list and a port list (one port for all, or one per host). */
function pairHosts(hostList: string[], portList: (string | null)[]): SourceHost[] {
  if (hostList.some((h) => h === '')) throw new SourceConnectionStringError('the host list has an empty entry', MULTI_HOST_FIX);
  if (portList.length > 1 && portList.length !== hostList.length) {
    throw new SourceConnectionStringError(`${hostList.length} hosts but ${portList.length} ports`, 'give one port for every host, or a single port for all of them');
  }
  return hostList.map((host, i) => {
    const port = portList.length === 1 ? portList[0] : portList[i];
    return { host, port: port === null || port === undefined || port === '' ? DEFAULT_PORT : parsePort(port) };
  });
}

function urlHost(h: SourceHost): string {
  return h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`;
}

function parseUrlForm(connection: string): SourceHosts | null {
  const m = URL_FORM.exec(connection);
  if (!m) return null;
  const [, scheme, userinfo, authority, path, query] = m;
  const params = new URLSearchParams((query ?? '').slice(1));
  const fromAuthority = authority ? authority.split(',').map(splitAuthorityHost) : [];
  const hostParam = params.get('host');
  const portParam = params.get('port');
  const hostList = hostParam !== null ? hostParam.split(',') : fromAuthority.map((e) => e.host);
  const portList = portParam !== null ? portParam.split(',') : fromAuthority.map((e) => e.port);
  const attrsParam = params.get('target_session_attrs');
  if (hostList.length <= 1 && attrsParam === null) return null; // one host: pg reads the string as it is
  const hosts = pairHosts(hostList.length ? hostList : ['localhost'], portList.length ? portList : [null]);
  const targetSessionAttrs = parseAttrs(attrsParam, hosts.length > 1);
  for (const key of ['host', 'port', 'target_session_attrs']) params.delete(key);
  const configs = hosts.map((h) => {
    const rest = new URLSearchParams(params);
    // A socket directory is no URL host: pg reads it from ?host= with an empty authority.
    const socket = h.host.startsWith('/');
    if (socket) {
      rest.set('host', h.host);
      rest.set('port', String(h.port));
    }
    const q = rest.toString();
    return { connectionString: `${scheme}${userinfo !== undefined ? `${userinfo}@` : ''}${socket ? '' : urlHost(h)}${path || '/'}${q ? `?${q}` : ''}` };
  });
  return { hosts, targetSessionAttrs, configs };
}

/** libpq's keyword form (`host=a,b port=5432 dbname=db user=u password='p w'`) as a postgres:// URL. */
export function keywordFormToUrl(connection: string): string {
  const pairs = new Map<string, string>();
  const re = /\s*([A-Za-z_]+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|((?:[^'\s]\S*)?)(?=\s|$))/y;
  let at = 0;
  while (at < connection.length) {
    if (/^\s*$/.test(connection.slice(at))) break;
    re.lastIndex = at;
    const m = re.exec(connection);
    if (!m) throw new SourceConnectionStringError(`cannot read "${connection.slice(at).trim().slice(0, 40)}" as keyword=value`, "write each setting as keyword=value, quoting values with spaces in '…'");
    pairs.set(m[1]!.toLowerCase(), m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!);
    at = re.lastIndex;
  }
  const take = (key: string): string | undefined => {
    const v = pairs.get(key);
    pairs.delete(key);
    return v;
  };
  const user = take('user');
  const password = take('password');
  const dbname = take('dbname');
  const userinfo = user !== undefined ? `${encodeURIComponent(user)}${password !== undefined ? `:${encodeURIComponent(password)}` : ''}@` : '';
  const query = new URLSearchParams([...pairs.entries()]).toString().replace(/%2C/gi, ',').replace(/%2F/gi, '/');
  return `postgres://${userinfo}${dbname !== undefined ? `/${encodeURIComponent(dbname)}` : '/'}${query ? `?${query}` : ''}`;
}

/**
 * The hosts of a source connection and `pg` settings for each. Throws SourceConnectionStringError
 * for a host list that does not parse (an empty entry, a bad port, ports and hosts that do not
 * pair up, a target_session_attrs the assembler cannot use).
 */
export function parseSourceHosts(connection: string | pg.ClientConfig): SourceHosts {
  if (typeof connection !== 'string') {
    if (typeof connection.connectionString === 'string') {
      const { connectionString, ...rest } = connection;
      const inner = parseSourceHosts(connectionString);
      return { ...inner, configs: inner.configs.map((c) => ({ ...rest, ...c })) };
    }
    const hostList = typeof connection.host === 'string' ? connection.host.split(',') : [connection.host ?? 'localhost'];
    if (hostList.length <= 1) return { hosts: [{ host: hostList[0] ?? 'localhost', port: connection.port ?? DEFAULT_PORT }], targetSessionAttrs: 'any', configs: [connection] };
    const hosts = pairHosts(hostList, [connection.port === undefined ? null : String(connection.port)]);
    return { hosts, targetSessionAttrs: 'read-write', configs: hosts.map((h) => ({ ...connection, host: h.host, port: h.port })) };
  }
  if (KEYWORD_FORM.test(connection) && !/^[a-z]+:/i.test(connection)) return parseSourceHosts(keywordFormToUrl(connection));
  const multi = parseUrlForm(connection);
  if (multi) return multi;
  const m = URL_FORM.exec(connection);
  const single = m?.[3] ? splitAuthorityHost(m[3]) : null;
  const host = single ? { host: single.host || 'localhost', port: single.port ? Number(single.port) || DEFAULT_PORT : DEFAULT_PORT } : { host: 'localhost', port: DEFAULT_PORT };
  return { hosts: [host], targetSessionAttrs: 'any', configs: [{ connectionString: connection }] };
}

/** `host:port[,host:port…]` of a source connection, for log lines and errors (never its password). */
export function describeSourceHosts(connection: string | pg.ClientConfig): string {
  return parseSourceHosts(connection).hosts.map(urlHost).join(',');
}

/** The connection as one string pg reads: a keyword-form string becomes a postgres:// URL; anything else is returned as it is. */
export function normalizeSourceConnection(connection: string): string {
  return KEYWORD_FORM.test(connection) && !/^[a-z]+:/i.test(connection) ? keywordFormToUrl(connection) : connection;
}

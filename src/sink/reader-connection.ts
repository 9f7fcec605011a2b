/**
 * Connection strings for the clients that read (reads go through the client's native bridge).
 *
 * The bridge (`@kurrent/kurrentdb-client` 1.x, its Rust client) waits one discovery interval
 * before it opens its first connection: 500 ms by default, measured on every fresh client's first
 * read, against any server. The assembler reads with fresh clients at start-up (its checkpoint,
 * the snapshot progress, the log head), so that wait was most of its start-up. Readers therefore
 * get a 50 ms interval unless the connection string sets one (or the discovery attempts) itself.
 * Measured: a first read takes ~100 ms instead of ~510 ms; against a server that is down, a read
 * fails after 50 ms instead of 500 ms (one attempt either way) — every reader retries with its
 * own backoff.
 */
export function readerConnectionString(connectionString: string): string {
  const [base, query = ''] = connectionString.split('?', 2) as [string, string?];
  const keys = query.split('&').map((pair) => (pair.split('=')[0] ?? '').toLowerCase());
  if (keys.includes('discoveryinterval') || keys.includes('maxdiscoverattempts')) return connectionString;
  return `${base}?${query ? `${query}&` : ''}discoveryInterval=50`;
}

/** The host:port list of a KurrentDB connection string, for log lines and errors (never its credentials). */
export function kurrentdbAddress(connectionString: string): string {
  return /^[a-z+]+:\/\/(?:[^@/]*@)?([^/?]+)/i.exec(connectionString)?.[1] ?? '(unparsed connection string)';
}

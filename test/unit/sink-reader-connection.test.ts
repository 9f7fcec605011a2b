// Reader clients get a short discovery interval (the bridge waits one before its first
// connection), unless the connection string says otherwise.
import { describe, expect, it } from 'vitest';
import { readerConnectionString } from '../../src/sink/index.js';

describe('readerConnectionString', () => {
  it('adds a 50 ms discovery interval to a string that sets neither it nor the attempts', () => {
    expect(readerConnectionString('kurrentdb://127.0.0.1:2113?tls=false')).toBe('kurrentdb://127.0.0.1:2113?tls=false&discoveryInterval=50');
    expect(readerConnectionString('kurrentdb://admin:changeit@db:2113')).toBe('kurrentdb://admin:changeit@db:2113?discoveryInterval=50');
    expect(readerConnectionString('kurrentdb+discover://a:2113,b:2113?tls=true&nodePreference=leader')).toBe(
      'kurrentdb+discover://a:2113,b:2113?tls=true&nodePreference=leader&discoveryInterval=50',
    );
  });

  it('leaves a string that sets either setting (any case) as it is', () => {
    for (const s of ['kurrentdb://h:2113?tls=false&discoveryInterval=500', 'kurrentdb://h:2113?MaxDiscoverAttempts=5', 'kurrentdb://h:2113?DISCOVERYINTERVAL=100']) {
      expect(readerConnectionString(s)).toBe(s);
    }
  });
});

// A TCP proxy to 127.0.0.1:`port` whose current connections can be made to swallow everything
// (a peer that stopped answering without closing: a frozen process, a partition); connections
// made after `blackhole()` forward again.
import net from 'node:net';

export interface BlackholeProxy {
  readonly port: number;
  blackhole(): void;
  close(): Promise<void>;
}

export async function startBlackholeProxy(port: number): Promise<BlackholeProxy> {
  const pairs = new Set<{ dead: boolean; a: net.Socket; b: net.Socket }>();
  const server = net.createServer((a) => {
    const b = net.connect({ port, host: '127.0.0.1', noDelay: true });
    a.setNoDelay(true);
    const pair = { dead: false, a, b };
    pairs.add(pair);
    a.on('data', (d) => pair.dead || b.write(d));
    b.on('data', (d) => pair.dead || a.write(d));
    const end = () => {
      pairs.delete(pair);
      if (!pair.dead) {
        a.destroy();
        b.destroy();
      }
    };
    a.on('close', end).on('error', () => undefined);
    b.on('close', end).on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    blackhole: () => {
      for (const pair of pairs) pair.dead = true;
    },
    close: () =>
      new Promise((resolve) => {
        for (const pair of pairs) {
          pair.a.destroy();
          pair.b.destroy();
        }
        server.close(() => resolve());
      }),
  };
}

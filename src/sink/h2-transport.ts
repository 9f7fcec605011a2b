/**
 * How the sink's own HTTP/2 connections (h2-grpc.ts through node:http2, h2-frames.ts by hand)
 * reach the server: plain TCP for `tls=false`, else TLS as the client's own channel does it —
 * the connection string read by the client's parser, with the same options and defaults: the
 * certificate verified (`tlsVerifyCert=false` turns that off), against `tlsCAFile` or the
 * system's roots, a client certificate from `userCertFile`/`userKeyFile`, files relative to the
 * working directory. ALPN offers `h2` only, as gRPC requires. No Nagle in either case: a small
 * request behind an unacknowledged frame would wait for the server's delayed ACK.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import connectionStrings from '@kurrent/kurrentdb-client/dist/Client/parseConnectionString.js';

export interface H2Transport {
  /** `http` (plain text) or `https` (TLS): the `:scheme` of every request. */
  readonly scheme: 'http' | 'https';
  /** A new connection to `host:port`, TLS handshake (if any) under way: writes may follow at once. */
  connect(host: string, port: number): net.Socket;
}

/** Plain text (`tls=false`). */
export const PLAIN_TRANSPORT: H2Transport = {
  scheme: 'http',
  connect: (host, port) => net.connect({ host, port, noDelay: true }),
};

const resolveFile = (file: string): Buffer => readFileSync(path.isAbsolute(file) ? file : path.resolve(process.cwd(), file));

/**
 * The transport for `connectionString`. Throws what reading it throws (the client's parser on a
 * malformed string, a certificate file that cannot be read) — the client itself refuses such a
 * string first, so the sink never gets that far with one.
 */
export function transportOf(connectionString: string): H2Transport {
  const options = connectionStrings.parseConnectionString(connectionString);
  if (options.tls === false) return PLAIN_TRANSPORT;
  const ca = options.tlsCAFile ? [resolveFile(options.tlsCAFile)] : undefined;
  const cert = options.userCertFile ? resolveFile(options.userCertFile) : undefined;
  const key = options.userKeyFile ? resolveFile(options.userKeyFile) : undefined;
  const rejectUnauthorized = options.tlsVerifyCert !== false;
  return {
    scheme: 'https',
    connect(host, port) {
      const socket = tls.connect({
        host,
        port,
        // SNI names a host, never an address (node warns and the server would not match it).
        ...(net.isIP(host) === 0 ? { servername: host } : {}),
        ALPNProtocols: ['h2'],
        rejectUnauthorized,
        ...(ca ? { ca } : {}),
        ...(cert && key ? { cert, key } : {}),
      });
      socket.setNoDelay(true);
      return socket;
    },
  };
}

/** Whether a connection `transportOf` made speaks HTTP/2: plain text always; TLS once ALPN chose `h2` (call after `secureConnect`). */
export function speaksH2(socket: net.Socket): boolean {
  return !(socket instanceof tls.TLSSocket) || socket.alpnProtocol === 'h2';
}

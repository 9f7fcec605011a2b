// A certificate authority and a server certificate it signed, for 127.0.0.1 and localhost, made
// with the openssl CLI into `dir` — for the in-memory KurrentDB's TLS (`startInMemoryKurrentDB({
// tls })`), as KurrentDB's own setups do it (a CA, and a node certificate that is no CA: the
// client's native bridge — rustls — refuses a self-signed CA certificate as a server's). No key
// is kept in the repository; the test that needs one makes it. `.ci/run` installs openssl where
// it is missing, so a test using this fails loudly rather than skipping.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';

export interface TestCertificate {
  /** The CA's certificate (what the connection string's `tlsCAFile` names). */
  readonly caFile: string;
  /** The server's certificate and key. */
  readonly certFile: string;
  readonly keyFile: string;
}

const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/** Writes `ca.pem`, `server-cert.pem` and `server-key.pem` (P-256, valid for two days) into `dir`. */
export function createTestCertificate(dir: string): TestCertificate {
  const file = (name: string) => path.join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', file('ca-key.pem'), '-out', file('ca.pem'), '-days', '2', '-subj', '/CN=event-assembler test CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  openssl('req', ...ec, '-keyout', file('server-key.pem'), '-out', file('server.csr'), '-subj', '/CN=localhost');
  writeFileSync(file('server.ext'), 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl('x509', '-req', '-in', file('server.csr'), '-CA', file('ca.pem'), '-CAkey', file('ca-key.pem'), '-CAcreateserial', '-out', file('server-cert.pem'), '-days', '2', '-extfile', file('server.ext'));
  return { caFile: file('ca.pem'), certFile: file('server-cert.pem'), keyFile: file('server-key.pem') };
}

/**
 * The in-memory KurrentDB in a process of its own, so that in the benchmark it does not share
 * an event loop with the assembler it serves (a real server is another process too).
 *
 *   node --import tsx bench/lib/kurrentdb-server.ts <appendLatencyMs>
 *
 * Prints one JSON line `{ "connectionString": … }` when listening; exits on SIGTERM or when its
 * parent's stdin closes. EA_BENCH_TLS=1: it serves TLS with a certificate made for the run
 * (test/support/tls-cert.ts, in a temp dir removed at exit), the connection string naming its CA.
 * The server is the one bench/lib/subject.ts loads (the bench build, or the
 * sources), unless EA_BENCH_SERVER_MODULE names another module exporting `startInMemoryKurrentDB`
 * (a path or file URL: an older build, for before/after comparisons — bench/server-cpu.bench.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';
import type * as KurrentModule from '../../src/testing/kurrentdb/index.js';

export interface ServerProcess {
  readonly connectionString: string;
  /** The server process (for its CPU time, bench/lib/proc-cpu.ts). */
  readonly pid: number;
  stop(): Promise<void>;
}

/** Starts the server process and resolves once it listens. */
export function startKurrentDBProcess(appendLatencyMs: number): Promise<ServerProcess> {
  const child: ChildProcess = spawn(process.execPath, [...(process.env.EA_BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean), '--import', 'tsx', fileURLToPath(import.meta.url), String(appendLatencyMs)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let buffered = '';
    child.once('exit', (code) => reject(new Error(`in-memory KurrentDB process exited (code ${code}) before listening`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const line = buffered.split('\n')[0];
      if (!buffered.includes('\n') || !line) return;
      const { connectionString } = JSON.parse(line) as { connectionString: string };
      resolve({
        connectionString,
        pid: child.pid ?? -1,
        stop: () =>
          new Promise<void>((done) => {
            if (child.exitCode !== null) return done();
            child.once('exit', () => done());
            child.kill('SIGTERM');
          }),
      });
    });
  });
}

const isMain = process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  const override = process.env.EA_BENCH_SERVER_MODULE;
  const { startInMemoryKurrentDB } = (
    override ? await import(override.startsWith('file:') ? override : pathToFileURL(override).href) : await import('./subject.js')
  ) as Pick<typeof KurrentModule, 'startInMemoryKurrentDB'>;
  const tlsDir = process.env.EA_BENCH_TLS === '1' ? mkdtempSync(path.join(os.tmpdir(), 'ea-bench-tls-')) : null;
  const { createTestCertificate } = await import('../../test/support/tls-cert.js');
  const db = await startInMemoryKurrentDB({ appendLatencyMs: Number(process.argv[2] ?? 0), ...(tlsDir ? { tls: createTestCertificate(tlsDir) } : {}) });
  const shutdown = () =>
    void db.close().then(() => {
      if (tlsDir) rmSync(tlsDir, { recursive: true, force: true });
      process.exit(0);
    });
  process.once('SIGTERM', shutdown);
  process.stdin.on('end', shutdown);
  process.stdin.resume();
  process.stdout.write(`${JSON.stringify({ connectionString: db.connectionString })}\n`);
}

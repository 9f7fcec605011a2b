// The CLI's young-generation flags size the main thread's heap only (bin/main-thread-heap.js):
// the module-hooks thread that tsx runs in gets 1 MiB semi-spaces, or it holds up to 128 MiB of
// young generation (with V8's default, 16 MiB semi-spaces: ~30 MiB) for the life of the process.
// Checked through the real command line: a configuration module (loaded by `run`, on the main
// thread, after bin registered tsx) reads its own thread's young generation and asks a hook module
// for the hooks thread's — after that thread kept enough objects alive to grow its young generation
// as far as its flags let it — prints both, exits.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI_NODE_FLAGS, REPO_ROOT } from '../resilience/assembler-process.js';

const MiB = 1024 * 1024;

const HOOKS_PROBE = `import v8 from 'node:v8';
export function initialize({ port }) {
  // ~40 MB kept alive through several scavenges: V8 grows the young generation to its maximum.
  const kept = [];
  for (let i = 0; i < 800_000; i++) kept.push({ i, text: 'x' + i });
  globalThis.keptByProbe = kept;
  port.postMessage(v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size);
}
`;

const CONFIG = `import { register } from 'node:module';
import v8 from 'node:v8';
import { MessageChannel } from 'node:worker_threads';
const { port1, port2 } = new MessageChannel();
register(new URL('./hooks-probe.mjs', import.meta.url).href, { data: { port: port2 }, transferList: [port2] });
const hooksThread = await new Promise((resolve) => port1.once('message', resolve));
port1.close();
const main = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')!.space_size;
console.log(JSON.stringify({ main, hooksThread }));
process.exit(0);
`;

describe('event-assembler: young generation per thread', () => {
  let work: string;
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'thread-heaps-'));
    writeFileSync(join(work, 'package.json'), '{ "type": "module" }\n');
    writeFileSync(join(work, 'hooks-probe.mjs'), HOOKS_PROBE);
    writeFileSync(join(work, 'probe.config.ts'), CONFIG);
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  it('the main thread runs with 64 MiB semi-spaces, the module-hooks thread with 1 MiB ones', async () => {
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, [...CLI_NODE_FLAGS, join(REPO_ROOT, 'bin/event-assembler.js'), 'run', '--config', join(work, 'probe.config.ts')], { cwd: work, encoding: 'utf8' }, (error, out, err) =>
        error ? reject(new Error(`${error.message}\n${err}`)) : resolve(out),
      );
    });
    const { main, hooksThread } = JSON.parse(stdout.trim().split('\n').at(-1)!) as { main: number; hooksThread: number };
    // A semi-space of 64 MiB at least (V8 reports the new space's committed semi-spaces).
    expect(main).toBeGreaterThanOrEqual(64 * MiB);
    // 1 MiB semi-spaces however much survives (V8's default grows to 16 MiB each under this load).
    expect(hooksThread).toBeGreaterThan(0);
    expect(hooksThread).toBeLessThanOrEqual(2 * MiB);
  });
});

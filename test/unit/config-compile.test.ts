// A TypeScript configuration is compiled on the main thread (src/config/compile-module.ts), not
// through a loader: no module-hooks thread stays behind. Checked in plain Node processes (no tsx in
// them): the compiler is built for the test with esbuild, a probe loads the configuration with it
// and prints what the configuration saw and how many threads the process has.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigLoadError, loadConfig } from '../../src/config/index.js';
import { REPO_ROOT } from '../resilience/assembler-process.js';

const PROBE = `import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
const [how, file] = process.argv.slice(2);
let mod;
if (how === 'compile') mod = await (await import('./compile-module.mjs')).importCompiledModule(file);
else if (how === 'tsx') mod = await (await import('tsx/esm/api')).tsImport(pathToFileURL(file).href, import.meta.url);
else mod = await import(pathToFileURL(file).href);
const threads = Number(/^Threads:\\s+(\\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'))[1]);
const config = mod.default;
const shared = await import('./shared.mjs');
const zod = await import('zod');
const requiredZod = createRequire(import.meta.url)('zod');
console.log(JSON.stringify({ threads, ...config.seen, sameShared: config.token === shared.token, sameZod: config.z === zod.z, sameRequiredZod: config.z === requiredZod.z, sharedLoads: globalThis.sharedLoads }));
`;

const SHARED = `globalThis.sharedLoads = (globalThis.sharedLoads ?? 0) + 1;
export const token = {};
`;

const MAPPER = `import { readFileSync } from 'node:fs';
import { token } from '../shared.mjs';
export const mapperSeen: { url: string; dirname: string; filename: string; data: string } = {
  url: import.meta.url,
  dirname: import.meta.dirname,
  filename: import.meta.filename,
  data: readFileSync(new URL('./data.txt', import.meta.url), 'utf8').trim(),
};
export const mapperToken = token;
`;

const CONFIG = `import { z } from 'zod';
import settings from './settings.json';
import { token } from './shared.mjs';
import { mapperSeen, mapperToken } from './mappers/mapper.ts';
const seen: Record<string, unknown> = { ...mapperSeen, mapperShares: mapperToken === token, configUrl: import.meta.url, region: settings.region };
export default { seen, token, z };
`;

describe('a TypeScript configuration compiled on the main thread', () => {
  let dir: string;
  const probe = (how: 'compile' | 'tsx' | 'import', file: string): Record<string, unknown> =>
    JSON.parse(execFileSync(process.execPath, [join(dir, 'probe.mjs'), how, join(dir, file)], { cwd: dir, encoding: 'utf8', timeout: 30_000 }).trim().split('\n').pop()!) as Record<string, unknown>;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ea-config-compile-'));
    writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'));
    await build({ entryPoints: [join(REPO_ROOT, 'src/config/compile-module.ts')], outfile: join(dir, 'compile-module.mjs'), bundle: true, platform: 'node', format: 'esm', packages: 'external', logLevel: 'silent' });
    writeFileSync(join(dir, 'probe.mjs'), PROBE);
    writeFileSync(join(dir, 'shared.mjs'), SHARED);
    mkdirSync(join(dir, 'mappers'));
    writeFileSync(join(dir, 'mappers', 'mapper.ts'), MAPPER);
    writeFileSync(join(dir, 'mappers', 'data.txt'), 'next to the mapper\n');
    writeFileSync(join(dir, 'app.config.ts'), CONFIG);
    writeFileSync(join(dir, 'settings.json'), '{ "region": "eu-west" }\n');
    const plain = 'export default { seen: {}, token: null, z: null };\n';
    writeFileSync(join(dir, 'plain.config.mjs'), plain);
    writeFileSync(join(dir, 'plain.config.ts'), `const seen: Record<string, never> = {};\n${plain.replace('seen: {}', 'seen')}`);
    writeFileSync(join(dir, 'legacy.config.cts'), "const { z } = require('zod');\nmodule.exports = { seen: { objectType: typeof z.object }, token: null, z };\n");
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('adds no thread to the process (a loader would leave its module-hooks thread)', () => {
    const plain = probe('import', 'plain.config.mjs');
    const compiled = probe('compile', 'plain.config.ts');
    const throughTsx = probe('tsx', 'plain.config.ts');
    expect(compiled.threads).toBe(plain.threads);
    // The measurement sees a hooks thread when there is one.
    expect(throughTsx.threads).toBeGreaterThan(plain.threads as number);
  });

  it('each file sees its own import.meta; JavaScript and packages are the process\'s own instances; JSON imports as TypeScript writes it', () => {
    const seen = probe('compile', 'app.config.ts');
    const mapper = join(dir, 'mappers', 'mapper.ts');
    expect(seen).toMatchObject({
      url: pathToFileURL(mapper).href,
      filename: mapper,
      dirname: join(dir, 'mappers'),
      data: 'next to the mapper',
      configUrl: pathToFileURL(join(dir, 'app.config.ts')).href,
      mapperShares: true,
      sameShared: true,
      sameZod: true,
      sharedLoads: 1,
      region: 'eu-west',
    });
  });

  it('a CommonJS module (.cts) can require a package, and gets what require() gives in the process', () => {
    // zod is a dual package: require() loads its CommonJS build, import its ES module one (as in Node).
    expect(probe('compile', 'legacy.config.cts')).toMatchObject({ objectType: 'function', sameRequiredZod: true, sameZod: false });
  });

  it('an import that does not resolve is reported with the file and line that asks for it', async () => {
    const file = join(dir, 'missing.config.ts');
    writeFileSync(file, ['// a config', "import { mappers } from './mappers/none.ts';", 'export default { mappers };'].join('\n'));
    const error = (await loadConfig(file).catch((e: unknown) => e)) as ConfigLoadError;
    expect(error).toBeInstanceOf(ConfigLoadError);
    expect(error.file).toBe(file);
    expect(error.line).toBe(2);
    expect(error.message).toContain('./mappers/none.ts');
  });
});

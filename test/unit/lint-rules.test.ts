// The house rules hold the line (eslint.config.js): in src/, no function over 200 lines counting
// the functions nested in it, no file over 500 lines, no import circle — type-only imports
// included. Each rule is shown to fail on a file that breaks it and to pass at its limit; that
// `npm run lint` passes on the project itself is CI's own step.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'ea-lint-'));
mkdirSync(path.join(dir, 'src'), { recursive: true });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A function of `lines` lines in all (its own braces included), half of them in a nested function. */
function functionOf(name: string, lines: number): string {
  const body = lines - 6; // the header, `function inner() {`, two returns, two closing braces
  const outer = Math.ceil(body / 2);
  const inner = body - outer;
  const statements = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `  const _${prefix}${i} = ${i};`).join('\n');
  return `export function ${name}(): number {\n${statements(outer, 'a')}\n  function inner(): number {\n${statements(inner, 'b')}\n    return 0;\n  }\n  return inner();\n}\n`;
}

async function lint(files: Record<string, string>): Promise<{ file: string; rule: string | null; message: string }[]> {
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, 'src', name), text);
  const eslint = new ESLint({ cwd: dir, overrideConfigFile: path.join(root, 'eslint.config.js') });
  const results = await eslint.lintFiles(Object.keys(files).map((f) => path.join(dir, 'src', f)));
  return results.flatMap((r) => r.messages.map((m) => ({ file: path.basename(r.filePath), rule: m.ruleId, message: m.message })));
}

describe('the house rules (eslint.config.js)', () => {
  it('a function over 200 lines counting its nested functions fails; one of 200 passes', async () => {
    const problems = await lint({ 'long.ts': functionOf('tooLong', 205), 'limit.ts': functionOf('atLimit', 200) });
    expect(problems.filter((p) => p.rule === 'max-lines-per-function').map((p) => p.file)).toEqual(['long.ts']);
    expect(problems.find((p) => p.file === 'long.ts')!.message).toMatch(/too many lines \(20\d\)\. Maximum allowed is 200/);
  });

  it('blank lines and comments do not count towards a function', async () => {
    const padded = functionOf('padded', 190).replace(/\n {2}const _a0 = 0;/, `\n${'\n  // a comment\n'.repeat(30)}  const _a0 = 0;`);
    expect(await lint({ 'padded.ts': padded })).toEqual([]);
  });

  it('a file over 500 lines fails (every line counts); one of 500 passes', async () => {
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `export const c${i} = ${i};`).join('\n') + '\n';
    const problems = await lint({ 'big.ts': lines(501), 'full.ts': lines(500) });
    expect(problems.map((p) => [p.file, p.rule])).toEqual([['big.ts', 'max-lines']]);
  });

  it('an import circle fails on every file in it, also through type-only imports; a chain passes', async () => {
    const problems = await lint({
      'a.ts': "import type { B } from './b.js';\nexport interface A { b?: B }\n",
      'b.ts': "import { c } from './c.js';\nexport interface B { c: typeof c }\n",
      'c.ts': "import type { A } from './a.js';\nexport const c: A | null = null;\n",
      'd.ts': "import { c } from './c.js';\nexport const d = c;\n",
    });
    const cycles = problems.filter((p) => p.rule === 'house/no-import-cycle');
    expect(cycles.map((p) => p.file).sort()).toEqual(['a.ts', 'b.ts', 'c.ts']);
    expect(cycles.find((p) => p.file === 'a.ts')!.message).toMatch(/src\/a\.ts → src\/b\.ts → src\/c\.ts → src\/a\.ts/);
  });

  it('an index.ts that declares what its own implementation imports back is a circle', async () => {
    const problems = await lint({
      'index.ts': "export { make } from './make.js';\nexport interface Made { n: number }\n",
      'make.ts': "import type { Made } from './index.js';\nexport const make = (): Made => ({ n: 1 });\n",
    });
    expect(problems.filter((p) => p.rule === 'house/no-import-cycle').map((p) => p.file).sort()).toEqual(['index.ts', 'make.ts']);
  });
});

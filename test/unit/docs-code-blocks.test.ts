// The guides' TypeScript code blocks cannot rot: each is type-checked with the project's compiler
// options and then run (a block's assertions fail the test). Imports of `event-assembler` and
// `event-assembler/testing` resolve to this checkout's sources, as they would to the package.
//
// Markers (the fence's info string):
//   ```ts             type-checked and run — the default; every block should be one of these.
//   ```ts check-only  type-checked, not run: for the few blocks that need servers to run (a
//                     configuration whose connections must be reachable, an assembler that runs
//                     until stopped). GitHub highlights it as `ts` all the same. Keep them rare:
//                     the test below counts them, so adding one is a visible decision.
// Any other language (```text, ```bash, ```json, ```sql) is left alone.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The guides whose code blocks are checked. */
const GUIDES = ['README.md', 'docs/bulk-transactions.md', 'docs/mappers.md', 'docs/contracts.md', 'docs/running.md', 'docs/consumers.md', 'docs/operations.md', 'docs/reconcile.md'];
/** The info string of a block that is type-checked but not run. */
const CHECK_ONLY = 'ts check-only';
/** How many check-only blocks the guides hold; raise it only for a block that cannot run here. */
const CHECK_ONLY_BLOCKS = 2;
const out = path.join(root, '.tmp', `doc-blocks-${process.pid}`);

interface Block {
  readonly guide: string;
  readonly line: number;
  readonly code: string;
  readonly run: boolean;
}

function blocksOf(guide: string): Block[] {
  const lines = readFileSync(path.join(root, guide), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = lines[i]!.trim();
    if (!fence.startsWith('```')) continue;
    const info = fence.slice(3).trim().replace(/\s+/g, ' ');
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end]!.trim() !== '```') end++;
    if (info === 'ts' || info === CHECK_ONLY) blocks.push({ guide, line: start + 1, code: lines.slice(start, end).join('\n'), run: info === 'ts' });
    else if (/^(ts|typescript)\b/.test(info)) throw new Error(`${guide}:${i + 1}: unknown TypeScript block marker "${info}" (use \`\`\`ts or \`\`\`${CHECK_ONLY})`);
    i = end;
  }
  return blocks;
}

/** The block as a module of this checkout: package imports pointed at the sources. */
function moduleSource(block: Block): string {
  const src = (file: string) => path.relative(out, path.join(root, file)).split(path.sep).join('/');
  const code = block.code
    .replaceAll("from 'event-assembler/testing'", `from '${src('src/testing/index.js')}'`)
    .replaceAll("from 'event-assembler'", `from '${src('src/index.js')}'`);
  // Every block is a module of its own (a block without imports would otherwise share one scope).
  return /^\s*(import|export)\s/m.test(code) ? code : `${code}\nexport {};\n`;
}

function fileOf(block: Block, i: number): string {
  return path.join(out, `${path.basename(block.guide, '.md')}-${i}-line${block.line}.ts`);
}

const blocks = GUIDES.flatMap(blocksOf);
mkdirSync(out, { recursive: true });
blocks.forEach((block, i) => writeFileSync(fileOf(block, i), moduleSource(block)));

afterAll(() => rmSync(out, { recursive: true, force: true }));

describe('the guides\' code blocks', () => {
  it('are found (every guide has at least one)', () => {
    for (const guide of GUIDES) expect(blocks.filter((b) => b.guide === guide).length, guide).toBeGreaterThan(0);
  });

  it(`are run, all but ${CHECK_ONLY_BLOCKS} marked "${CHECK_ONLY}"`, () => {
    expect(blocks.filter((b) => !b.run).map((b) => `${b.guide}:${b.line}`)).toHaveLength(CHECK_ONLY_BLOCKS);
  });

  it('type-check with the project\'s compiler options', () => {
    const config = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
    const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
    const files = blocks.map((block, i) => fileOf(block, i));
    const program = ts.createProgram(files, { ...parsed.options, noEmit: true });
    const problems = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file && files.includes(path.resolve(d.file.fileName)))
      .map((d) => {
        const block = blocks[files.indexOf(path.resolve(d.file!.fileName))]!;
        const line = d.file!.getLineAndCharacterOfPosition(d.start!).line;
        return `${block.guide}:${block.line + line}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      });
    expect(problems).toEqual([]);
  });

  const runnable = blocks.flatMap((block, i) => (block.run ? [{ name: `${block.guide}:${block.line}`, i }] : []));
  it.each(runnable)('$name runs', async ({ i }) => {
    await import(pathToFileURL(fileOf(blocks[i]!, i)).href);
  });
});

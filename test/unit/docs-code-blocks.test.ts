// The guides' TypeScript code blocks cannot rot: each is type-checked with the project's compiler
// options and then run (a block's assertions fail the test). Imports of `event-assembler` and
// `event-assembler/testing` resolve to this checkout's sources, as they would to the package.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** The guides whose code blocks are checked. */
const GUIDES = ['docs/bulk-transactions.md'];
const out = path.join(root, '.tmp', `doc-blocks-${process.pid}`);

interface Block {
  readonly guide: string;
  readonly line: number;
  readonly code: string;
}

function blocksOf(guide: string): Block[] {
  const lines = readFileSync(path.join(root, guide), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```ts') continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end]!.trim() !== '```') end++;
    blocks.push({ guide, line: start + 1, code: lines.slice(start, end).join('\n') });
    i = end;
  }
  return blocks;
}

/** The block as a module of this checkout: package imports pointed at the sources. */
function moduleSource(block: Block): string {
  const src = (file: string) => path.relative(out, path.join(root, file)).split(path.sep).join('/');
  return block.code
    .replaceAll("from 'event-assembler/testing'", `from '${src('src/testing/index.js')}'`)
    .replaceAll("from 'event-assembler'", `from '${src('src/index.js')}'`);
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

  it.each(blocks.map((block, i) => ({ name: `${block.guide}:${block.line}`, i })))('$name runs', async ({ i }) => {
    await import(pathToFileURL(fileOf(blocks[i]!, i)).href);
  });
});

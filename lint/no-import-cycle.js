// @ts-check
/**
 * An eslint rule: no import circles between the project's own modules, type-only imports and
 * re-exports included. (eslint-plugin-import's `no-cycle` skips `import type`, but a circle of
 * types is still a circle to the reader: an `index.ts` that declares what its own implementation
 * imports back. The house rule is types in a `types.ts`, `index.ts` only re-exports.)
 *
 * The graph is built from every relative specifier of every file reached, with TypeScript's own
 * pre-processor (imports, `export … from`, `import()`), resolved NodeNext-style: `./x.js` is
 * `./x.ts`, a directory is its `index.ts`. A file in a circle gets one report, at the import that
 * starts the shortest circle through it, naming every file on the way.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';

/** @type {Map<string, { mtimeMs: number; deps: { target: string; specifier: string }[] }>} */
const cache = new Map();

/** @param {string} from @param {string} specifier @returns {string | null} */
function resolveSpecifier(from, specifier) {
  if (!specifier.startsWith('.')) return null;
  const base = resolve(dirname(from), specifier);
  const candidates = [base.replace(/\.js$/, '.ts'), `${base}.ts`, resolve(base, 'index.ts'), base];
  for (const candidate of candidates) {
    if (candidate.endsWith('.ts') && existsSync(candidate) && statSync(candidate).isFile()) return candidate;
  }
  return null;
}

/** @param {string} file @param {string} [text] */
function dependencies(file, text) {
  const mtimeMs = statSync(file).mtimeMs;
  const cached = cache.get(file);
  if (text === undefined && cached && cached.mtimeMs === mtimeMs) return cached.deps;
  const source = text ?? readFileSync(file, 'utf8');
  const info = ts.preProcessFile(source, true, true);
  const deps = [];
  for (const { fileName } of info.importedFiles) {
    const target = resolveSpecifier(file, fileName);
    if (target !== null && target !== file) deps.push({ target, specifier: fileName });
  }
  if (text === undefined) cache.set(file, { mtimeMs, deps });
  return deps;
}

/**
 * The shortest circle from `start` back to itself (breadth first), as the list of files after
 * `start`, or null.
 * @param {string} start @param {{ target: string; specifier: string }[]} first
 */
function shortestCircle(start, first) {
  /** @type {Map<string, string | null>} */
  const parent = new Map();
  /** @type {string[]} */
  const queue = [];
  for (const { target } of first) {
    if (target === start) return [start];
    if (!parent.has(target)) {
      parent.set(target, null);
      queue.push(target);
    }
  }
  for (let i = 0; i < queue.length; i++) {
    const file = /** @type {string} */ (queue[i]);
    for (const { target } of dependencies(file)) {
      if (target === start) {
        const path = [start];
        for (let at = /** @type {string | null} */ (file); at !== null; at = parent.get(at) ?? null) path.unshift(at);
        return path;
      }
      if (!parent.has(target)) {
        parent.set(target, file);
        queue.push(target);
      }
    }
  }
  return null;
}

/** @type {import('eslint').Rule.RuleModule} */
export const noImportCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'no import circles between project modules, type-only imports included' },
    schema: [],
    messages: { cycle: 'import circle: {{path}} (move the shared types to a types.ts; an index.ts only re-exports)' },
  },
  create(context) {
    const file = context.filename;
    return {
      Program(node) {
        const first = dependencies(file, context.sourceCode.text);
        const circle = shortestCircle(file, first);
        if (circle === null) return;
        const next = circle[0] === file ? file : circle[0];
        const firstHop = first.find((d) => d.target === next);
        const root = context.cwd;
        const path = [file, ...circle].map((f) => relative(root, f)).join(' → ');
        const declaration = node.body.find(
          (s) => (s.type === 'ImportDeclaration' || s.type === 'ExportNamedDeclaration' || s.type === 'ExportAllDeclaration') && s.source?.value === firstHop?.specifier,
        );
        context.report({ node: declaration ?? node, messageId: 'cycle', data: { path } });
      },
    };
  },
};

export default { rules: { 'no-import-cycle': noImportCycle } };

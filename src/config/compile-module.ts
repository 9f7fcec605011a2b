/**
 * Imports a TypeScript module on the main thread, with no module-hooks thread: esbuild compiles
 * the module and every TypeScript file it imports (by path, or through a package: a workspace
 * package's sources) and every JSON file they import into one ES module, which is imported from a
 * temporary file. JavaScript stays an import of the file Node would load for it (so it cannot
 * import TypeScript in turn): the module shares the process's instance of `event-assembler`, `pg`
 * and the rest, and a `.js` file sees itself as it is.
 *
 * Why not a loader: on Node 20, module hooks (tsx's `tsImport` among them) run in a thread of
 * their own that lives as long as the process; with its heap it kept 39–46 MiB for nothing
 * after the configuration had loaded (bench/results/2026-12-06-config-language.md).
 *
 * What a file sees as `import.meta.url` / `.filename` / `.dirname` is its own location, not the
 * temporary file's; stack traces point at the original lines (inline source map).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Loader, Plugin } from 'esbuild';

const LOADERS: Readonly<Record<string, Loader>> = { '.ts': 'ts', '.mts': 'ts', '.cts': 'ts', '.tsx': 'tsx' };
const TYPESCRIPT = /\.[cm]?tsx?$/;
const META = { url: '__eaImportMetaUrl', filename: '__eaImportMetaFilename', dirname: '__eaImportMetaDirname' } as const;
/** Lets a `require()` in a compiled CommonJS file load a package (esbuild's ES module output has none). */
const BANNER = "import { createRequire as __eaCreateRequire } from 'node:module'; const require = __eaCreateRequire(import.meta.url);";
const RESOLVING = Symbol('event-assembler: resolving a package');

let building = 0;

/** Compiles `path` (absolute) and its own files into one module and imports it. Errors are esbuild's or the module's own. */
export async function importCompiledModule(path: string): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'event-assembler-module-'));
  try {
    const outfile = join(dir, `${basename(path, extname(path))}.mjs`);
    writeFileSync(outfile, await compile(path, outfile));
    return (await import(pathToFileURL(outfile).href)) as Record<string, unknown>;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function compile(path: string, outfile: string): Promise<string> {
  const esbuild = await import('esbuild');
  building++;
  try {
    const result = await esbuild.build({
      entryPoints: [path],
      outfile,
      bundle: true,
      write: false,
      platform: 'node',
      format: 'esm',
      target: `node${process.versions.node}`,
      sourcemap: 'inline',
      logLevel: 'silent',
      absWorkingDir: process.cwd(),
      // Resolve packages as Node does: no "module" condition, no "module" main field.
      conditions: ['node'],
      mainFields: ['main'],
      banner: { js: BANNER },
      define: { 'import.meta.url': META.url, 'import.meta.filename': META.filename, 'import.meta.dirname': META.dirname },
      plugins: [typeScriptOnly()],
    });
    return result.outputFiles[0]!.text;
  } finally {
    // esbuild's service is a child process (in a container it counts against the memory limit):
    // stopped once no compile here needs it. A program embedding this library that runs esbuild
    // builds of its own at that very moment would see them cut short: load configurations first.
    if (--building === 0) await esbuild.stop();
  }
}

function typeScriptOnly(): Plugin {
  return {
    name: 'event-assembler-typescript-only',
    setup(build) {
      build.onResolve({ filter: /.*/ }, async (args) => {
        if (args.pluginData === RESOLVING || args.kind === 'entry-point') return undefined;
        if (args.path.startsWith('node:') || builtinModules.includes(args.path)) return { path: args.path, external: true };
        const specifier = args.path.startsWith('file:') ? fileURLToPath(args.path) : args.path;
        const found = await build.resolve(specifier, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: RESOLVING });
        if (found.errors.length > 0) return { errors: found.errors };
        // JSON too: TypeScript imports it without `with { type: 'json' }`, which Node requires.
        if (TYPESCRIPT.test(found.path) || found.path.endsWith('.json')) return { path: found.path };
        // JavaScript is imported as it is, from where it is: the compiled module may live anywhere.
        return { path: args.kind.startsWith('require-') ? found.path : pathToFileURL(found.path).href, external: true };
      });
      build.onLoad({ filter: TYPESCRIPT }, (args) => {
        const contents = readFileSync(args.path, 'utf8');
        const loader = LOADERS[extname(args.path)];
        return { contents: contents.includes('import.meta') ? withOwnLocation(contents, args.path) : contents, loader };
      });
    },
  };
}

/** Declares the file's own `import.meta` values at the start of its first line (lines keep their numbers). */
function withOwnLocation(contents: string, path: string): string {
  const prelude = `const ${META.url} = ${JSON.stringify(pathToFileURL(path).href)}, ${META.filename} = ${JSON.stringify(path)}, ${META.dirname} = ${JSON.stringify(dirname(path))};`;
  if (!contents.startsWith('#!')) return prelude + contents;
  const end = contents.indexOf('\n');
  return end < 0 ? contents : `${contents.slice(0, end + 1)}${prelude}${contents.slice(end + 1)}`;
}

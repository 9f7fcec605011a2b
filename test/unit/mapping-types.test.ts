import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Compiles `test/types/fixtures/wrong-mapper.ts` with the project's compiler options and
 * asserts that it FAILS. The fixture starts with `// @ts-nocheck` so the project-wide
 * `tsc -p tsconfig.json` stays green; this test removes that line in memory.
 */
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const fixture = path.join(root, 'test/types/fixtures/wrong-mapper.ts');

function diagnosticsOf(file: string): { line: number; code: number; message: string }[] {
  const config = ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, root);
  const options = { ...parsed.options, noEmit: true };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, languageVersion, ...rest) => {
    if (path.resolve(fileName) !== file) return getSourceFile(fileName, languageVersion, ...rest);
    const text = ts.sys.readFile(fileName)!.replace(/^\/\/ @ts-nocheck.*$/m, '');
    return ts.createSourceFile(fileName, text, languageVersion);
  };
  const program = ts.createProgram([file], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file && path.resolve(d.file.fileName) === file)
    .map((d) => ({
      line: d.file!.getLineAndCharacterOfPosition(d.start!).line + 1,
      code: d.code,
      message: ts.flattenDiagnosticMessageText(d.messageText, '\n'),
    }));
}

describe('typed mappers', () => {
  it('a mapper emitting InvoiceIssued v2 with v1-shaped data does not compile', () => {
    const diagnostics = diagnosticsOf(fixture);
    expect(diagnostics).toHaveLength(1);
    const [d] = diagnostics;
    expect(d!.code).toBe(2322);
    expect(d!.message).toContain("MappedEvent<\"InvoiceIssued\", 2");
    expect(d!.message).toContain("Types of property 'total' are incompatible");
    expect(d!.message).toMatch(/Type 'string' is not assignable to type '(InvoiceIssuedV2Money|\{ amount: string; currency: string; \})'/);
  });
});

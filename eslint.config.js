// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import house from './lint/no-import-cycle.js';

export default tseslint.config(
  { ignores: ['dist/**', '.test-cli-*/**', '.tmp/**', 'node_modules/**', 'coverage/**', 'bench/results/**', '**/*.generated.ts', 'test/types/fixtures/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2023, sourceType: 'module', globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', URL: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-require-imports': 'off',
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  // The house rules for the library and CLI (README, "Architecture"): small functions, small files,
  // no import circles. A function's size counts the functions nested in it, so a closure cannot
  // hide a module inside itself; type-only imports count too (lint/no-import-cycle.js), so a circle
  // through types (an index.ts declaring what its own implementation imports back) is caught.
  {
    files: ['src/**/*.ts'],
    plugins: { house },
    rules: {
      'max-lines-per-function': ['error', { max: 200, skipBlankLines: true, skipComments: true, IIFEs: true }],
      'max-lines': ['error', { max: 500, skipBlankLines: false, skipComments: false }],
      'house/no-import-cycle': 'error',
    },
  },
);

import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'out/**', 'node_modules/**', '.vscode-test/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always'],
      'no-console': 'off',
    },
  },
  {
    // The pure core runs in plain mocha and under any transport: no editor, no HTTP framework.
    files: ['src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            {
              name: 'vscode',
              message: 'src/core/ does not import vscode: put the VS Code side in src/notebooks, src/kernels or src/access.',
            },
            { name: 'express', message: 'src/core/ does not import express: HTTP belongs in src/server.' },
          ],
          patterns: [{ group: ['express/*', '**/server/*', '**/mcp/*'], message: 'src/core/ imports no transport.' }],
        },
      ],
    },
  },
);

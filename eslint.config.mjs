import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** src/core's rooms, lowest first: each may import the top files and the rooms before it. */
const CORE_ROOMS = [
  ['text', []],
  ['flow', []],
  ['model', ['flow', 'text']],
  ['outputs', ['flow', 'text', 'model']],
  ['agents', ['flow', 'text', 'model', 'outputs']],
  ['cells', ['flow', 'text', 'model', 'outputs', 'agents']],
  ['runs', ['flow', 'text', 'model', 'outputs', 'agents', 'cells']],
];

const NO_EDITOR_OR_HTTP = {
  paths: [
    {
      name: 'vscode',
      message: 'src/core/ does not import vscode: put the VS Code side in src/notebooks, src/kernels or src/access.',
    },
    { name: 'express', message: 'src/core/ does not import express: HTTP belongs in src/server.' },
  ],
  patterns: [{ group: ['express/*', '**/server/*', '**/mcp/*'], message: 'src/core/ imports no transport.' }],
};

function coreLayers() {
  const rule = (patterns) => ({
    'no-restricted-imports': ['error', { ...NO_EDITOR_OR_HTTP, patterns: [...NO_EDITOR_OR_HTTP.patterns, ...patterns] }],
  });
  const names = CORE_ROOMS.map(([room]) => room);
  return [
    // services.ts bundles the rooms' services for the transports, so it alone may import every room.
    { files: ['src/core/**/*.ts'], rules: rule([]) },
    {
      files: ['src/core/*.ts'],
      ignores: ['src/core/services.ts'],
      rules: rule([{ group: ['./*/*'], message: 'The top files of src/core/ import no room: they are what every room shares.' }]),
    },
    ...CORE_ROOMS.map(([room, below]) => ({
      files: [`src/core/${room}/**/*.ts`],
      rules: rule(
        names
          .filter((other) => other !== room && !below.includes(other))
          .map((other) => ({
            group: [`../${other}/*`],
            message: `src/core/${room}/ may import ${below.length ? `src/core/{${below.join(',')}}/ and ` : ''}the top files of src/core/, not src/core/${other}/ (see src/core/${room}/README.md).`,
          })),
      ),
    })),
  ];
}

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
  // The pure core runs in plain mocha and under any transport: no editor, no HTTP framework.
  // Its rooms are layered: a room imports the top files (src/core/*.ts) and the rooms below it,
  // never one above (each room's README.md says what it owns).
  ...coreLayers(),
);

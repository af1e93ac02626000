import { strict as assert } from 'node:assert';
import { ESLint } from 'eslint';

/** The lint rules that keep src/core/ free of the editor and of HTTP, and its rooms layered, tried on code that breaks them. */
describe('layering lint rule', () => {
  const eslint = new ESLint();
  const problems = async (code: string, filePath: string) =>
    (await eslint.lintText(code, { filePath }))[0]!.messages.filter((m) => m.ruleId === 'no-restricted-imports');

  for (const code of [
    "import * as vscode from 'vscode';\nexport const v = vscode;\n",
    "import type { Uri } from 'vscode';\nexport type U = Uri;\n",
    "import express from 'express';\nexport const e = express;\n",
    "import { routes } from '../server/routes';\nexport const r = routes;\n",
  ])
    it(`refuses in src/core/: ${code.split('\n')[0]}`, async () => {
      assert.equal((await problems(code, 'src/core/probe.ts')).length, 1);
    });

  for (const [file, code] of [
    ['src/core/model/probe.ts', "import { routes } from '../cells/notebookCells';\nexport const r = routes;\n"],
    ['src/core/outputs/probe.ts', "import type { Gate } from '../agents/accessPolicy';\nexport type G = Gate;\n"],
    ['src/core/cells/probe.ts', "import { runs } from '../runs/agentRuns';\nexport const r = runs;\n"],
    ['src/core/text/probe.ts', "import type { Q } from '../flow/keyedQueue';\nexport type R = Q;\n"],
    ['src/core/probe.ts', "import type { C } from './cells/batch';\nexport type D = C;\n"],
  ])
    it(`refuses a room importing one above it: ${file} ← ${code.split("'")[1]}`, async () => {
      const found = await problems(code, file);
      assert.equal(found.length, 1);
      assert.match(found[0]!.message, /src\/core\//);
    });

  for (const [file, code] of [
    [
      'src/core/runs/probe.ts',
      "import { x } from '../cells/batch';\nimport { y } from '../model/kernelPort';\nexport const z = [x, y];\n",
    ],
    [
      'src/core/cells/probe.ts',
      "import { x } from '../agents/clients';\nimport { y } from '../bridgeError';\nexport const z = [x, y];\n",
    ],
    ['src/core/services.ts', "import type { X } from './runs/variables';\nexport type Y = X;\n"],
  ])
    it(`allows a room importing the rooms below it and the top files: ${file}`, async () => {
      assert.deepEqual(await problems(code, file), []);
    });

  it('allows the same imports outside src/core/', async () => {
    assert.deepEqual(
      await problems("import * as vscode from 'vscode';\nexport const v = vscode;\n", 'src/notebooks/probe.ts'),
      [],
    );
  });
});

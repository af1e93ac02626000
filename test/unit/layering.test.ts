import { strict as assert } from 'node:assert';
import { ESLint } from 'eslint';

/** The lint rule that keeps src/core/ free of the editor and of HTTP, tried on code that breaks it. */
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

  it('allows the same imports outside src/core/', async () => {
    assert.deepEqual(
      await problems("import * as vscode from 'vscode';\nexport const v = vscode;\n", 'src/notebooks/probe.ts'),
      [],
    );
  });
});

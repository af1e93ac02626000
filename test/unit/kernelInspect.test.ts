import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { inspectProgram, parseInspectOutput, type VariableDetail, type VariableSummary } from '../../src/core/variables';
import { KernelProcess } from '../../src/kernels/builtin/kernelProcess';
import { collectRun, IPYTHON_PYTHON, SCRIPT } from './support/kernelRuns';

const INSPECT_PY = path.resolve(__dirname, '../../src/kernels/builtin/kernel_inspect.py');

/** The builtin kernel (IPython path) answering inspect requests over its protocol, with a real Python. */
describe('kernel inspect (variables beside the runs)', function () {
  this.timeout(30_000);
  let kernel: KernelProcess;

  beforeEach(async () => {
    kernel = new KernelProcess({ python: IPYTHON_PYTHON, script: SCRIPT, env: process.env });
    await kernel.start();
  });
  afterEach(() => kernel.dispose());

  const variables = async () => ((await kernel.inspect({ kind: 'variables' })) as { variables: VariableSummary[] }).variables;

  it('lists variables with type, shape or length, size and repr, without touching the execution count', async () => {
    const first = await collectRun(
      kernel,
      'import pandas as pd\nx = 41\nitems = [1, 2, 3]\ndf = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})',
    );
    assert.equal(first.success, true, first.stderr);
    const listed = await variables();
    const byName = new Map(listed.map((v) => [v.name, v]));
    assert.deepEqual([...byName.keys()], ['df', 'items', 'x'], 'modules and IPython names are not variables');
    assert.equal(byName.get('x')!.repr, '41');
    assert.equal(byName.get('items')!.length, 3);
    assert.deepEqual(byName.get('df')!.shape, [2, 2]);
    assert.ok((byName.get('df')!.size ?? 0) > 0);
    const detail = ((await kernel.inspect({ kind: 'variable', name: 'df' })) as { variable: VariableDetail }).variable;
    assert.deepEqual(
      detail.columns?.map((c) => c.name),
      ['a', 'b'],
    );
    assert.equal(detail.columns?.[0]?.dtype, 'int64');
    const next = await collectRun(kernel, 'x');
    assert.equal(next.executionCount, (first.executionCount ?? 0) + 1, 'inspecting ran no cell');
    assert.deepEqual(await kernel.inspect({ kind: 'variable', name: 'nope' }), { missing: 'nope' });
  });

  it('gives a bounded answer for hostile reprs and lengths, even while a cell runs', async () => {
    await collectRun(
      kernel,
      [
        'class Loops:',
        '    def __repr__(self):',
        '        while True: pass',
        'class Raises:',
        '    def __repr__(self): raise RuntimeError("no repr")',
        '    def __len__(self): raise ValueError("no len")',
        'class Huge:',
        '    def __repr__(self): return "x" * 50_000_000',
        'loops, raises, huge = Loops(), Raises(), Huge()',
      ].join('\n'),
    );
    const busy = collectRun(kernel, 'import time\ntime.sleep(3)');
    const started = Date.now();
    const listed = new Map((await variables()).map((v) => [v.name, v]));
    assert.ok(Date.now() - started < 2500, 'answered while the cell still runs');
    assert.equal(listed.get('loops')!.reprError, true);
    assert.match(listed.get('loops')!.repr!, /took longer/);
    assert.match(listed.get('raises')!.repr!, /RuntimeError: no repr/);
    assert.match(listed.get('raises')!.lengthError!, /ValueError: no len/);
    assert.equal(listed.get('huge')!.reprTruncated, true);
    assert.ok(listed.get('huge')!.repr!.length <= 200);
    assert.equal((await busy).success, true);
  });

  it('the scratchpad program prints one marked answer that binds nothing', async () => {
    await collectRun(kernel, 'x = 5');
    const program = inspectProgram(readFileSync(INSPECT_PY, 'utf8'), { kind: 'variables' });
    const run = await collectRun(kernel, program, { mode: 'cell' });
    const answer = parseInspectOutput(run.stdout) as { variables: VariableSummary[] };
    assert.deepEqual(
      answer.variables.map((v) => v.name),
      ['x'],
    );
    const after = (await variables()).map((v) => v.name);
    assert.deepEqual(after, ['x'], 'the program left no name behind');
    // marimo's extension hands the scratchpad's stdout over without the marker's control character.
    const stripped = parseInspectOutput(run.stdout.replaceAll('\x1e', '')) as { variables: VariableSummary[] };
    assert.deepEqual(stripped, answer);
  });
});

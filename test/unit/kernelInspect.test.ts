import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { sleep } from '../../src/core/sleep';
import { SPIN_REPR } from '../../sandbox-test/hostileCode';
import {
  inspectProgram,
  parseInspectOutput,
  type VariableDetail,
  type VariableList,
  type VariableSummary,
} from '../../src/core/runs/variables';
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
        '    def __repr__(self): return "x" * 1_000_000',
        'loops, raises, huge = Loops(), Raises(), Huge()',
      ].join('\n'),
    );
    let ended = false;
    const busy = collectRun(kernel, 'import time\ntime.sleep(60)').finally(() => (ended = true));
    const listed = new Map((await variables()).map((v) => [v.name, v]));
    assert.equal(ended, false, 'answered while the cell still runs');
    assert.deepEqual([listed.get('loops')!.repr, listed.get('loops')!.reprError], [null, 'took longer than 0.5 s']);
    assert.deepEqual([listed.get('raises')!.repr, listed.get('raises')!.reprError], [null, 'RuntimeError: no repr']);
    assert.match(listed.get('raises')!.lengthError!, /ValueError: no len/);
    assert.equal(listed.get('huge')!.reprTruncated, true);
    assert.ok(listed.get('huge')!.repr!.length <= 200);
    await kernel.interrupt();
    await busy;
  });

  it('a repr that switches tracing off and spins costs its own item: three reads list every other variable, and the kernel idles after', async () => {
    const setup = await collectRun(
      kernel,
      `${SPIN_REPR}\nimport threading\nbefore, after = 1, [1, 2]\nthreads_before = threading.active_count()`,
    );
    assert.equal(setup.success, true, setup.stderr);
    const reads = [];
    for (let i = 0; i < 3; i++) reads.push(new Map((await variables()).map((v) => [v.name, v])));
    for (const [i, listed] of reads.entries()) {
      assert.deepEqual([...listed.keys()], ['after', 'before', 'spin', 'threads_before'], `read ${i + 1}`);
      assert.equal(listed.get('before')!.repr, '1');
      assert.equal(listed.get('after')!.repr, '[1, 2]');
      assert.equal(listed.get('spin')!.repr, null);
    }
    assert.equal(reads[0]!.get('spin')!.reprError, 'took longer than 0.5 s');
    assert.match(
      reads[2]!.get('spin')!.reprError!,
      /^skipped: reading the repr of a __main__\.SpinRepr took longer than 0\.5 s before$/,
    );
    // No thread left spinning: the kernel's CPU time stands still while it idles.
    const cpu = () => {
      const fields = readFileSync(`/proc/${kernel.info!.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks of 10 ms
    };
    const [cpu0, wall0] = [cpu(), Date.now()];
    await sleep(2000);
    const share = (cpu() - cpu0) / ((Date.now() - wall0) / 1000);
    assert.ok(share < 0.05, `the idle kernel used ${(share * 100).toFixed(0)}% of a CPU`);
    const threads = await collectRun(kernel, 'print(threading.active_count() - threads_before)');
    assert.equal(threads.stdout, '2\n', 'one inspect worker and its watchdog, however many reads');
  });

  it('caps every field: names that are not str are no variables, a shape of 2,000,000 dimensions gives 32, numbers past 2**63 are left out', async () => {
    const setup = await collectRun(
      kernel,
      [
        'globals()[1] = "x"',
        'class Wide:',
        '    shape = tuple(range(2_000_000))',
        'class Vast:',
        '    shape = (10 ** 5000,)',
        '    nbytes = 10 ** 5000',
        'wide, vast = Wide(), Vast()',
        'globals()["n" * 10_000] = 3',
      ].join('\n'),
    );
    assert.equal(setup.success, true, setup.stderr);
    const listed = await variables();
    const byName = new Map(listed.map((v) => [v.name, v]));
    assert.deepEqual(
      byName.get('wide')!.shape,
      Array.from({ length: 32 }, (_, i) => i),
    );
    assert.equal(byName.get('wide')!.shapeDims, 2_000_000);
    assert.equal(byName.get('vast')!.shape, undefined);
    assert.ok((byName.get('vast')!.size ?? 0) < 2 ** 63, 'the huge nbytes is not given');
    const long = listed.find((v) => v.name.startsWith('nnn'))!;
    assert.equal(long.name.length, 200, 'a long name is cut');
    assert.ok(JSON.stringify(listed).length < 20_000, 'the answer stays small');
  });

  it('a read stuck in code that swallows the interrupt names the variable, then every read says so; no thread is added', async () => {
    const setup = await collectRun(
      kernel,
      [
        'import time, threading',
        'class Swallows:',
        '    def __repr__(self):',
        '        while True:',
        '            try:',
        '                time.sleep(1)',
        '            except BaseException:',
        '                pass',
        'stuck, fine = Swallows(), 5',
        'threads_before = threading.active_count()',
      ].join('\n'),
    );
    assert.equal(setup.success, true, setup.stderr);
    const first = (await kernel.inspect({ kind: 'variables' })) as VariableList;
    const byName = new Map(first.variables.map((v) => [v.name, v]));
    assert.equal(byName.get('fine')!.repr, '5', 'what was read before it is answered');
    assert.match(byName.get('stuck')!.reprError!, /did not stop: the kernel's inspector is stuck reading the repr of `stuck`/);
    assert.match(first.stuck ?? '', /restart the kernel/);
    for (let i = 0; i < 3; i++) {
      const again = (await kernel.inspect({ kind: 'variables' })) as { failed?: string };
      assert.match(again.failed ?? '', /stuck reading the repr of `stuck` \(__main__\.Swallows\)/);
    }
    const threads = await collectRun(kernel, 'print(threading.active_count() - threads_before)');
    assert.equal(threads.stdout, '2\n', 'one inspect worker and its watchdog');
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

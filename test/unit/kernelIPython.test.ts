import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  KernelProcess,
  type CallHandler,
  type CellName,
  type KernelOutput,
  type KernelProcessOptions,
  type RunMode,
} from '../../src/kernels/builtin/kernelProcess';
import { collectRun, IPYTHON_PYTHON as SYSTEM_PYTHON, SCRIPT, type Collected } from './support/kernelRuns';

/** Everything each kernel printed, for `started`. */
const printed = new WeakMap<KernelProcess, string>();

function run(kernel: KernelProcess, code: string, mode: RunMode = 'cell', cell?: CellName): Promise<Collected> {
  const onOutput = (o: KernelOutput) => {
    if (o.kind === 'stream') printed.set(kernel, (printed.get(kernel) ?? '') + o.text);
  };
  return collectRun(kernel, code, { mode, ...(cell && { cell }), onOutput });
}

/** Resolves once the run in progress printed "waiting" (it then sleeps: time to interrupt it). */
function started(kernel: KernelProcess): Promise<void> {
  return new Promise((resolve) => {
    const poll = setInterval(() => {
      if (printed.get(kernel)?.includes('waiting')) {
        clearInterval(poll);
        setTimeout(resolve, 100);
      }
    }, 20);
  });
}

/** Output kinds in order, as Jupyter names them; consecutive stream chunks are one output (as in the editor). */
const kinds = (r: Collected) =>
  r.outputs
    .map((o) =>
      o.kind === 'display'
        ? o.executionCount === undefined
          ? 'display_data'
          : 'execute_result'
        : o.kind === 'error'
          ? 'error'
          : o.name,
    )
    .filter((kind, i, all) => !(i > 0 && kind === all[i - 1] && (kind === 'stdout' || kind === 'stderr')));

const ROW_OF_TEN = [
  'import pandas as pd, numpy as np',
  "df = pd.DataFrame(np.arange(70).reshape(7, 10) * 1000003, columns=['column_%d' % i for i in range(10)])",
].join('\n');

function assertWideTable(text: string | undefined, what: string): void {
  assert.ok(text, `${what}: no text`);
  const header = text.split('\n')[0] ?? '';
  assert.ok(header.includes('column_0') && header.includes('column_9'), `${what}: all ten columns on the first line:\n${text}`);
  assert.ok(header.length > 80 && header.length <= 120, `${what}: header ${header.length} chars wide`);
}

describe('builtin kernel through IPython', function () {
  this.timeout(30_000);
  let kernel: KernelProcess;

  function make(opts: Partial<KernelProcessOptions> = {}): KernelProcess {
    kernel?.dispose();
    kernel = new KernelProcess({ python: SYSTEM_PYTHON, script: SCRIPT, ...opts });
    return kernel;
  }

  before(function () {
    this.timeout(120_000); // importing all four takes half a minute on a loaded machine
    try {
      execFileSync(SYSTEM_PYTHON, ['-c', 'import IPython, pandas, numpy, matplotlib, matplotlib_inline']);
    } catch (err) {
      throw new Error(`${SYSTEM_PYTHON} lacks IPython, pandas, numpy or matplotlib: run \`npm run setup\``, { cause: err });
    }
  });
  beforeEach(() => make());
  afterEach(() => kernel.dispose());

  it('runs magics, !commands and display(), with execute_result and execution counts as Jupyter', async () => {
    await kernel.start();
    assert.match(kernel.info?.ipython ?? '', /^\d+\.\d+/, 'ready names the IPython version');
    const first = await run(kernel, 'x = 40\nx + 2');
    assert.deepEqual(kinds(first), ['execute_result']);
    assert.deepEqual(first.displays[0], { kind: 'display', data: { 'text/plain': '42' }, executionCount: 1 });
    assert.equal(first.executionCount, 1);
    assert.equal(first.value, null, 'a cell value is an output, not done.value');

    const second = await run(
      kernel,
      [
        '%time y = 3',
        '!echo shell says $x',
        'from IPython.display import HTML',
        "display(HTML('<b>bold</b>'))",
        'print("printed")',
        'y',
      ].join('\n'),
    );
    assert.equal(second.success, true, second.stderr);
    assert.match(second.stdout, /Wall time/);
    assert.match(second.stdout, /shell says 40/);
    assert.deepEqual(kinds(second), ['stdout', 'display_data', 'stdout', 'execute_result']);
    assert.equal(second.displays[0]?.data['text/html'], '<b>bold</b>');
    assert.deepEqual(second.displays[1]?.data, { 'text/plain': '3' });
    assert.equal(second.displays[1]?.executionCount, 2);
    assert.equal(second.executionCount, 2);

    const quiet = await run(kernel, '%%capture captured\nprint("hidden")\ny;');
    assert.deepEqual(kinds(quiet), [], 'cell magic captured the print; `;` hides the value');
    const history = await run(kernel, '(In[1], Out[2], _, captured.stdout)');
    assert.deepEqual(history.displays[0]?.data, { 'text/plain': "('x = 40\\nx + 2', 3, 3, 'hidden\\n')" });
    assert.equal(history.executionCount, 4);
  });

  it('shows a figure after the cell value, as the inline backend does', async () => {
    const magic = await run(kernel, '%matplotlib inline');
    assert.deepEqual([magic.success, kinds(magic)], [true, []], magic.errors[0]?.traceback);
    const r = await run(kernel, 'import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])');
    assert.equal(r.success, true, r.stderr);
    assert.deepEqual(kinds(r), ['execute_result', 'display_data']);
    assert.match(r.displays[0]?.data['text/plain'] ?? '', /Line2D/);
    const png = Buffer.from(r.displays[1]?.data['image/png'] ?? '', 'base64');
    assert.equal(png.subarray(1, 4).toString(), 'PNG');
    assert.match(r.displays[1]?.data['text/plain'] ?? '', /^<Figure size/);
    assert.deepEqual(kinds(await run(kernel, '1')), ['execute_result'], 'the figure was shown once and closed');
  });

  it('names cells Cell In[n] by their execution count in tracebacks, as IPython does, and counts failed cells', async () => {
    await run(kernel, 'def f(v):\n    return 1 / v', 'cell', { id: 'c7k2' });
    const r = await run(kernel, 'f(0)', 'cell', { id: 'q1x9' });
    assert.equal(r.success, false);
    assert.equal(r.errors.length, 1);
    const err = r.errors[0]!;
    assert.equal(err.name, 'ZeroDivisionError');
    assert.equal(err.message, 'division by zero');
    assert.match(err.traceback, /Cell In ?\[2\], line 1\n----> 1 f\(0\)/);
    assert.match(err.traceback, /Cell In ?\[1\], line 2, in f\(v\)/);
    assert.doesNotMatch(
      err.traceback,
      /cell id|index|kernel(_protocol|_values)?\.py|kernel_ipython/,
      'no ids, indices or kernel frames',
    );
    assert.ok(!err.traceback.includes('\u001b['), 'no colours');
    assert.equal(r.executionCount, 2);
    const usage = await run(kernel, '%no_such_magic');
    assert.equal(usage.success, false);
    assert.match(usage.stderr, /UsageError: Line magic function `%no_such_magic` not found/);
  });

  it('interrupts without the kernel’s signal handler in the traceback', async () => {
    const running = run(kernel, 'import time\ndef wait():\n    time.sleep(10)\nprint("waiting")\nwait()', 'cell', { id: 'abc' });
    await started(kernel);
    kernel.interrupt();
    const r = await running;
    assert.equal(r.errors[0]?.name, 'KeyboardInterrupt', `no traceback; stderr ${JSON.stringify(r.stderr)}`);
    assert.match(
      r.errors[0]?.traceback ?? '',
      /Cell In ?\[\d+\], line 5\n[\s\S]*Cell In ?\[\d+\], line 3, in wait\(\)\n[\s\S]*----> 3 +time\.sleep\(10\)/,
    );
    assert.doesNotMatch(r.errors[0]?.traceback ?? '', /on_sigint|kernel(_protocol|_values)?\.py/);
  });

  it('leaves the report of an error whole when an interrupt lands while IPython writes it', async () => {
    // The error's message takes a second of CPU to make: the interrupt arrives while IPython formats it.
    const running = run(
      kernel,
      [
        'import time',
        'class Slow(Exception):',
        '    said = False',
        '    def __str__(self):',
        '        if not Slow.said:',
        '            Slow.said = True',
        '            print("waiting", flush=True)',
        '            start = time.process_time()',
        '            while time.process_time() - start < 1: pass',
        '        return "slow to say"',
        'raise Slow()',
      ].join('\n'),
    );
    await started(kernel);
    const how = kernel.interrupt();
    const r = await running;
    assert.equal(await how, 'sigint');
    assert.equal(r.errors.length, 1, `one error; stderr ${JSON.stringify(r.stderr)}`);
    assert.equal(r.errors[0]?.name, 'Slow');
    assert.match(r.errors[0]?.traceback ?? '', /-+> 11 raise Slow\(\)[\s\S]*Slow: slow to say/);
    assert.doesNotMatch(`${r.stderr}${r.errors[0]?.traceback}`, /KeyboardInterrupt/);
    assert.equal((await run(kernel, 'print("next")')).stdout, 'next\n', 'the request does not reach the next run');
  });

  it('runs scratchpads with IPython syntax in a copy of the globals, leaving counts, history and figures alone', async () => {
    await run(kernel, 'data = [1]\nname = "nb"\nimport matplotlib.pyplot as plt');
    await run(kernel, '"last value"');
    const r = await run(
      kernel,
      [
        'data.append(2)',
        'name = "changed"',
        '%time fresh = 1',
        'plt.plot([1, 2])',
        '!echo from scratchpad',
        '(name, fresh)',
      ].join('\n'),
      'scratchpad',
    );
    assert.equal(r.success, true, r.stderr);
    assert.deepEqual(r.value, { 'text/plain': "('changed', 1)" });
    assert.match(r.stdout, /Wall time[\s\S]*from scratchpad/);
    assert.equal(r.executionCount, undefined);
    const after = await run(kernel, '(data, name, "fresh" in globals(), _, len(Out), len(In))');
    assert.deepEqual(after.displays[0]?.data, { 'text/plain': "([1, 2], 'nb', False, 'last value', 1, 4)" });
    assert.equal(after.executionCount, 3, 'the scratchpad run did not advance the count');
    assert.deepEqual(kinds(after), ['execute_result'], 'no figure of the scratchpad run shows after the next cell');
    const failed = await run(kernel, 'def g():\n    raise ValueError("bad")\ng()', 'scratchpad');
    assert.equal(failed.success, false);
    assert.match(failed.errors[0]?.traceback ?? '', /File <scratchpad>:2, in g\(\)[\s\S]*ValueError: bad/);
    assert.doesNotMatch(failed.errors[0]?.traceback ?? '', /kernel(_protocol|_values)?\.py|kernel_ipython/);
  });

  it('renders wide DataFrames and arrays 120 characters wide, in cells and scratchpads', async () => {
    const cell = await run(kernel, `${ROW_OF_TEN}\ndf`);
    assert.equal(cell.success, true, cell.stderr);
    assertWideTable(cell.displays[0]?.data['text/plain'], 'cell value');
    assert.ok(cell.displays[0]?.data['text/html']?.includes('<table'), 'and the HTML table');
    assertWideTable((await run(kernel, 'df', 'scratchpad')).value?.['text/plain'], 'scratchpad value');
    assertWideTable((await run(kernel, 'print(df)')).stdout, 'print()');
    const arr = (await run(kernel, 'np.arange(40) * 1001', 'scratchpad')).value?.['text/plain'] ?? '';
    const widest = Math.max(...arr.split('\n').map((l) => l.length));
    assert.ok(widest > 80 && widest <= 120, `numpy wraps at 120, not 75:\n${arr}`);
  });

  it('runs code mode and cells nested in host calls, also when both await', async () => {
    const nested: Collected[] = [];
    const onCall: CallHandler = async (_method, params) => {
      nested.push(await run(kernel, String((params as { code: string }).code)));
      return nested[nested.length - 1]!.success;
    };
    make({ onCall });
    const r = await run(
      kernel,
      [
        'import asyncio, _agent_bridge_host as h',
        'async def f():',
        '    await asyncio.sleep(0)',
        '    return h.call("nest", {"code": "import asyncio\\nawait asyncio.sleep(0.01)\\nw = 7\\nw"})',
        'await f()',
      ].join('\n'),
    );
    assert.equal(r.success, true, r.errors[0]?.traceback);
    assert.deepEqual(r.displays[0]?.data, { 'text/plain': 'True' });
    assert.deepEqual(nested[0]?.displays[0]?.data, { 'text/plain': '7' });
    assert.deepEqual((await run(kernel, 'w', 'scratchpad')).value, { 'text/plain': '7' }, 'the nested cell bound w for good');
    const mode = await run(kernel, 'import agent_bridge\n%time ok = callable(agent_bridge.get_context)\nok', 'scratchpad');
    assert.deepEqual(mode.value, { 'text/plain': 'True' }, mode.errors[0]?.traceback);
  });
});

describe('builtin kernel without IPython', function () {
  this.timeout(30_000);
  let venv: string;
  let python: string;
  let kernel: KernelProcess;

  before(function () {
    this.timeout(60_000);
    // A Python without IPython: a venv of Debian's Python without its system packages.
    venv = fs.mkdtempSync(path.join(os.tmpdir(), 'agent-bridge-plain-'));
    execFileSync(SYSTEM_PYTHON, ['-m', 'venv', '--without-pip', venv]);
    python = path.join(venv, 'bin', 'python');
    assert.throws(() => execFileSync(python, ['-c', 'import IPython'], { stdio: 'ignore' }), 'the venv must not see IPython');
  });
  after(() => fs.rmSync(venv, { recursive: true, force: true }));
  beforeEach(() => (kernel = new KernelProcess({ python, script: SCRIPT })));
  afterEach(() => kernel.dispose());

  it('stays plain Python, and the first magic or ! line says what to install for this Python', async () => {
    await kernel.start();
    assert.equal(kernel.info?.ipython, null);
    const value = await run(kernel, 'x = 1\nx + 1', 'cell', { id: 'a1' });
    assert.deepEqual(value.value, { 'text/plain': '2' });
    assert.equal(value.executionCount, 1, 'plain Python: the host counts the cell');
    for (const [code, line] of [
      ['%matplotlib inline\nimport math', 1],
      ['x = 2\n!ls', 2],
    ] as const) {
      const r = await run(kernel, code, 'cell', { id: 'b2' });
      assert.equal(r.success, false);
      const err = r.errors[0]!;
      assert.equal(err.name, 'SyntaxError');
      assert.ok(err.message.startsWith(`line ${line}, `), err.message);
      assert.ok(err.message.includes(`${python} -m pip install ipython`), `names the command for this Python: ${err.message}`);
      assert.match(err.traceback, /File "Cell In\[\d+\]", line \d\n/);
      assert.ok(err.traceback.endsWith(`${err.message}\n`));
    }
    assert.deepEqual((await run(kernel, 'x')).value, { 'text/plain': '1' }, 'nothing of the failed cells ran');
  });

  it('names cells in tracebacks and drops the kernel’s frames from an interrupt', async () => {
    const failing = await run(kernel, 'def f():\n    return 1 / 0\nf()', 'cell', { id: 'zz9' });
    assert.match(failing.errors[0]?.traceback ?? '', /File "Cell In\[\d+\]", line 2, in f\n/);
    const running = run(kernel, 'import time\nprint("waiting")\ntime.sleep(10)', 'scratchpad');
    await started(kernel);
    kernel.interrupt();
    const r = await running;
    assert.equal(r.errors[0]?.name, 'KeyboardInterrupt');
    assert.match(r.errors[0]?.traceback ?? '', /File "<scratchpad>", line 3, in <module>\n {4}time\.sleep\(10\)\n/);
    assert.doesNotMatch(r.errors[0]?.traceback ?? '', /on_sigint|kernel(_protocol|_values)?\.py/);
  });

  it('renders wide DataFrames 120 characters wide on the plain path too', async () => {
    const plain = new KernelProcess({
      python: SYSTEM_PYTHON,
      script: SCRIPT,
      env: { ...process.env, AGENT_BRIDGE_IPYTHON: '0' },
    });
    try {
      await plain.start();
      assert.equal(plain.info?.ipython, null);
      assertWideTable((await run(plain, `${ROW_OF_TEN}\ndf`)).value?.['text/plain'], 'cell value');
      assertWideTable((await run(plain, 'df', 'scratchpad')).value?.['text/plain'], 'scratchpad value');
    } finally {
      plain.dispose();
    }
  });
});

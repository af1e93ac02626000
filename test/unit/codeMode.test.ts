import assert from 'node:assert/strict';
import type { BatchOp } from '../../src/core/model/cellService';
import { NotebookCells } from '../../src/core/cells/notebookCells';
import { planBlock, type LayoutCell } from '../../src/core/cells/blockPlan';
import { codeModeHandler } from '../../src/kernels/builtin/codeMode';
import {
  KernelProcess,
  type CallContext,
  type KernelProcessOptions,
  type RunMode,
} from '../../src/kernels/builtin/kernelProcess';
import { collectRun, plainKernel, type Collected } from './support/kernelRuns';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';
import { sleep } from '../../src/core/sleep';

/** A scratchpad run unless told otherwise; `onFirstOutput` sees each output as it arrives. */
const collect = (
  kernel: KernelProcess,
  code: string,
  mode: RunMode = 'scratchpad',
  signal?: AbortSignal,
  onFirstOutput?: () => void,
) => collectRun(kernel, code, { mode, ...(signal && { signal }), ...(onFirstOutput && { onOutput: onFirstOutput }) });

const value = (r: Collected) => r.value?.['text/plain'];
const py = (...lines: string[]) => lines.join('\n');

describe('nested runs in the builtin kernel', function () {
  this.timeout(15_000);
  let kernel: KernelProcess;
  const make = (opts: Partial<KernelProcessOptions> = {}) => {
    kernel?.dispose();
    // Plain Python: these tests read cell values as `done.value` (kernelIPython.test.ts covers IPython).
    kernel = plainKernel(opts);
    return kernel;
  };
  afterEach(() => kernel.dispose());

  /** A host whose `nest` call runs params.code as a cell, nested in the caller, and answers its
   * result; `started` resolves on the nested run's first output. */
  function nestingHost(nested: Collected[], extra?: (ctx: CallContext) => void) {
    let started!: () => void;
    const host = {
      started: new Promise<void>((r) => (started = r)),
      onCall: async (method: string, params: unknown, ctx: CallContext) => {
        if (method !== 'nest') throw new Error(`unknown ${method}`);
        extra?.(ctx);
        const r = await collect(kernel, (params as { code: string }).code, 'cell', undefined, started);
        nested.push(r);
        ctx.emit({ kind: 'stream', name: 'stdout', text: 'from host\n' });
        return r.success;
      },
    };
    return host;
  }

  it('runs a cell nested in a host call, in the real globals, with output routed per run', async () => {
    const nested: Collected[] = [];
    make({ onCall: nestingHost(nested).onCall });
    const r = await collect(
      kernel,
      py(
        'import _agent_bridge_host as h, __main__',
        'print("before")',
        'ok = h.call("nest", {"code": "print(\'inner\')\\nz = 5"})',
        'print("after", ok)',
        '__main__.z',
      ),
    );
    assert.equal(r.success, true, r.stderr);
    assert.equal(r.stdout, 'before\nfrom host\nafter True\n');
    assert.equal(value(r), '5');
    assert.equal(nested[0]?.stdout, 'inner\n');
    assert.equal(value(await collect(kernel, 'z', 'cell')), '5', 'the nested cell defined z for good');
  });

  it('runs a run queued behind the caller while the caller waits on the host (no deadlock)', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    make({
      onCall: async () => {
        await released;
        return 'answered';
      },
    });
    const caller = collect(kernel, py('import _agent_bridge_host as h', 'h.call("wait", None)'));
    await sleep(100);
    const queued = collect(kernel, 'queued_ran = True\n"queued"', 'cell');
    const q = await queued; // would hang if it waited for the caller, which waits for it
    assert.equal(value(q), "'queued'");
    release();
    assert.equal(value(await caller), "'answered'");
  });

  it('interrupts the innermost run; the caller goes on, also when interrupted twice at once', async () => {
    for (const times of [1, 2]) {
      const nested: Collected[] = [];
      const host = nestingHost(nested);
      make({ onCall: host.onCall });
      const caller = collect(
        kernel,
        py(
          'import _agent_bridge_host as h',
          'ok = h.call("nest", {"code": "print(\'go\')\\nwhile True: pass"})',
          '("survived", ok)',
        ),
      );
      await host.started;
      for (let i = 0; i < times; i++) kernel.interrupt(); // the controller's interrupt aborts the cell and interrupts
      const r = await caller;
      assert.equal(nested[0]?.errors[0]?.name, 'KeyboardInterrupt');
      assert.equal(r.success, true, `${times}: ${r.stderr}`);
      assert.equal(value(r), "('survived', False)");
    }
  });

  it('interrupts an aborted caller even while a run nests in its call', async () => {
    const nested: Collected[] = [];
    let aborted = false;
    const host = nestingHost(nested, (ctx) => ctx.signal.addEventListener('abort', () => (aborted = true)));
    make({ onCall: host.onCall });
    const controller = new AbortController();
    const caller = collect(
      kernel,
      py(
        'import _agent_bridge_host as h',
        'h.call("nest", {"code": "import time\\nprint(\'go\')\\ntime.sleep(30)"})',
        'print("not here")',
      ),
      'scratchpad',
      controller.signal,
    );
    await host.started;
    controller.abort();
    const r = await caller;
    assert.equal(r.status, 'interrupted');
    assert.equal(r.errors[0]?.name, 'KeyboardInterrupt');
    assert.equal(r.stdout.includes('not here'), false);
    assert.equal(nested[0]?.errors[0]?.name, 'KeyboardInterrupt');
    assert.equal(aborted, true, 'the handler saw ctx.signal abort');
    assert.equal(value(await collect(kernel, '"alive"', 'cell')), "'alive'");
  });

  it('runs a nested cell that awaits inside a caller that awaits', async () => {
    const nested: Collected[] = [];
    make({ onCall: nestingHost(nested).onCall });
    const r = await collect(
      kernel,
      py(
        'import asyncio, _agent_bridge_host as h',
        'async def f():',
        '    await asyncio.sleep(0)',
        '    return h.call("nest", {"code": "import asyncio\\nawait asyncio.sleep(0.01)\\nw = 7"})',
        'await f()',
      ),
    );
    assert.equal(r.success, true, r.stderr);
    assert.equal(value(r), 'True');
    assert.equal(nested[0]?.success, true, nested[0]?.stderr);
    assert.equal(value(await collect(kernel, 'import asyncio\nawait asyncio.sleep(0)\nw', 'cell')), '7');
  });

  it('fail_run() ends the run with success false, keeping its output', async () => {
    make();
    const r = await collect(kernel, py('import _agent_bridge_host as h', 'print("shown")', 'h.fail_run()', '1'));
    assert.equal(r.success, false);
    assert.equal(r.stdout, 'shown\n');
    assert.equal((await collect(kernel, '1')).success, true, 'only that run');
  });
});

describe('planBlock (code-mode block → one batch)', () => {
  const layout: LayoutCell[] = ['a', 'b', 'c', 'd'].map((id) => ({ id, kind: 'code', language: 'python' }));
  const opts = { force: false, notebook: 'nb' };

  /** Applies a batch the way the planner does (positions in the working list), for ids only. */
  function play(ids: string[], batch: readonly BatchOp[]): string[] {
    const list = [...ids];
    let n = 0;
    for (const op of batch) {
      const at = (p: { index?: number | undefined; to?: number | undefined; before?: unknown; after?: unknown }) =>
        p.before !== undefined
          ? list.indexOf(String(p.before))
          : p.after !== undefined
            ? list.indexOf(String(p.after)) + 1
            : (p.index ?? p.to ?? list.length);
      if (op.op === 'create') list.splice(at(op), 0, `+${n++}:${op.code}`);
      else if (op.op === 'delete') list.splice(list.indexOf(String(op.ref)), 1);
      else if (op.op === 'move') {
        list.splice(list.indexOf(String(op.ref)), 1);
        list.splice(at(op), 0, String(op.ref));
      }
    }
    return list.map((x) => x.replace(/^\+\d+:/, '+'));
  }

  it('places chains of new cells and moves by existing anchors only', () => {
    const plan = planBlock(
      layout,
      [
        { op: 'create', key: 'new-1', code: 'N1', after: 'a' },
        { op: 'create', key: 'new-2', code: 'N2', after: 'new-1' },
        { op: 'move', ref: 'd', after: 'new-1' },
        { op: 'create', key: 'new-3', code: 'N3', before: 0 },
        { op: 'edit', ref: 'new-2', code: 'N2b' },
        { op: 'delete', ref: 'b' },
        { op: 'edit', ref: 'c', code: 'C1' },
        { op: 'edit', ref: 'c', code: 'C2' },
      ],
      ['new-2', 'c', 'new-2'],
      opts,
    );
    assert.deepEqual(play(['a', 'b', 'c', 'd'], plan.batch), ['+N3', 'a', '+N1', 'd', '+N2b', 'c']);
    assert.deepEqual(plan.createdInOrder, ['new-3', 'new-1', 'new-2']);
    assert.deepEqual(plan.runs, ['new-2', 'c']);
    assert.deepEqual(
      plan.batch.filter((op) => op.op === 'edit'),
      [{ op: 'edit', ref: 'c', code: 'C2' }],
      'one edit per cell: the last',
    );
    assert.deepEqual(plan.targets, ['new-1', 'new-2', 'd', 'new-3', 'new-2', 'b', 'c', 'c']);
    for (const op of plan.batch)
      for (const r of ['ref', 'before', 'after'] as const)
        if (r in op) assert.ok(!String((op as Record<string, unknown>)[r]).startsWith('new-'), JSON.stringify(op));
  });

  it('resolves indices against the notebook before the block, and refuses what the block deleted', () => {
    const plan = planBlock(
      layout,
      [
        { op: 'move', ref: -1, before: 0 },
        { op: 'delete', ref: 1 },
      ],
      [],
      opts,
    );
    assert.deepEqual(play(['a', 'b', 'c', 'd'], plan.batch), ['d', 'a', 'c']);
    assert.throws(
      () =>
        planBlock(
          layout,
          [
            { op: 'delete', ref: 'b' },
            { op: 'edit', ref: 'b', code: 'x' },
          ],
          [],
          opts,
        ),
      /ctx\.edit_cell\("b"\): cell b is deleted earlier in this block/,
    );
    assert.throws(
      () => planBlock(layout, [{ op: 'edit', ref: 'new-9', code: 'x' }], [], opts),
      /no cell 'new-9'.*a block that raised created nothing/,
    );
    assert.throws(() => planBlock(layout, [], [7], opts), /ctx\.run_cell\(7\): Cell index 7 is out of range/);
  });

  it('drops cells created and deleted in the same block, and passes force to every write', () => {
    const plan = planBlock(
      layout,
      [
        { op: 'create', key: 'new-1', code: 'N1' },
        { op: 'delete', ref: 'new-1' },
        { op: 'edit', ref: 'a', code: 'A' },
      ],
      [],
      { ...opts, force: true },
    );
    assert.deepEqual(plan.batch, [{ op: 'edit', ref: 'a', code: 'A', force: true }]);
    assert.deepEqual(plan.createdInOrder, []);
  });

  it('refuses to run a markup cell', () => {
    assert.throws(() => planBlock([{ id: 'm', kind: 'markup', language: 'markdown' }], [], ['m'], opts), /only code cells run/);
  });
});

describe('agent_bridge (code mode) over a fake notebook', function () {
  this.timeout(15_000);
  const A = NOTEBOOK_A;
  let kernel: KernelProcess;
  let docs: FakeNotebooks;
  let ids: string[];
  const applies = () => docs.calls.filter((c) => c.method === 'apply').length;

  function start(env: NodeJS.ProcessEnv = {}) {
    kernel?.dispose();
    const cells = new NotebookCells(docs, { outputTextLimit: () => 1000 });
    kernel = plainKernel({
      env: { ...process.env, AGENT_BRIDGE_IPYTHON: '0', ...env }, // plain Python's traceback format
      onCall: codeModeHandler({ cells, docs }, A.sessionId),
    });
  }

  beforeEach(() => {
    docs = new FakeNotebooks({
      'y = 2': { steps: [{ stdout: 'ran y\n' }] },
      'boom()': {
        steps: [
          {
            error: {
              name: 'NameError',
              message: "name 'boom' is not defined",
              traceback: 'Traceback (most recent call last):\nNameError: boom\n',
            },
          },
        ],
      },
    });
    ids = docs.add(A, [{ code: 'x = 1' }, { kind: 'markup', code: '# Notes' }, { code: 'print(x)' }]);
    start();
  });
  afterEach(() => kernel.dispose());

  const pad = (...lines: string[]) => collect(kernel, py('import agent_bridge as cm', ...lines));

  it('is importable in scratchpad runs only, documented, and says why not in cells', async () => {
    const r = await pad(
      'import pydoc',
      'text = pydoc.render_doc(cm, renderer=pydoc.plaintext)',
      '("get_context" in text, "StaleCellError" in text, "async with" in (cm.__doc__ or ""))',
    );
    assert.equal(value(r), '(True, True, True)', r.stderr);
    const cell = await collect(kernel, 'import agent_bridge', 'cell');
    assert.equal(cell.errors[0]?.name, 'ModuleNotFoundError');
    assert.match(cell.errors[0]?.message ?? '', /scratchpad runs.*agentBridge\.codeMode\.inCells/);
    assert.equal(value(await pad('"still"')), "'still'", 'the scratchpad still can');

    start({ AGENT_BRIDGE_CODE_MODE_IN_CELLS: '1' });
    const allowed = await collect(kernel, 'import agent_bridge\nagent_bridge.get_context().__class__.__name__', 'cell');
    assert.equal(value(allowed), "'CodeModeContext'", allowed.stderr);
  });

  it('reads cells by index and id, iterates, counts; bad keys raise IndexError / KeyError', async () => {
    const r = await pad(
      'async with cm.get_context() as ctx:',
      '    last = ctx.cells[-1]',
      '    by_id = ctx.cells[last.id]',
      '    listed = [(c.index, c.kind, c.code) for c in ctx.cells]',
      '    n = len(ctx.cells)',
      'errors = []',
      'for key in (99, "nope"):',
      '    try:',
      '        ctx.cells[key]',
      '    except (IndexError, KeyError) as e:',
      '        errors.append(type(e).__name__)',
      '(last.code, by_id.index, by_id.language, by_id.status, listed, n, errors)',
    );
    assert.equal(
      value(r),
      "('print(x)', 2, 'python', 'idle', [(0, 'code', 'x = 1'), (1, 'markup', '# Notes'), (2, 'code', 'print(x)')], 3, ['IndexError', 'KeyError'])",
      r.stderr,
    );
    assert.equal(applies(), 0);
  });

  it('applies a block as one batch at its end, runs the queued cells, and prints a summary', async () => {
    const r = await pad(
      'async with cm.get_context() as ctx:',
      '    a = ctx.create_cell("y = 2", after=0)',
      '    b = ctx.create_cell("print(y)", after=a)',
      '    ctx.create_cell("## Results", kind="markdown")',
      '    ctx.run_cell(a)',
      '    print("queued", a, b, len(ctx.cells))',
      '(ctx.created[0] == ctx.ids[a], len(ctx.created))',
    );
    assert.equal(r.success, true, r.stderr);
    assert.equal(value(r), '(True, 3)');
    assert.deepEqual(docs.codes(A.uri), ['x = 1', 'y = 2', 'print(y)', '# Notes', 'print(x)', '## Results']);
    assert.equal(applies(), 1, 'one batch');
    const cells = docs.cells(A.uri);
    assert.equal(cells[5]?.kind, 'markup');
    const [y, py2, results] = [cells[1]!.id, cells[2]!.id, cells[5]!.id];
    assert.equal(
      r.stdout,
      `queued new-1 new-2 3\nran y\ncreated cell '${y}' and ran\ncreated cell '${py2}'\ncreated cell '${results}'\n`,
    );
  });

  it('lets later blocks use the ids create_cell returned', async () => {
    await pad('async with cm.get_context() as ctx:', '    k = ctx.create_cell("y = 2")');
    const r = await pad(
      'import __main__',
      'async with cm.get_context() as ctx:',
      '    cell = ctx.cells["new-1"]',
      '    ctx.edit_cell("new-1", "y = 3")',
      'cell.index',
    );
    assert.equal(value(r), '3', r.stderr);
    assert.equal(docs.codes(A.uri)[3], 'y = 3');
  });

  it('discards the queue when the block raises', async () => {
    const r = await pad(
      'async with cm.get_context() as ctx:',
      '    ctx.create_cell("z = 1")',
      '    ctx.delete_cell(0)',
      '    raise ValueError("changed my mind")',
    );
    assert.equal(r.success, false);
    assert.equal(r.errors[0]?.name, 'ValueError');
    assert.equal(applies(), 0);
    assert.deepEqual(docs.codes(A.uri), ['x = 1', '# Notes', 'print(x)']);
  });

  it('rejects the whole block on a syntax error in any new or edited Python cell', async () => {
    const r = await pad(
      'async with cm.get_context() as ctx:',
      '    ctx.cells[0]',
      '    ctx.edit_cell(0, "x = 2")',
      '    ctx.edit_cell(1, "# markdown is not compiled: def :")',
      '    ctx.create_cell("def broken(:\\n    pass")',
    );
    assert.equal(r.success, false);
    assert.equal(r.errors[0]?.name, 'SyntaxError');
    assert.match(r.errors[0]?.traceback ?? '', /File "<cell new-\d+>", line 1[\s\S]*def broken\(:[\s\S]*nothing was changed/);
    assert.doesNotMatch(r.errors[0]?.traceback ?? '', /agent_bridge\.py", line \d+, in _compile_check/);
    assert.equal(applies(), 0);
    const awaits = await pad(
      'async with cm.get_context() as ctx:',
      '    ctx.create_cell("import asyncio\\nawait asyncio.sleep(0)")',
    );
    assert.equal(awaits.success, true, `top-level await compiles: ${awaits.stderr}`);
  });

  it('refuses changes outside the block, saying how to do it', async () => {
    const r = await pad('ctx = cm.get_context()', 'ctx.create_cell("z = 1")');
    assert.equal(r.errors[0]?.name, 'RuntimeError');
    assert.match(r.errors[0]?.message ?? '', /must be called inside the block:[\s\S]*async with cm\.get_context\(\) as ctx:/);
    for (const call of ['edit_cell(0, "x")', 'delete_cell(0)', 'move_cell(0, after=2)', 'run_cell(0)']) {
      const again = await pad('ctx = cm.get_context()', `ctx.${call}`);
      assert.equal(again.errors[0]?.name, 'RuntimeError', call);
    }
    assert.equal(applies(), 0);
  });

  it('raises StaleCellError naming the cell the person edited since it was read; skip_staleness_check overwrites', async () => {
    await pad('async with cm.get_context() as ctx:', '    ctx.cells[0].code');
    docs.type(A.uri, 0, 'x = 100'); // the person types
    const r = await pad(
      'try:',
      '    async with cm.get_context() as ctx:',
      '        ctx.create_cell("z = 1")',
      '        ctx.edit_cell(0, "x = 2")',
      'except cm.StaleCellError as e:',
      '    result = (e.cells, e.current[e.cells[0]].code, "ctx.cells" in str(e), isinstance(e, cm.CodeModeError))',
      'result',
    );
    assert.equal(value(r), `(['${ids[0]}'], 'x = 100', True, True)`, r.stderr);
    assert.deepEqual(docs.codes(A.uri), ['x = 100', '# Notes', 'print(x)'], 'nothing changed, not even the create');

    const uncaught = await pad('async with cm.get_context() as ctx:', '    ctx.edit_cell(0, "x = 2")');
    assert.equal(uncaught.errors[0]?.name, 'StaleCellError');
    assert.match(
      uncaught.errors[0]?.traceback ?? '',
      /agent_bridge\.StaleCellError: ctx\.edit_cell\(0\): Cell c\w+ \(index 0\) changed since you read it/,
    );

    const forced = await pad('async with cm.get_context(skip_staleness_check=True) as ctx:', '    ctx.edit_cell(0, "x = 2")');
    assert.equal(forced.success, true, forced.stderr);
    assert.equal(forced.stdout, `edited cell '${ids[0]}'\n`);
    assert.equal(docs.codes(A.uri)[0], 'x = 2');

    const afterRead = await pad(
      'async with cm.get_context() as ctx:',
      '    ctx.cells[2]',
      '    ctx.edit_cell(2, "print(x + 1)")',
    );
    assert.equal(afterRead.success, true, 'a read through ctx.cells allows the write');
  });

  it('reports a failing cell it ran: traceback on stderr, summary, and success false', async () => {
    const r = await pad(
      'async with cm.get_context() as ctx:',
      '    c = ctx.create_cell("boom()")',
      '    ctx.run_cell(c)',
      '    ctx.run_cell(0)',
      'print("after the block")',
    );
    assert.equal(r.success, false);
    assert.deepEqual(r.errors, [], 'no exception of its own');
    assert.match(r.stderr, /NameError: boom/);
    const created = docs.cells(A.uri)[3]!.id;
    assert.equal(
      r.stdout,
      `created cell '${created}' and ran: failed with NameError: name 'boom' is not defined\nran cell '${ids[0]}'\nafter the block\n`,
    );
  });

  it('moves and deletes, naming the calls in refusals', async () => {
    await pad('async with cm.get_context() as ctx:', '    [c.code for c in ctx.cells]');
    const r = await pad('async with cm.get_context() as ctx:', '    ctx.move_cell(2, before=0)', '    ctx.delete_cell(1)');
    assert.equal(r.success, true, r.stderr);
    assert.deepEqual(docs.codes(A.uri), ['print(x)', 'x = 1']);
    assert.equal(r.stdout, `moved cell '${ids[2]}'\ndeleted cell '${ids[1]}'\n`);
    const bad = await pad(
      'try:',
      '    async with cm.get_context() as ctx:',
      '        ctx.run_cell(5)',
      'except cm.CodeModeError as e:',
      '    r = (e.status, str(e))',
      'r',
    );
    assert.match(String(value(bad)), /^\(404, 'ctx\.run_cell\(5\): Cell index 5 is out of range/);
  });
});

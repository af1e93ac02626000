import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { StreamEvent } from '../../src/core/model/kernelPort';
import { BuiltinScratchpad } from '../../src/kernels/builtin/scratchpad';
import {
  KERNEL_DIED,
  KERNEL_OUTPUT_TOO_LARGE,
  KERNEL_RESTARTED,
  KERNEL_START_FAILED,
  KernelProcess,
  type KernelExitInfo,
  type CallingRun,
  type KernelProcessOptions,
  type RunMode,
} from '../../src/kernels/builtin/kernelProcess';
import { BridgeError } from '../../src/core/bridgeError';
import { collectRun, IPYTHON_PYTHON, plainKernel, SCRIPT, type Collected } from './support/kernelRuns';
import { sleep } from '../../src/core/sleep';

/** A cell's value: `value` on the plain path, the display with an execution count on IPython's. */
function valueOf(r: Collected): Record<string, string> | null {
  const result = r.outputs.find((o) => o.kind === 'display' && o.executionCount !== undefined);
  return r.value ?? (result?.kind === 'display' ? result.data : null);
}

describe('KernelProcess (builtin Python kernel)', function () {
  this.timeout(10_000);
  let kernel: KernelProcess;

  function make(opts: Partial<KernelProcessOptions> = {}): KernelProcess {
    kernel?.dispose();
    // The plain-Python path (the IPython path has its own suite, kernelIPython.test.ts).
    kernel = plainKernel(opts);
    return kernel;
  }

  const run = (code: string, mode: RunMode = 'cell', signal?: AbortSignal, k: KernelProcess = kernel): Promise<Collected> =>
    collectRun(k, code, { mode, ...(signal && { signal }) });

  beforeEach(() => make());
  afterEach(() => kernel.dispose());

  it('keeps globals across cell runs and returns the trailing expression', async () => {
    assert.deepEqual(await kernel.run('x = 40', 'cell', () => undefined), {
      success: true,
      status: 'succeeded',
      value: null,
      executionCount: 1,
      dataflow: { reads: [], defines: ['x'], mutates: [] },
    });
    const r = await run('y = x + 1\ny + 1');
    assert.equal(r.success, true);
    assert.deepEqual(r.value, { 'text/plain': '42' });
    assert.deepEqual((await run('_')).value, { 'text/plain': '42' }, '_ holds the last cell value');
    assert.deepEqual((await run('1 + 1')).value, { 'text/plain': '2' });
    assert.equal((await run('None')).value, null);
    assert.equal((await run('import os')).value, null);
    assert.deepEqual((await run('__name__')).value, { 'text/plain': "'__main__'" });
  });

  it('tells a scratchpad run queued behind a running cell what it waits for, at once', async () => {
    await run('import time');
    const cell = collectRun(kernel, 'time.sleep(0.5)', { mode: 'cell', cell: { id: 'c9' } });
    let cellEnded = false;
    void cell.then(() => (cellEnded = true));
    await sleep(100);
    let toldWhileCellRan: boolean | undefined;
    const queued = collectRun(kernel, 'print("after")', {
      mode: 'scratchpad',
      onOutput: (o) => {
        if (toldWhileCellRan === undefined && o.kind === 'stream') toldWhileCellRan = !cellEnded;
      },
    });
    const r = await queued;
    await cell;
    assert.match(r.stderr, /^Waiting for the run of cell c9 \(In\[2\]\) to finish before this run starts\.\n$/);
    assert.equal(r.stdout, 'after\n');
    assert.equal(toldWhileCellRan, true, 'told before the cell ended');
    assert.equal((await run('1', 'scratchpad')).stderr, '', 'an idle kernel says nothing');
  });

  it('runs scratchpads in a shallow copy of the globals', async () => {
    await run('data = [1]\nname = "nb"');
    const r = await run('data.append(2)\nname = "changed"\nfresh = 1\nname', 'scratchpad');
    assert.deepEqual(r.value, { 'text/plain': "'changed'" });
    assert.deepEqual((await run('(data, name)')).value, { 'text/plain': "([1, 2], 'nb')" });
    const missing = await run('fresh');
    assert.equal(missing.success, false);
    assert.equal(missing.errors[0]?.name, 'NameError');
  });

  it('builds mimebundles from _repr_*_ methods and skips failing ones', async () => {
    const r = await run(
      [
        'class Rich:',
        '    def _repr_html_(self): return "<b>rich</b>"',
        '    def _repr_markdown_(self): raise RuntimeError("broken")',
        '    def _repr_png_(self): return b"\\x89PNG"',
        '    def __repr__(self): return "Rich()"',
        'class Bundle:',
        '    def _repr_mimebundle_(self, include=None, exclude=None):',
        '        return {"text/plain": "bundle", "application/json": {"a": 1}}, {}',
        'Rich()',
      ].join('\n'),
    );
    assert.equal(r.success, true);
    assert.deepEqual(r.value, { 'text/html': '<b>rich</b>', 'image/png': 'iVBORw==', 'text/plain': 'Rich()' });
    assert.deepEqual((await run('Bundle()')).value, { 'text/plain': 'bundle', 'application/json': '{"a": 1}' });
  });

  it('streams output before the run completes', async () => {
    // "late" is printed only once the test has seen "early": output held back until the end never ends.
    const gate = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'kernel-gate-')), 'seen');
    let early = false;
    const r = await kernel.run(
      `import os, time\nprint("early")\nwhile not os.path.exists(${JSON.stringify(gate)}): time.sleep(0.01)\nprint("late")`,
      'cell',
      (o) => {
        if (o.kind === 'stream' && o.text.includes('early') && !early) {
          early = true;
          fs.writeFileSync(gate, '');
        }
      },
    );
    fs.rmSync(path.dirname(gate), { recursive: true, force: true });
    assert.equal(r.success, true);
    assert.ok(early, 'early output arrived');
  });

  it('keeps the order of stdout and stderr', async () => {
    const r = await run('import sys\nprint("a")\nprint("b", file=sys.stderr)\nprint("c")\nsys.stderr.write("d")\nprint("e")');
    const seq = r.outputs.map((o) => (o.kind === 'stream' ? `${o.name}:${o.text}` : o.kind)).join('');
    assert.equal(seq, 'stdout:a\nstderr:b\nstdout:c\nstderr:dstdout:e\n');
  });

  it('reports exceptions with a traceback of the cell source, naming cells Cell In[n] by their count, and stays usable', async () => {
    const counts: (number | undefined)[] = [];
    const first = await collectRun(kernel, 'keep = 5\ndef g(v):\n    return f(v)', { onStart: (n) => counts.push(n) });
    assert.equal(first.executionCount, 1);
    const r = await collectRun(kernel, 'def f(v):\n    return 1 / v\n\ng(0)', { onStart: (n) => counts.push(n) });
    assert.deepEqual([counts, r.executionCount], [[1, 2], 2], 'the count is given at the start and in the result');
    assert.equal(r.success, false);
    assert.equal(r.value, null);
    assert.equal(r.errors.length, 1);
    const err = r.errors[0];
    assert.equal(err.name, 'ZeroDivisionError');
    assert.equal(err.message, 'division by zero');
    assert.match(err.traceback, /File "Cell In\[2\]", line 4, in <module>\n/);
    assert.match(
      err.traceback,
      /File "Cell In\[1\]", line 3, in g\n\s+return f\(v\)/,
      'a frame of an earlier cell names its run',
    );
    assert.match(err.traceback, /File "Cell In\[2\]", line 2, in f\n\s+return 1 \/ v/);
    assert.match(err.traceback, /ZeroDivisionError: division by zero\n$/);
    assert.doesNotMatch(err.traceback, /kernel(_protocol|_values)?\.py/, 'no kernel frames');
    assert.equal(err.traceback.includes('\x1b['), false, 'no ANSI escapes');
    assert.deepEqual((await run('keep')).value, { 'text/plain': '5' });
  });

  it('reports syntax errors and sys.exit() without dying', async () => {
    const syntax = await run('def :');
    assert.equal(syntax.success, false);
    assert.equal(syntax.errors[0]?.name, 'SyntaxError');
    assert.match(syntax.errors[0]?.traceback ?? '', /def :\n.*\^\nSyntaxError: invalid syntax/s);
    const exit = await run('import sys\nsys.exit(2)');
    assert.equal(exit.success, false);
    assert.equal(exit.errors[0]?.name, 'SystemExit');
    assert.deepEqual((await run('"alive"')).value, { 'text/plain': "'alive'" });
  });

  it('supports top-level await, in cells and scratchpads', async () => {
    const r = await run(
      'import asyncio\nasync def twice(v):\n    await asyncio.sleep(0.01)\n    return 2 * v\nv = await twice(4)\nawait twice(v)',
    );
    assert.equal(r.success, true);
    assert.deepEqual(r.value, { 'text/plain': '16' });
    assert.deepEqual((await run('await twice(v + 1)', 'scratchpad')).value, { 'text/plain': '18' });
  });

  it('interrupts a busy loop and keeps the globals', async () => {
    await run('survivor = "yes"');
    const pending = run('while True: pass');
    await sleep(300);
    kernel.interrupt();
    const r = await pending;
    assert.equal(r.success, false);
    assert.equal(r.errors[0]?.name, 'KeyboardInterrupt');
    assert.deepEqual((await run('survivor')).value, { 'text/plain': "'yes'" });
  });

  it('drops an aborted queued run without running it, and interrupts an aborted running one', async () => {
    await run('ran = []');
    const first = run('import time\ntime.sleep(0.4)\nran.append(1)');
    const controller = new AbortController();
    const second = run('ran.append(2)', 'cell', controller.signal);
    controller.abort();
    const aborted = await second;
    assert.deepEqual({ success: aborted.success, status: aborted.status }, { success: false, status: 'interrupted' });
    assert.equal((await first).success, true);
    assert.deepEqual((await run('ran')).value, { 'text/plain': '[1]' });

    const inFlight = new AbortController();
    const sleeping = run('import time\ntime.sleep(30)', 'cell', inFlight.signal);
    setTimeout(() => inFlight.abort(), 200);
    const r = await sleeping;
    assert.equal(r.status, 'interrupted');
    assert.equal(r.errors[0]?.name, 'KeyboardInterrupt');
  });

  it('restart clears globals and fails the pending runs', async () => {
    await run('gone = 1');
    const pending = run('import time\ntime.sleep(30)');
    await sleep(100);
    await kernel.restart();
    const r = await pending;
    assert.equal(r.success, false);
    assert.equal(r.errors[0]?.name, KERNEL_RESTARTED);
    const after = await run('gone');
    assert.equal(after.errors[0]?.name, 'NameError');
    assert.match(after.stderr, /^Kernel state was lost: the kernel was restarted/, 'the next run is told');
    assert.doesNotMatch((await run('1')).stderr, /state was lost/, 'only the next run');
  });

  it('reports a dead kernel (os._exit) and starts a fresh one on the next run', async () => {
    const exits: KernelExitInfo[] = [];
    make({ onExit: (info) => exits.push(info) });
    assert.deepEqual(kernel.status, { state: 'not_started' });
    const first = run('import os, sys, time\ntime.sleep(0.3)');
    await new Promise((r) => setTimeout(r, 100));
    assert.ok(['starting', 'busy'].includes(kernel.status.state), kernel.status.state);
    await first;
    const started = kernel.status;
    assert.equal(started.state, 'idle');
    assert.ok(started.startedAt && started.startedAt <= Date.now());
    const pid = kernel.info?.pid;
    const dying = run('sys.__stderr__.write("last words\\n")\nos._exit(3)');
    const queued = run('1');
    const r = await dying;
    const q = await queued;
    assert.equal(r.success, false);
    assert.equal(q.success, false);
    assert.equal(q.errors[0]?.name, KERNEL_DIED);
    const err = r.errors.find((e) => e.name === KERNEL_DIED);
    assert.ok(err, 'KernelDied output');
    assert.match(err.message, /exited with code 3/);
    assert.equal(r.stderr, 'last words\n', 'what the run wrote just before the exit arrives');
    assert.deepEqual(exits, [{ code: 3, signal: null, expected: false }]);
    assert.equal(kernel.running, false);
    assert.deepEqual(kernel.status, { state: 'dead' });
    const again = await run('40 + 2');
    assert.equal(kernel.status.state, 'idle');
    assert.ok(kernel.status.startedAt! > started.startedAt!, 'the new process started later');
    assert.deepEqual(again.value, { 'text/plain': '42' });
    assert.match(again.stderr, /^Kernel state was lost: the kernel process exited with code 3/);
    assert.notEqual(kernel.info?.pid, pid);
  });

  it('round-trips unicode, also split across pipe reads', async () => {
    const r = await run("print('héllo ✓ 日本')\n'日本'");
    assert.equal(r.stdout, 'héllo ✓ 日本\n');
    assert.deepEqual(r.value, { 'text/plain': "'日本'" });
    const big = await run("print('é✓日😀' * 50000, end='')");
    assert.equal(big.stdout, 'é✓日😀'.repeat(50000));
  });

  it('streams 10 MB of prints, coalesced', async () => {
    let chars = 0;
    let messages = 0;
    const r = await kernel.run('for _i in range(100_000): print("x" * 99)', 'cell', (o) => {
      if (o.kind === 'stream') {
        chars += o.text.length;
        messages++;
      }
    });
    assert.equal(r.success, true);
    assert.equal(chars, 10_000_000);
    assert.ok(messages < 5000, `${messages} messages: output is coalesced`);
  });

  it('never hangs when code that runs inside a flush prints (a GC callback, a finalizer, a warning)', async () => {
    // gc.set_threshold(1) collects at nearly every allocation, so the callback runs inside the
    // flushes of both the main thread and the flusher thread, each holding the output lock.
    const code = [
      'import gc, sys, time',
      'left = [20]',
      'def cb(phase, info):',
      '    if phase == "stop" and left[0] > 0:',
      '        left[0] -= 1',
      '        sys.stderr.write("collected\\n")',
      'gc.callbacks.append(cb)',
      'old = gc.get_threshold()',
      'gc.set_threshold(1)',
      'try:',
      '    for i in range(5):',
      '        print(i, end="")',
      '        time.sleep(0.03)  # the flusher thread sends what is buffered meanwhile',
      'finally:',
      '    gc.set_threshold(*old)',
      '    gc.callbacks.remove(cb)',
    ].join('\n');
    const hung = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the kernel hung')), 5000).unref());
    const r = await Promise.race([run(code), hung]);
    assert.equal(r.success, true, r.stderr);
    assert.equal(r.stdout, '01234');
    assert.equal(r.stderr, 'collected\n'.repeat(20), 'every line printed during a flush arrives');
    assert.equal((await run('print("after")')).stdout, 'after\n');
  });

  it('tells a call which run made it, only while that run is in flight: a thread left behind by an ended run calls as no run, even while another runs', async () => {
    const seen: (CallingRun | undefined)[] = [];
    let owner = 'agent action 1';
    make({
      owner: () => owner,
      onCall: async (_method, _params, ctx) => {
        seen.push(ctx.run);
        if (!ctx.run) throw new BridgeError('refused', 'no run in flight');
        return 'answered';
      },
    });
    const direct = await run('import _agent_bridge_host as host\nhost.call("m", None)', 'scratchpad');
    assert.deepEqual(direct.value, { 'text/plain': "'answered'" });
    assert.deepEqual(seen, [{ mode: 'scratchpad', owner: 'agent action 1' }]);
    owner = 'agent action 2';
    const left = [
      'import threading, time, _agent_bridge_host as host',
      'said = []',
      'def later():',
      '    time.sleep(0.5)',
      '    try:',
      '        said.append(host.call("m", None))',
      '    except host.CallRefused as e:',
      '        said.append("CallRefused: %s" % e)',
      'thread = threading.Thread(target=later)',
      'thread.start()',
    ].join('\n');
    assert.equal((await run(left)).success, true);
    // The thread calls while another run is in flight: that run is not the caller.
    assert.equal((await run('import time\ntime.sleep(1.5)')).success, true);
    const r = await run('thread.join()\nsaid');
    assert.deepEqual(r.value, { 'text/plain': "['CallRefused: no run in flight']" });
    assert.deepEqual(seen.slice(1), [undefined]);
  });

  it("says whether a run for an owner is queued or in flight (Stop Agents finds the agents' runs by it)", async () => {
    let owner = 'the person';
    make({ owner: () => owner });
    await run('None');
    owner = 'an agent';
    const agents = (o: unknown) => o === 'an agent';
    assert.equal(kernel.runsFor(agents), false);
    const busy = run('import time\nwhile True:\n    time.sleep(0.05)');
    assert.equal(kernel.runsFor(agents), true);
    await kernel.interrupt();
    await busy;
    assert.equal(kernel.runsFor(agents), false);
  });

  it('answers calls from Python into the host, and reports their errors', async () => {
    make({
      onCall: async (method, params) => {
        if (method === 'echo') return { got: params };
        throw new Error(`unknown method ${method}`);
      },
    });
    const ok = await run('import _agent_bridge_host as host\nhost.call("echo", {"n": 1, "s": "✓"})', 'scratchpad');
    assert.deepEqual(ok.value, { 'text/plain': "{'got': {'n': 1, 's': '✓'}}" });
    const bad = await run('import _agent_bridge_host as host\nhost.call("nope", None)', 'scratchpad');
    assert.equal(bad.success, false);
    assert.equal(bad.errors[0]?.name, 'HostCallError');
    assert.equal(bad.errors[0]?.message, 'unknown method nope');
    assert.match(
      bad.errors[0]?.traceback ?? '',
      /File "<scratchpad>", line 2, in <module>\n.*host\.call\("nope", None\)\n[\s\S]*HostCallError: unknown method nope\n$/,
    );
    assert.doesNotMatch(bad.errors[0]?.traceback ?? '', /kernel(_protocol|_values)?\.py/, 'the traceback ends at the call');

    make(); // no handler
    const none = await run(
      'import _agent_bridge_host as host\ntry:\n    host.call("echo", 1)\nexcept host.HostCallError as e:\n    r = str(e)\nr',
    );
    assert.match(String(none.value?.['text/plain']), /does not answer calls/);
  });

  it('forwards OS-level output of the run (fd 1/2, subprocesses)', async () => {
    const r = await run(
      'import os, subprocess\nos.write(1, b"raw\\n")\nos.write(2, b"raw err\\n")\nsubprocess.run(["echo", "child"])\nNone',
    );
    assert.equal(r.success, true);
    assert.equal(r.stdout, 'raw\nchild\n');
    assert.equal(r.stderr, 'raw err\n');
  });

  it('sends open matplotlib figures as display output', async () => {
    // A stand-in pyplot: the kernel only needs get_fignums, figure(n).savefig and close.
    const code = [
      'import sys, types',
      'class Fig:',
      '    def savefig(self, out, format, bbox_inches): out.write(b"PNGDATA")',
      'plt = types.ModuleType("matplotlib.pyplot")',
      'plt.open = [1]',
      'plt.get_fignums = lambda: list(plt.open)',
      'plt.figure = lambda n: Fig()',
      'plt.close = lambda which: plt.open.clear()',
      'sys.modules["matplotlib.pyplot"] = plt',
    ].join('\n');
    const r = await run(code);
    const displays = r.outputs.filter((o) => o.kind === 'display');
    assert.equal(displays.length, 1);
    assert.equal(displays[0].kind === 'display' && displays[0].data['image/png'], Buffer.from('PNGDATA').toString('base64'));
    assert.equal((await run('None')).outputs.length, 0, 'figures are closed after being shown');
    await run('del sys.modules["matplotlib.pyplot"]');
  });

  it('rejects start() clearly when Python is missing, and fails runs instead of throwing', async () => {
    make({ python: '/nonexistent/python3' });
    await assert.rejects(kernel.start(), /Could not start the Python kernel with "\/nonexistent\/python3".*ENOENT/);
    const r = await run('1');
    assert.equal(r.success, false);
    assert.equal(r.errors[0]?.name, KERNEL_START_FAILED);
  });

  it('rejects start() saying which of its parts is missing beside a kernel.py copied alone', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ab-kernel-'));
    try {
      fs.copyFileSync(SCRIPT, path.join(dir, 'kernel.py'));
      make({ script: path.join(dir, 'kernel.py') });
      await assert.rejects(kernel.start(), /kernel_protocol\.py is missing beside .*kernel\.py: reinstall the extension/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('serves the Kernel interface through BuiltinScratchpad', async () => {
    await run('base = 10');
    const pad = new BuiltinScratchpad(kernel);
    const events: StreamEvent[] = [];
    const ok = await pad.executeScratchpad('print("hi")\nbase * 2', (e) => events.push(e), new AbortController().signal);
    assert.deepEqual(ok, { success: true, status: 'succeeded', output: { mimetype: 'text/plain', data: '20' } });
    assert.deepEqual(events, [{ name: 'stdout', text: 'hi\n' }]);
    events.length = 0;
    const bad = await pad.executeScratchpad('raise ValueError("x")', (e) => events.push(e), new AbortController().signal);
    assert.deepEqual(bad, { success: false, status: 'failed', output: { mimetype: 'text/plain', data: '' } });
    assert.equal(events.length, 1);
    assert.equal(events[0].name, 'stderr');
    assert.match(events[0].text, /Traceback[\s\S]*raise ValueError\("x"\)[\s\S]*ValueError: x\n$/);
    assert.equal(pad.kind, 'builtin');
  });

  // Both paths of kernel.py: plain Python, and IPython's shell (Debian's Python has IPython).
  for (const [path, opts] of [
    ['plain Python', {}],
    ['IPython', { python: IPYTHON_PYTHON, env: { ...process.env, AGENT_BRIDGE_IPYTHON: '1' } }],
  ] as const)
    describe(`safety on ${path}: bounded, always ending, no cross-talk`, () => {
      beforeEach(async () => {
        await make(opts).start();
        assert.equal(kernel.info?.ipython !== null, path === 'IPython', `the kernel runs ${path}`);
      });

      it('fails the run whose message is over the frame limit, resyncs, and serves the next run', async () => {
        // Written straight to the message fd, past kernel.py's own caps.
        const r = await run(
          [
            'import os, sys',
            // The run's id, from kernel_protocol.py's globals (reached through its host module).
            'import _agent_bridge_host',
            'rid = _agent_bridge_host.call.__globals__["run_id"]',
            'os.write(4, b\'{"type":"stream","id":%d,"name":"stdout","text":"\' % rid + b"x" * (65 << 20) + b\'"}\\n\')',
            'print("after")',
          ].join('\n'),
        );
        assert.equal(r.success, false);
        assert.equal(r.status, 'failed');
        assert.equal(r.errors[0]?.name, KERNEL_OUTPUT_TOO_LARGE);
        assert.match(r.errors[0]?.message ?? '', /over the limit/);
        assert.equal(r.stdout, 'after\n');
        const next = await run('print(1)');
        assert.equal(next.stdout, '1\n');
        assert.equal(next.success, true);
      });

      it('cuts oversize values and tracebacks at the source, head and tail, saying how much', async () => {
        const r = await run('"a" * 3_000_000 + "END"');
        const text = valueOf(r)?.['text/plain'] ?? '';
        assert.ok(text.length < 1_100_000, `${text.length} characters`);
        assert.match(text, /^'aaa[\s\S]*\[\.\.\. \d+ of 3000003 characters cut by Agent Bridge \.\.\.\][\s\S]*aaaEND'$/);
        const html = await run('class H:\n    def _repr_html_(self): return "<p>" * 1_000_000\nH()');
        assert.match(valueOf(html)?.['text/html'] ?? '', /characters cut by Agent Bridge/);
        const shown = await run('from IPython.display import display, HTML\ndisplay(HTML("<i>" * 1_000_000))');
        if (path === 'IPython') {
          const display = shown.outputs.find((o) => o.kind === 'display');
          assert.match(display?.kind === 'display' ? (display.data['text/html'] ?? '') : '', /characters cut by Agent Bridge/);
        }
        const err = await run('raise ValueError("y" * 3_000_000)');
        assert.ok((err.errors[0]?.traceback.length ?? 0) < 1_100_000);
        assert.match(err.errors[0]?.message ?? '', /characters cut by Agent Bridge/);
      });

      it('delivers output of threads and subprocesses of an ended run to no other run, counted as stray', async () => {
        await run(
          [
            'import threading, time, subprocess',
            'def leak():',
            '    while True:',
            '        print("THREAD-LEAK")',
            '        time.sleep(0.01)',
            'threading.Thread(target=leak, daemon=True).start()',
            'child = subprocess.Popen(["sh", "-c", "while true; do echo CHILD-LEAK; sleep 0.01; done"])',
          ].join('\n'),
        );
        const b = await run('import time\ntime.sleep(0.5)\nprint("B")');
        assert.equal(b.stdout, 'B\n');
        assert.equal(b.stderr, '');
        const stray = kernel.strayOutput;
        assert.ok(stray.count > 0);
        assert.match(stray.tail, /THREAD-LEAK/);
        assert.match(stray.tail, /CHILD-LEAK/);
        await run('child.kill()');
      });

      it('restarts a kernel that ignores SIGINT after the grace period; queued runs say "restarted"', async () => {
        await run('kept = 1');
        const stuck = run('import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(300)');
        const queued = run('print("never")');
        await sleep(300);
        const how = await kernel.interrupt();
        assert.equal(how, 'restart');
        const r = await stuck;
        assert.deepEqual({ status: r.status, restarted: r.restarted }, { status: 'interrupted', restarted: true });
        assert.equal(r.errors[0]?.name, KERNEL_RESTARTED);
        assert.match(r.errors[0]?.message ?? '', /did not stop within 2 s[\s\S]*restarted/);
        const q = await queued;
        assert.equal(q.success, false);
        assert.match(q.errors[0]?.message ?? '', /restarted/);
        assert.equal(q.stdout, '');
        const after = await run('print(1)\nkept');
        assert.equal(after.stdout, '1\n');
        assert.equal(after.errors[0]?.name, 'NameError', 'the state is gone');
      });

      it('fails a scratchpad run that a request queued before the kernel restarted', async () => {
        await run('None');
        const queuedBefore = new BuiltinScratchpad(kernel);
        await kernel.restart();
        const events: StreamEvent[] = [];
        const r = await queuedBefore.executeScratchpad('print("ran")', (e) => events.push(e), new AbortController().signal);
        assert.deepEqual({ status: r.status, restarted: r.restarted }, { status: 'interrupted', restarted: true });
        assert.match(events.map((e) => e.text).join(''), /KernelRestarted: The kernel was restarted before this run started/);
        const fresh = await new BuiltinScratchpad(kernel).executeScratchpad('1', () => undefined, new AbortController().signal);
        assert.equal(fresh.success, true);
      });

      it('stops an aborted run the same way (a client that went away)', async () => {
        await run('None'); // started
        const gone = new AbortController();
        const stuck = run(
          'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(300)',
          'cell',
          gone.signal,
        );
        setTimeout(() => gone.abort(), 300);
        const r = await stuck;
        assert.equal(r.restarted, true);
        assert.equal((await run('print(2)')).stdout, '2\n');
      });

      it('answers interrupt with "sigint" when SIGINT was enough', async () => {
        await run('None'); // started
        const busy = run('while True: pass');
        await sleep(200);
        assert.equal(await kernel.interrupt(), 'sigint');
        assert.equal((await busy).status, 'interrupted');
        assert.equal(await kernel.interrupt(), null, 'nothing running');
      });

      it('an interrupt sent while the run is still compiling stops it by SIGINT, not by a restart', async () => {
        await run('kept = 1');
        // Compiling 50,000 lines takes a while (well within the grace period): the first SIGINT lands before the code runs.
        const busy = run(`${'x = 1\n'.repeat(50_000)}while True: pass`);
        await sleep(20);
        assert.equal(await kernel.interrupt(), 'sigint');
        assert.equal((await busy).status, 'interrupted');
        assert.equal((await run('print(kept)')).stdout, '1\n', 'the globals survived');
      });

      it('delivers what was printed just before os._exit, from Python and from a subprocess', async () => {
        const r = await run('import os, subprocess\nsubprocess.run(["echo", "child"])\nprint("before")\nos._exit(1)');
        // fd-level and Python-level output travel separately: their relative order is not kept.
        assert.deepEqual(r.stdout.split('\n').sort(), ['', 'before', 'child']);
        assert.equal(r.errors.at(-1)?.name, KERNEL_DIED);
      });
    });
});

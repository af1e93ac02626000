import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { KernelCommand } from '../../src/kernels/builtin/kernelCommand';
import { KeptProcess, type KeptProcessOptions } from '../../src/kernels/keptProcess';
import { INSPECT_MARKER, parseInspectOutput } from '../../src/core/runs/variables';
import { sleep } from '../../src/core/sleep';
import { IPYTHON_PYTHON } from './support/kernelRuns';

const SCRIPT = path.resolve(__dirname, '../../src/kernels/builtin/kernel_inspect.py');
/** `python kernel_inspect.py --serve KIB` (any Python is past 1 KiB: each process then answers one query). */
const plain = (kib = 256 * 1024): KernelCommand => ({ command: IPYTHON_PYTHON, args: [SCRIPT, '--serve', String(kib)] });
const query = (code: string) => ({ kind: 'analyze', cells: [{ id: '0', code }], ipython: false });
const defines = (answer: unknown) => (answer as { cells: { defines: string[] }[] }).cells[0]!.defines;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return false;
  }
};
async function gone(pid: number): Promise<boolean> {
  for (const t0 = Date.now(); Date.now() < t0 + 10_000; await sleep(50)) if (!alive(pid)) return true;
  return false;
}

/** The kept `python kernel_inspect.py --serve` of the code check, with a real Python. */
describe('a helper process kept running between queries (the code check)', function () {
  this.timeout(30_000);
  const made: KeptProcess[] = [];
  const kept = (options: Partial<KeptProcessOptions> = {}) => {
    const p = new KeptProcess({
      what: 'the Python code check',
      command: () => plain(),
      answers: (line) => line.includes(INSPECT_MARKER),
      log: { debug() {}, info() {}, warn() {}, error() {} },
      ...options,
    });
    made.push(p);
    const ask = async (q: object) => {
      const line = await p.ask(JSON.stringify(q));
      return line === undefined ? undefined : parseInspectOutput(line);
    };
    return Object.assign(p, { askQuery: ask });
  };
  afterEach(() => made.splice(0).forEach((p) => p.dispose()));

  it('answers each query from the same process, which dispose ends', async () => {
    const p = kept();
    assert.deepEqual(defines(await p.askQuery(query('x = 1'))), ['x']);
    const pid = p.pid!;
    assert.ok(alive(pid), 'it runs between queries');
    assert.deepEqual(defines(await p.askQuery(query('y = 2'))), ['y']);
    assert.equal(p.pid, pid, 'the second query went to the same process');
    p.dispose();
    assert.ok(await gone(pid), 'dispose ended it');
    assert.equal(await p.askQuery(query('z = 3')), undefined, 'nothing is started after dispose');
  });

  it('is started again after it died, and answers', async () => {
    const p = kept();
    await p.askQuery(query('x = 1'));
    const pid = p.pid!;
    process.kill(pid, 'SIGKILL');
    assert.ok(await gone(pid));
    await sleep(100); // its end reached the bridge
    assert.deepEqual(defines(await p.askQuery(query('y = 2'))), ['y']);
    assert.ok(p.pid !== undefined && p.pid !== pid, 'a new process answered');
  });

  it('exits past its memory bound after an answer; the queries it had not read go to the next one', async () => {
    const p = kept({ command: () => plain(1) });
    const answers = await Promise.all(['a = 1', 'b = 2', 'c = 3'].map((code) => p.askQuery(query(code))));
    assert.deepEqual(answers.map(defines), [['a'], ['b'], ['c']]);
  });

  it('stops when idle', async () => {
    const p = kept({ idleMs: 200 });
    await p.askQuery(query('x = 1'));
    const pid = p.pid!;
    assert.ok(await gone(pid), 'it ended once idle');
    assert.equal(p.pid, undefined);
  });

  it('a change in how it starts (the sandbox turned on) ends the running process; the next starts the new way', async () => {
    let wrapped = false;
    // A stand-in for the sandbox's wrapping: the same Python, started through env with a mark.
    const p = kept({
      command: () => {
        const { command, args } = plain();
        return wrapped ? { command: '/usr/bin/env', args: ['AB_WRAPPED=1', command, ...args] } : { command, args };
      },
    });
    await p.askQuery(query('x = 1'));
    const before = p.pid!;
    wrapped = true;
    assert.deepEqual(defines(await p.askQuery(query('y = 2'))), ['y']);
    assert.ok(await gone(before), 'the process started the old way ended');
    assert.notEqual(p.pid, before);
    assert.ok(
      fs.readFileSync(`/proc/${p.pid}/environ`, 'utf8').split('\0').includes('AB_WRAPPED=1'),
      'the new process was wrapped',
    );
  });

  it('a query unanswered in time is answered undefined, and the process is stopped', async () => {
    // A Python that reads its queries and never answers.
    const p = kept({
      command: () => ({ command: IPYTHON_PYTHON, args: ['-c', 'import sys, time\nsys.stdin.readline()\ntime.sleep(60)'] }),
      answerMs: 300,
    });
    const asked = p.askQuery(query('x = 1'));
    await sleep(100);
    const pid = p.pid!;
    assert.equal(await asked, undefined);
    assert.ok(await gone(pid), 'the stuck process was ended');
  });
});

/**
 * The builtin kernel's IPython path and its plain fallback, in the real VS Code: ipython.ipynb (a
 * magic, `!`, `display()`, `%time`, a DataFrame, a plot, an error) is run cell by cell through the
 * bridge, saved by the person's Ctrl+S in the workbench, and the .ipynb on disk is compared with
 * what Jupyter writes: output types and order, execution counts, the PNG. Then the same notebook
 * runs on a Python without IPython (a venv of Debian's Python without its packages): the magics
 * fail saying what to install for that Python, plain cells still save as Jupyter's.
 *
 * The kernel's Python is switched through the setting agentBridge.pythonPath and a kernel restart,
 * set in the Settings editor as the person would (the setting is machine-scoped: no workspace file
 * sets it). It is put back at the end; these checks run last.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deepEq, eq, fail, includes, match, ok, show } from '../assert';
import { setText } from '../settingsEditor';
import { type CheckRun, checkRun, type OpenedNotebook, type SessionInfo, suiteState } from './context';
import { sleep } from '../../src/core/sleep';

/** Debian's Python, which `npm run setup` gives IPython, pandas, numpy and matplotlib. */
const IPYTHON_PYTHON = '/usr/bin/python3';
const FIXTURE = 'ipython.ipynb';
const PYTHON_PATH = 'agentBridge.pythonPath';

interface SavedOutput {
  output_type: string;
  name?: string;
  text?: string | string[];
  data?: Record<string, string | string[]>;
  execution_count?: number | null;
  ename?: string;
  evalue?: string;
  traceback?: string[];
}

interface SavedCell {
  cell_type: string;
  execution_count?: number | null;
  outputs?: SavedOutput[];
}

const joined = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join('') : (v ?? ''));

/** One line per output, as Jupyter's file has it: `execute_result 2 text/plain`, `stream stdout`, `error NameError`. */
function summary(o: SavedOutput): string {
  switch (o.output_type) {
    case 'stream':
      return `stream ${o.name}`;
    case 'error':
      return `error ${o.ename}`;
    case 'execute_result':
      return `execute_result ${o.execution_count} ${Object.keys(o.data ?? {})
        .sort()
        .join(',')}`;
    default:
      return `${o.output_type} ${Object.keys(o.data ?? {})
        .sort()
        .join(',')}`;
  }
}

/** The `ipython` suite's checks (run last of the groups with VS Code up: they switch the kernel's Python). */
export function ipythonChecks(): void {
  const ctx = suiteState((c) => ({ file: path.join(c.workspace, FIXTURE) }));
  let opened: Promise<OpenedNotebook> | undefined;

  const open = (signal: AbortSignal) =>
    (opened ??= (async () => {
      const r = await ctx.client.post('/notebooks/open', { path: ctx.file, kernel: 'builtin' }, { signal, timeoutMs: 30_000 });
      eq(r.status, 200, `POST /notebooks/open ${FIXTURE} (body ${show(r.text, 300)})`);
      return { name: 'ipython', path: ctx.file, session: r.json<{ session: SessionInfo }>().session };
    })());

  /** Sets the setting, then restarts the notebook's kernel until it runs that Python (VS Code hands the change over a moment later). */
  const usePython = async (nb: OpenedNotebook, python: string, signal: AbortSignal, note: (m: string) => void) => {
    await setText(ctx.sandbox.page, ctx.sandbox.dirs.userData, PYTHON_PATH, python);
    let seen = '';
    const t0 = Date.now();
    for (let attempt = 1; Date.now() < t0 + 30_000; attempt++, await sleep(500)) {
      const restart = await ctx.client.post('/notebooks/restart', { notebook: nb.session.id }, { signal, timeoutMs: 30_000 });
      eq(restart.status, 200, `POST /notebooks/restart (body ${show(restart.text, 300)})`);
      const r = await ctx.client.run(nb.session.id, 'import sys\nsys.executable', { signal, timeoutMs: 30_000 });
      seen = String(r.events.find((e) => e.event === 'done')?.data?.output?.data ?? '');
      note(`attempt ${attempt} after ${Date.now() - t0} ms: the kernel runs ${seen}`);
      if (seen === `'${python}'`) return;
    }
    fail(`the kernel never ran ${python} after setting agentBridge.pythonPath (it runs ${seen})`);
  };

  /** Runs every code cell in order, waiting for each; returns the bridge's cell ids by index. */
  const runAll = async (nb: OpenedNotebook, signal: AbortSignal): Promise<string[]> => {
    const list = await ctx.client.get(`/notebooks/cells?notebook=${encodeURIComponent(nb.session.id)}`, { signal });
    eq(list.status, 200, `GET /notebooks/cells (body ${show(list.text, 300)})`);
    const cells: { id: string; kind: string }[] = list.json().cells;
    for (const cell of cells) {
      if (cell.kind !== 'code') continue;
      const r = await ctx.client.post(
        `/notebooks/cells/${cell.id}/run`,
        { notebook: nb.session.id, wait: true, timeoutMs: 60_000 },
        { signal, timeoutMs: 65_000 },
      );
      eq(r.status, 200, `run cell ${cell.id} (body ${show(r.text, 300)})`);
    }
    return cells.map((c) => c.id);
  };

  /** The person saves with Ctrl+S in the workbench; returns the cells of the file once it changed. */
  const save = async (signal: AbortSignal): Promise<SavedCell[]> => {
    const before = fs.readFileSync(ctx.file, 'utf8');
    const page = ctx.sandbox.page;
    await page
      .getByRole('tab', { name: /ipython\.ipynb/ })
      .first()
      .click({ timeout: 5_000 });
    await page.keyboard.press('Control+S');
    for (const end = Date.now() + 10_000; Date.now() < end && !signal.aborted; await sleep(200)) {
      const now = fs.readFileSync(ctx.file, 'utf8');
      if (now === before) continue;
      try {
        return (JSON.parse(now) as { cells: SavedCell[] }).cells;
      } catch {
        // Read while VS Code was still writing it: read again.
      }
    }
    return fail(`${FIXTURE} was not written within 10 s of Ctrl+S`);
  };

  /** Runs the notebook on `python`, saves it, checks the execution counts; returns the saved code cells. */
  const runAndSave = async (nb: OpenedNotebook, python: string, { signal, note }: CheckRun) => {
    await usePython(nb, python, signal, note);
    const ids = await runAll(nb, signal);
    const code = (await save(signal)).filter((c) => c.cell_type === 'code');
    note(
      `saved outputs: ${show(
        code.map((c) => (c.outputs ?? []).map(summary)),
        1000,
      )}`,
    );
    deepEq(
      code.map((c) => c.execution_count),
      [1, 2, 3, 4, 5, 6, 7],
      'execution counts',
    );
    return { ids, code };
  };

  it('ipython: a notebook with magics, display(), a DataFrame and a plot saves as Jupyter writes it', async () => {
    const run = checkRun();
    const nb = await open(run.signal);
    try {
      const { ids, code } = await runAndSave(nb, IPYTHON_PYTHON, run);
      deepEq(
        code.map((c) => (c.outputs ?? []).map(summary)),
        [
          [],
          ['stream stdout', 'execute_result 2 text/plain'],
          ['stream stdout'],
          ['display_data text/markdown,text/plain', 'stream stdout', 'execute_result 4 text/plain'],
          ['execute_result 5 text/html,text/plain'],
          ['execute_result 6 text/plain', 'display_data image/png,text/plain'],
          ['error NameError'],
        ],
        'outputs (Jupyter: the value as execute_result with its count, then the figure)',
      );
      const out = (i: number, j: number) => code[i]!.outputs![j]!;
      eq(joined(out(1, 0).text), 'python 3\n', 'print');
      eq(joined(out(1, 1).data?.['text/plain']), '42', 'value');
      match(joined(out(2, 0).text), /^shell works\r?\n$/, '!echo');
      eq(joined(out(3, 0).data?.['text/markdown']), '**shown**', 'display(Markdown)');
      match(joined(out(3, 1).text), /Wall time/, '%time');
      eq(joined(out(3, 2).data?.['text/plain']), '45', '%time then the value');
      const table = joined(out(4, 0).data?.['text/plain']);
      const header = table.split('\n')[0] ?? '';
      ok(
        header.includes('measurement_0') && header.includes('measurement_6') && header.length <= 120,
        `all 7 columns on the first line (pandas fits 2 to 80 columns), at most 120 characters: ${show(table, 600)}`,
      );
      includes(joined(out(4, 0).data?.['text/html']), '<table', 'DataFrame HTML');
      match(joined(out(5, 0).data?.['text/plain']), /Axes/, 'df.plot() value');
      const png = Buffer.from(joined(out(5, 1).data?.['image/png']), 'base64');
      eq(png.subarray(1, 4).toString('latin1'), 'PNG', 'the figure is a PNG');
      ok(png.length > 5_000, `the PNG is ${png.length} bytes`);
      const error = out(6, 0);
      eq(error.evalue, "name 'undefined_name' is not defined", 'error evalue');
      // As IPython names cells: by the count the file saves (7), not by an id or an index.
      match(joined(error.traceback), /Cell In ?\[7\], line 1/, 'the traceback names the cell by its execution count');
      ok(!joined(error.traceback).includes(ids[7]!), 'no cell id in the saved traceback');
    } finally {
      await setText(ctx.sandbox.page, ctx.sandbox.dirs.userData, PYTHON_PATH, '');
    }
  }).timeout(120_000);

  it('ipython: without IPython the same notebook says what to install, and plain cells still save as Jupyter’s', async () => {
    const run = checkRun();
    const nb = await open(run.signal);
    const venv = fs.mkdtempSync(path.join(ctx.sandbox.dirs.tmp, 'no-ipython-'));
    try {
      execFileSync(IPYTHON_PYTHON, ['-m', 'venv', '--without-pip', venv]);
      const python = path.join(venv, 'bin', 'python');
      const { ids, code } = await runAndSave(nb, python, run);
      deepEq(
        code.map((c) => (c.outputs ?? []).map(summary)),
        [
          ['error SyntaxError'],
          ['stream stdout', 'execute_result 2 text/plain'],
          ['error SyntaxError'],
          ['error SyntaxError'],
          ['error ModuleNotFoundError'],
          ['error NameError'],
          ['error NameError'],
        ],
        'outputs',
      );
      for (const [i, line] of [
        [0, 1],
        [2, 1],
        [3, 3],
      ] as const) {
        const evalue = code[i]!.outputs![0]!.evalue ?? '';
        ok(
          evalue.startsWith(`line ${line}, `) && evalue.includes(`${python} -m pip install ipython`),
          `cell ${i + 1}: the error names the line and what to install for ${python}: ${show(evalue, 400)}`,
        );
      }
      eq(joined(code[1]!.outputs![1]!.data?.['text/plain']), '42', 'value');
      includes(joined(code[6]!.outputs![0]!.traceback), 'File "Cell In[7]", line 1', 'the traceback names the cell by its count');
      ok(!joined(code[6]!.outputs![0]!.traceback).includes(ids[7]!), 'no cell id in the saved traceback');
    } finally {
      await setText(ctx.sandbox.page, ctx.sandbox.dirs.userData, PYTHON_PATH, '');
      fs.rmSync(venv, { recursive: true, force: true });
    }
  }).timeout(120_000);
}

/**
 * The cell routes (`/notebooks...`) against the packaged extension, over HTTP, on analysis.ipynb
 * with the builtin kernel. Each check sets up the cells it needs (so `--only` works), and the
 * read-before-write check makes a real human edit: it clicks into the cell's editor in the
 * workbench through the launcher's Chromium page and types on the keyboard.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { deepEq, eq, fail, includes, match, ok, show } from '../assert';
import { PrintGate } from '../printGate';
import type { HttpResult, RequestOptions } from '../http';
import { REPO_ROOT } from '../stack';
import { checkRun, readJson, suiteState, workspaceSettings } from './context';
import { screenshot } from '../screenshots';
import { sleep } from '../../src/core/sleep';
import { randomHex } from '../../src/core/ids';

/** A cell as GET /notebooks/cells shows it (the fields the checks read). */
interface Cell {
  id: string;
  index: number;
  kind: 'code' | 'markup';
  language: string;
  code: string;
  version: number;
  tags: string[];
  metadata: Record<string, unknown>;
  execution: { order: number | null; success: boolean | null; durationMs: number | null; status: string } | null;
  outputs: { items: OutputItem[] }[];
  personEditing?: true;
}

interface OutputItem {
  type: string;
  mime: string;
  text?: string;
  name?: string;
  message?: string;
  traceback?: string;
}

interface NotebookInfo {
  sessionId: string;
  uri: string;
  path: string | null;
  notebookType: string;
  kernel: string | null;
  cellCount: number;
  dirty: boolean;
}

/** Asserts a JSON error `{detail, ...}` with this status; returns the body. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- error bodies carry route-specific extras
function expectError(r: HttpResult, statuses: number | number[], what: string): any {
  const allowed = Array.isArray(statuses) ? statuses : [statuses];
  ok(allowed.includes(r.status), `${what}: status ${r.status}, expected ${allowed.join('/')} (body ${show(r.text, 300)})`);
  match(String(r.headers['content-type']), /^application\/json/, `${what}: content-type`);
  const body = r.json();
  ok(typeof body?.detail === 'string' && body.detail.length > 0, `${what}: no "detail" string in ${show(r.text)}`);
  return body;
}

const items = (cell: Cell): OutputItem[] => cell.outputs.flatMap((o) => o.items);

/** The `cells` suite's checks. */
export function cellChecks(): void {
  const ctx = suiteState((c) => ({
    sid: c.analysis.session.id,
    q: `notebook=${encodeURIComponent(c.analysis.session.id)}`,
  }));
  /** A token unique to this run, so cells made by the checks are found by their text. */
  const tag = randomHex(3);

  const call = (method: string, path: string, json: unknown, opts: Omit<RequestOptions, 'path' | 'method' | 'json'>) =>
    ctx.client.request({ method, path, ...(json === undefined ? {} : { json }), ...opts });

  const list = async (signal: AbortSignal, notebook = ctx.sid): Promise<{ notebook: NotebookInfo; cells: Cell[] }> => {
    const r = await ctx.client.get(`/notebooks/cells?notebook=${encodeURIComponent(notebook)}&outputs=full`, { signal });
    eq(r.status, 200, `GET /notebooks/cells status (body ${show(r.text, 300)})`);
    return r.json();
  };
  const getCell = async (ref: string | number, signal: AbortSignal): Promise<Cell> => {
    const r = await ctx.client.get(`/notebooks/cells/${encodeURIComponent(String(ref))}?${ctx.q}`, { signal });
    eq(r.status, 200, `GET /notebooks/cells/${ref} status (body ${show(r.text, 300)})`);
    return r.json().cell;
  };
  const create = async (code: string, signal: AbortSignal, where: Record<string, unknown> = {}): Promise<Cell> => {
    const r = await ctx.client.post('/notebooks/cells', { notebook: ctx.sid, code, ...where }, { signal });
    eq(r.status, 201, `POST /notebooks/cells status (body ${show(r.text, 300)})`);
    return r.json().cell;
  };
  const runWait = (ref: string, signal: AbortSignal) =>
    ctx.client.post(
      `/notebooks/cells/${ref}/run`,
      { notebook: ctx.sid, wait: true, timeoutMs: 10_000, outputs: 'full' },
      { signal, timeoutMs: 12_000 },
    );

  // --------------------------------------------------------------------------------- reads

  it('cells: GET /notebooks lists both fixtures with kernel "builtin"', async () => {
    const { signal } = checkRun();
    const r = await ctx.client.get('/notebooks', { signal });
    eq(r.status, 200, 'status');
    const notebooks = r.json<{ notebooks: NotebookInfo[] }>().notebooks;
    ok(Array.isArray(notebooks), `no notebooks array: ${show(r.text, 300)}`);
    for (const fixture of [ctx.analysis, ctx.other]) {
      const entry = notebooks.find((n) => n.sessionId === fixture.session.id);
      ok(entry, `${fixture.name}.ipynb (${fixture.session.id}) not listed: ${show(notebooks, 400)}`);
      eq(entry.path, fixture.path, `${fixture.name} path`);
      eq(entry.uri, fixture.session.uri, `${fixture.name} uri`);
      eq(entry.notebookType, 'jupyter-notebook', `${fixture.name} notebookType`);
      eq(entry.kernel, 'builtin', `${fixture.name} kernel`);
      eq(typeof entry.dirty, 'boolean', `${fixture.name} dirty flag type`);
    }
    // other.ipynb is never edited by the checks: its two fixture cells.
    eq(notebooks.find((n) => n.sessionId === ctx.other.session.id)!.cellCount, 2, 'other.ipynb cellCount');
  });

  it('cells: list analysis.ipynb — ids, indices, kinds, languages, code, versions', async () => {
    const { signal } = checkRun();
    // By path this time (the notebook may be named by session id, path or uri).
    const { notebook, cells } = await list(signal, ctx.analysis.path);
    eq(notebook.sessionId, ctx.sid, 'notebook.sessionId');
    eq(notebook.cellCount, cells.length, 'notebook.cellCount vs cells');
    cells.forEach((c, i) => {
      eq(c.index, i, `cells[${i}].index`);
      match(c.id, /^[a-zA-Z0-9_-]{1,64}$/, `cells[${i}].id (an nbformat cell id)`);
      ok(Number.isInteger(c.version) && c.version >= 0, `cells[${i}].version is ${show(c.version)}`);
      ok(c.kind === 'code' || c.kind === 'markup', `cells[${i}].kind is ${show(c.kind)}`);
      if (c.kind === 'code')
        ok(c.execution && typeof c.execution.status === 'string', `cells[${i}].execution ${show(c.execution)}`);
      else eq(c.execution, null, `cells[${i}].execution of a markup cell`);
    });
    eq(new Set(cells.map((c) => c.id)).size, cells.length, 'distinct ids');
    // The fixture's own nbformat ids (analysis.ipynb is nbformat 4.5).
    const fileIds = (readJson(ctx.analysis.path).cells as { id: string }[]).map((c) => c.id);
    ok(
      fileIds.every((id) => cells.some((c) => c.id === id)),
      `the file's cell ids ${show(fileIds)} are not the bridge's ${show(cells.map((c) => c.id))}`,
    );
    const x = cells.find((c) => c.code === 'x = 41');
    ok(x, `fixture cell "x = 41" not listed: ${show(cells.map((c) => c.code))}`);
    deepEq([x.kind, x.language], ['code', 'python'], 'kind and language of "x = 41"');
    const md = cells.find((c) => c.code.startsWith('# Analysis'));
    ok(md, `fixture markdown cell not listed: ${show(cells.map((c) => c.code))}`);
    deepEq([md.kind, md.language], ['markup', 'markdown'], 'kind and language of the markdown cell');
    // A second list: the same ids and versions (reading changes nothing).
    const again = (await list(signal)).cells;
    deepEq(
      again.map((c) => [c.id, c.version]),
      cells.map((c) => [c.id, c.version]),
      'ids and versions on a second list',
    );
  });

  it('cells: GET one cell by id, by index and by negative index', async () => {
    const { signal } = checkRun();
    const { cells } = await list(signal);
    ok(cells.length >= 2, `only ${cells.length} cells`);
    const byId = await getCell(cells[1]!.id, signal);
    deepEq(byId, cells[1], 'cell by id');
    deepEq(await getCell(1, signal), cells[1], 'cell by index 1');
    deepEq(await getCell(-1, signal), cells[cells.length - 1], 'cell by index -1');
  });

  // -------------------------------------------------------------------------------- writes

  it('cells: POST /notebooks/cells creates at the index; the other ids stay', async () => {
    const { signal } = checkRun();
    const before = (await list(signal)).cells;
    const code = `created_${tag} = 1`;
    const cell = await create(code, signal, { index: 1 });
    deepEq([cell.index, cell.kind, cell.language, cell.code], [1, 'code', 'python', code], 'created cell');
    ok(!before.some((c) => c.id === cell.id), `the new cell reuses id ${cell.id}`);
    const after = (await list(signal)).cells;
    eq(after.length, before.length + 1, 'cell count');
    // Reads add the cell's place in the dependency graph, which a write's answer does not carry.
    const { dependsOn: _d, dependents: _e, stale: _s, dataflow: _f, ...listed } = after[1] as Cell & Record<string, unknown>;
    deepEq(listed, cell, 'the listed cell at index 1');
    deepEq(
      after.filter((c) => c.id !== cell.id).map((c) => [c.id, c.code, c.version]),
      before.map((c) => [c.id, c.code, c.version]),
      'the other cells (ids, code, versions)',
    );
    // Placed by id as well: right after the new cell.
    const next = await create(`after_${tag} = 2`, signal, { after: cell.id });
    eq(next.index, 2, 'index of a cell created with "after"');
  });

  it('cells: PATCH replaces the code; GET shows it and a new version', async () => {
    const { signal } = checkRun();
    const cell = await create(`edit_me_${tag} = 1`, signal);
    const code = `edited_${tag} = "héllo → 世界"`;
    const r = await call('PATCH', `/notebooks/cells/${cell.id}`, { notebook: ctx.sid, code }, { signal });
    eq(r.status, 200, `PATCH status (body ${show(r.text, 300)})`);
    const patched: Cell = r.json().cell;
    eq(patched.code, code, 'code in the PATCH response');
    ok(patched.version > cell.version, `version ${cell.version} → ${patched.version}`);
    const got = await getCell(cell.id, signal);
    deepEq([got.code, got.version, got.index], [code, patched.version, cell.index], 'GET after PATCH (code, version, index)');
  });

  it('cells: PATCH without "code" never wipes: 400 when it changes nothing, else the code stays', async () => {
    const { signal } = checkRun();
    const cell = await create(`keep_me_${tag} = 1`, signal);
    const r = await call('PATCH', `/notebooks/cells/${cell.id}`, { notebook: ctx.sid }, { signal });
    includes(expectError(r, 400, 'PATCH {}').detail, '"code"', 'detail');
    const tagged = await call('PATCH', `/notebooks/cells/${cell.id}`, { notebook: ctx.sid, tags: ['slow'] }, { signal });
    eq(tagged.status, 200, `PATCH tags (body ${show(tagged.text, 300)})`);
    const got = await getCell(cell.id, signal);
    deepEq([got.code, got.version, got.tags], [cell.code, cell.version, ['slow']], 'cell after the PATCHes');
  });

  it('cells: DELETE removes the cell; the others keep ids and indices shift', async () => {
    const { signal } = checkRun();
    const doomed = await create(`delete_me_${tag} = 1`, signal, { index: 0 });
    const before = (await list(signal)).cells;
    const r = await call('DELETE', `/notebooks/cells/${doomed.id}?${ctx.q}`, undefined, { signal });
    eq(r.status, 200, `DELETE status (body ${show(r.text, 300)})`);
    deepEq(r.json(), { deleted: doomed.id, cellCount: before.length - 1 }, 'DELETE body');
    const after = (await list(signal)).cells;
    deepEq(
      after.map((c) => [c.id, c.index]),
      before.slice(1).map((c, i) => [c.id, i]),
      'cells after the delete (id, index)',
    );
    expectError(await ctx.client.get(`/notebooks/cells/${doomed.id}?${ctx.q}`, { signal }), 404, 'GET of the deleted cell');
  });

  it('cells: move to index 0, then back to the end with "after"', async () => {
    const { signal } = checkRun();
    const mover = await create(`move_me_${tag} = 1`, signal);
    const before = (await list(signal)).cells;
    const last = before.length - 1;
    eq(before[last]!.id, mover.id, 'the new cell is last');
    const r = await ctx.client.post(`/notebooks/cells/${mover.id}/move`, { notebook: ctx.sid, to: 0 }, { signal });
    eq(r.status, 200, `move status (body ${show(r.text, 300)})`);
    deepEq([r.json().cell.id, r.json().cell.index], [mover.id, 0], 'moved cell');
    const moved = (await list(signal)).cells;
    deepEq(
      moved.map((c) => c.id),
      [mover.id, ...before.slice(0, last).map((c) => c.id)],
      'order after moving to 0',
    );
    eq(moved[0]!.code, mover.code, 'code of the moved cell');
    // And back to the end, placed after the cell that was last before it.
    const back = await ctx.client.post(
      `/notebooks/cells/${mover.id}/move`,
      { notebook: ctx.sid, after: before[last - 1]!.id },
      { signal },
    );
    eq(back.status, 200, `move back status (body ${show(back.text, 300)})`);
    deepEq(
      (await list(signal)).cells.map((c) => c.id),
      before.map((c) => c.id),
      'order after moving back',
    );
  });

  // ---------------------------------------------------------------------------------- runs

  it('cells: run with wait → the outputs of print, success true', async () => {
    const { signal } = checkRun();
    const cell = await create(`print("run", 6 * 7, "${tag}")`, signal);
    const r = await runWait(cell.id, signal);
    eq(r.status, 200, `run status (body ${show(r.text, 300)})`);
    const body = r.json<{ success: boolean; cell: Cell }>();
    eq(body.success, true, 'success');
    deepEq(
      items(body.cell).map((i) => [i.type, i.text]),
      [['stdout', `run 42 ${tag}\n`]],
      'output items',
    );
    eq(body.cell.execution?.status, 'succeeded', 'execution.status');
    eq(body.cell.execution?.success, true, 'execution.success');
    ok(typeof body.cell.execution?.order === 'number', `execution.order ${show(body.cell.execution?.order)}`);
    deepEq((await getCell(cell.id, signal)).outputs, body.cell.outputs, 'outputs on a later GET');
  });

  it('cells: run a raising cell with wait → an error item, success false', async () => {
    const { signal } = checkRun();
    const cell = await create(`print("before")\n{}["missing_${tag}"]`, signal);
    const r = await runWait(cell.id, signal);
    eq(r.status, 200, `run status (body ${show(r.text, 300)})`);
    const body = r.json<{ success: boolean; cell: Cell }>();
    eq(body.success, false, 'success');
    const all = items(body.cell);
    deepEq([all[0]?.type, all[0]?.text], ['stdout', 'before\n'], 'first output item');
    const error = all.find((i) => i.type === 'error');
    ok(error, `no error item in ${show(all, 400)}`);
    eq(error.name, 'KeyError', 'error.name');
    includes(error.message, `missing_${tag}`, 'error.message');
    includes(error.traceback, 'KeyError', 'error.traceback');
    eq(body.cell.execution?.success, false, 'execution.success');
    eq(body.cell.execution?.status, 'failed', 'execution.status');
  });

  it('cells: GET /notebooks/variables lists and inspects variables (DataFrame columns, hostile repr bounded) without a cell or an execution count', async () => {
    const { signal } = checkRun();
    const setup = await create(
      [
        'import pandas as pd',
        `vars_${tag} = 41`,
        `frame_${tag} = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})`,
        'class _Hostile:',
        '    def __repr__(self):',
        '        while True: pass',
        `hostile_${tag} = _Hostile()`,
      ].join('\n'),
      signal,
    );
    const first = await runWait(setup.id, signal);
    eq(first.json<{ success: boolean }>().success, true, `setup run (${show(first.text, 300)})`);
    const order = first.json<{ cell: Cell }>().cell.execution?.order;
    const cellCount = (await list(signal)).cells.length;
    const r = await ctx.client.get(`/notebooks/variables?${ctx.q}`, { signal, timeoutMs: 20_000 });
    eq(r.status, 200, `GET /notebooks/variables (${show(r.text, 300)})`);
    const vars = r.json<{
      variables: { name: string; type: string; repr?: string | null; shape?: number[]; reprError?: string }[];
    }>().variables;
    const byName = new Map(vars.map((v) => [v.name, v]));
    eq(byName.get(`vars_${tag}`)?.repr, '41', 'the int');
    deepEq(byName.get(`frame_${tag}`)?.shape, [2, 2], 'the DataFrame shape');
    match(byName.get(`hostile_${tag}`)?.reprError ?? '', /took longer than 0\.5 s/, 'a repr that never returns is cut off');
    ok(!byName.has('pd'), 'modules are not listed');
    const one = await ctx.client.get(`/notebooks/variables/frame_${tag}?${ctx.q}`, { signal });
    eq(one.status, 200, `GET /notebooks/variables/:name (${show(one.text, 300)})`);
    deepEq(
      one.json<{ variable: { columns: { name: string; dtype: string }[] } }>().variable.columns.map((c) => c.name),
      ['a', 'b'],
      'columns',
    );
    eq((await ctx.client.get(`/notebooks/variables/missing_${tag}?${ctx.q}`, { signal })).status, 404, 'an unknown name');
    eq((await list(signal)).cells.length, cellCount, 'no cell was created');
    const next = await runWait(setup.id, signal);
    eq(next.json<{ cell: Cell }>().cell.execution?.order, (order ?? 0) + 1, 'the execution count moved by the next run only');
    await ctx.client.request({ method: 'DELETE', path: `/notebooks/cells/${setup.id}?${ctx.q}&force=true`, signal });
  });

  it('cells: written Python is compiled first — a syntax error is a 400 with line and column, the cell unchanged; IPython magics pass; strict refuses an undefined name', async () => {
    const { signal } = checkRun();
    const cell = await create(`checked_${tag} = 1`, signal);
    const bad = await call(
      'PATCH',
      `/notebooks/cells/${cell.id}`,
      { notebook: ctx.sid, code: `checked_${tag} = (1,\n`, force: true },
      { signal },
    );
    const body = expectError(bad, 400, 'a syntax error');
    eq(body.line, 1, 'line');
    ok(typeof body.column === 'number', `column ${show(body.column)}`);
    eq((await getCell(cell.id, signal)).code, `checked_${tag} = 1`, 'the cell as it was');
    const magic = await call(
      'PATCH',
      `/notebooks/cells/${cell.id}`,
      { notebook: ctx.sid, code: `%time checked_${tag} = 2\n!true`, force: true },
      { signal },
    );
    eq(magic.status, 200, `IPython syntax (${show(magic.text, 300)})`);
    const strict = await call(
      'POST',
      '/notebooks/cells',
      { notebook: ctx.sid, code: `print(nowhere_${tag})`, strict: true },
      { signal },
    );
    includes(expectError(strict, 400, 'strict').detail, `nowhere_${tag}, defined in no cell`, 'strict detail');
    const warned = await create(`print(nowhere_${tag})`, signal);
    deepEq((warned as Cell & { warnings?: string[] }).warnings, [`uses nowhere_${tag}, defined in no cell`], 'warnings');
    for (const id of [cell.id, warned.id])
      await call('DELETE', `/notebooks/cells/${id}?${ctx.q}&force=true`, undefined, { signal });
  });

  it('cells: editing the cell that defines x makes the cells using x stale (marked in the editor) and run-stale re-runs them only', async () => {
    const { signal, note } = checkRun();
    // At the top of the notebook, where the editor shows them once scrolled up.
    const a = await create(`x_${tag} = 1`, signal, { index: 0 });
    const b = await create(`y_${tag} = x_${tag} + 1`, signal, { index: 1 });
    const c = await create(`unrelated_${tag} = 5`, signal, { index: 2 });
    const d = await create(`print(y_${tag})`, signal, { index: 3 });
    const ran = await ctx.client.post(
      '/notebooks/run',
      { notebook: ctx.sid, cells: [a.id, b.id, c.id, d.id], wait: true, timeoutMs: 20_000 },
      { signal, timeoutMs: 25_000 },
    );
    eq(ran.json<{ status: string }>().status, 'succeeded', `first runs (${show(ran.text, 300)})`);
    type Graphed = Cell & { dependsOn: string[]; dependents: string[]; stale: { reason: string } | null };
    const graph = async () => new Map((await list(signal)).cells.map((cell) => [cell.id, cell as Graphed]));
    let cells = await graph();
    deepEq(cells.get(b.id)?.dependsOn, [a.id], 'b depends on a');
    deepEq(cells.get(a.id)?.dependents, [b.id], 'a is used by b');
    deepEq(
      [a, b, c, d].map((x) => cells.get(x.id)?.stale),
      [null, null, null, null],
      'nothing stale after the runs',
    );
    const orderOf = (id: string) => cells.get(id)!.execution?.order;
    const before = new Map([a, b, c, d].map((x) => [x.id, orderOf(x.id)]));
    const edited = await call('PATCH', `/notebooks/cells/${a.id}`, { notebook: ctx.sid, code: `x_${tag} = 2` }, { signal });
    eq(edited.status, 200, `edit a (${show(edited.text, 300)})`);
    cells = await graph();
    match(cells.get(a.id)?.stale?.reason ?? '', /edited after it last ran/, 'a is stale');
    match(cells.get(b.id)?.stale?.reason ?? '', new RegExp(`defines x_${tag}, is stale`), 'b is stale');
    ok(cells.get(d.id)?.stale, 'd (through b) is stale');
    eq(cells.get(c.id)?.stale, null, 'c is not stale');
    const page = ctx.sandbox.page;
    await page
      .getByRole('tab', { name: /analysis\.ipynb/ })
      .first()
      .click({ timeout: 5_000 });
    // The editor renders only the cells in view.
    await page.locator('.notebook-editor .monaco-list-row').first().hover();
    await page.mouse.wheel(0, -100_000);
    const mark = page.locator('.cell-statusbar-container', { hasText: 'stale' });
    await mark
      .first()
      .waitFor({ state: 'visible', timeout: 15_000 })
      .catch(() => fail('no "stale" cell status bar item in the editor'));
    await mark.first().scrollIntoViewIfNeeded();
    await mark.locator('.cell-status-item', { hasText: 'stale' }).first().hover();
    await sleep(1500);
    await screenshot(page, 'stale-cells.png', note);
    const rerun = await ctx.client.post(
      '/notebooks/run-stale',
      { notebook: ctx.sid, cell: a.id, wait: true, timeoutMs: 20_000 },
      { signal, timeoutMs: 25_000 },
    );
    eq(rerun.status, 200, `run-stale (${show(rerun.text, 300)})`);
    deepEq(
      rerun.json<{ runs: { cell: Cell }[] }>().runs.map((r) => r.cell.id),
      [a.id, b.id, d.id],
      'run-stale ran a, b and d, in order',
    );
    cells = await graph();
    eq(orderOf(c.id), before.get(c.id), 'c did not run again');
    ok((orderOf(b.id) ?? 0) > (before.get(b.id) ?? 0), 'b ran again');
    deepEq(
      [a, b, c, d].map((x) => cells.get(x.id)?.stale),
      [null, null, null, null],
      'nothing stale after run-stale',
    );
    includes(
      items(cells.get(d.id)!)
        .map((i) => i.text)
        .join(''),
      '3',
      'd printed the new y',
    );
    for (const x of [a, b, c, d]) await call('DELETE', `/notebooks/cells/${x.id}?${ctx.q}&force=true`, undefined, { signal });
  }).timeout(90_000);

  // ------------------------------------------------------------- run many, clear, tags, save

  it('cells: POST /notebooks/run runs a list in order, stops at the first failure, and clears', async () => {
    const { signal } = checkRun();
    const a = await create(`ra_${tag} = 1`, signal);
    const b = await create(`raise ValueError("rb_${tag}")`, signal);
    const c = await create(`print("rc_${tag}")`, signal);
    const stop = await ctx.client.post(
      '/notebooks/run',
      { notebook: ctx.sid, cells: [c.id, a.id, b.id], wait: true, timeoutMs: 15_000 },
      { signal, timeoutMs: 20_000 },
    );
    eq(stop.status, 200, `run status (body ${show(stop.text, 300)})`);
    const body = stop.json<{ status: string; runs: { status: string; cell: Cell }[]; skipped: string[] }>();
    deepEq(
      body.runs.map((r) => [r.cell.id, r.status]),
      [
        [a.id, 'succeeded'],
        [b.id, 'failed'],
      ],
      'runs, in notebook order',
    );
    deepEq([body.status, body.skipped], ['failed', [c.id]], 'status and skipped');
    // Queued with the others (the builtin kernel takes a series at once), c was dropped unrun.
    const unrun = await getCell(c.id, signal);
    deepEq([unrun.outputs, unrun.execution?.order ?? null], [[], null], `cell ${c.id} did not run`);
    const go = await ctx.client.post(
      '/notebooks/run',
      { notebook: ctx.sid, cells: [a.id, b.id, c.id], onError: 'continue', wait: true, timeoutMs: 15_000 },
      { signal, timeoutMs: 20_000 },
    );
    deepEq(
      go.json<{ runs: { status: string }[] }>().runs.map((r) => r.status),
      ['succeeded', 'failed', 'succeeded'],
      'onError continue',
    );
    const cleared = await ctx.client.post('/notebooks/clear-outputs', { notebook: ctx.sid, cells: [b.id, c.id] }, { signal });
    deepEq(cleared.json(), { cleared: [b.id, c.id] }, 'clear-outputs answer');
    for (const id of [b.id, c.id]) {
      const got = await getCell(id, signal);
      deepEq([got.outputs, got.execution?.status], [[], 'idle'], `cell ${id} after clearing`);
    }
  });

  it('cells: tags and a new cell reach the file with POST /notebooks/save', async () => {
    const { signal } = checkRun();
    const cell = await create(`saved_${tag} = 1`, signal, { tags: ['parameters'] });
    const r = await ctx.client.post('/notebooks/save', { notebook: ctx.sid }, { signal });
    eq(r.status, 200, `save status (body ${show(r.text, 300)})`);
    deepEq(r.json(), { saved: [{ sessionId: ctx.sid, path: ctx.analysis.path, saved: true }] }, 'save answer');
    const onDisk = (readJson(ctx.analysis.path).cells as { id: string; metadata: { tags?: string[] } }[]).find(
      (c) => c.id === cell.id,
    );
    ok(onDisk, `cell ${cell.id} is not in the saved file`);
    deepEq(onDisk.metadata.tags, ['parameters'], 'tags in the file');
  });

  it('cells: 50 saves right after an edit, under CPU load from a second process and with the editor auto-saving after 20 ms, all answer 200 (no false "changed on disk")', async function () {
    this.timeout(240_000);
    const { signal, note } = checkRun();
    const cell = await create(`save_loop_${tag} = 0`, signal);
    // The editor's own saves race the agent's: VS Code says one is done only after it wrote the file.
    workspaceSettings(ctx, { 'files.autoSave': 'afterDelay', 'files.autoSaveDelay': 20 });
    try {
      await autoSaved(cell, signal, note);
      await saveLoop(cell, signal, note);
    } finally {
      workspaceSettings(ctx, undefined);
    }
  });

  /** Waits until an edit reaches the file with no save asked for: the editor auto-saves. */
  async function autoSaved(cell: Cell, signal: AbortSignal, note: (line: string) => void): Promise<void> {
    const code = `save_loop_${tag} = -1`;
    const edit = await call(
      'PATCH',
      `/notebooks/cells/${cell.id}`,
      { notebook: ctx.sid, code, version: cell.version },
      { signal },
    );
    eq(edit.status, 200, `edit status (body ${show(edit.text, 300)})`);
    cell.version = edit.json<{ cell: Cell }>().cell.version;
    const t0 = Date.now();
    while (!fs.readFileSync(ctx.analysis.path, 'utf8').includes(code)) {
      if (Date.now() - t0 > 15_000) fail('the editor did not auto-save the edit within 15 s of files.autoSaveDelay 20');
      await sleep(50);
    }
    note(`auto-saved ${Date.now() - t0} ms after the edit`);
  }

  async function saveLoop(cell: Cell, signal: AbortSignal, note: (line: string) => void): Promise<void> {
    // One busy loop per CPU in another process: VS Code's save event then comes late, after the next edit.
    const load = Array.from({ length: os.availableParallelism() }, () =>
      spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
    );
    const conflicts: string[] = [];
    const t0 = Date.now();
    try {
      let version = cell.version;
      for (let i = 1; i <= 50; i++) {
        const edit = await call(
          'PATCH',
          `/notebooks/cells/${cell.id}`,
          { notebook: ctx.sid, code: `save_loop_${tag} = ${i}`, version },
          { signal },
        );
        eq(edit.status, 200, `edit ${i} status (body ${show(edit.text, 300)})`);
        version = edit.json<{ cell: Cell }>().cell.version;
        const saved = await ctx.client.post('/notebooks/save', { notebook: ctx.sid }, { signal, timeoutMs: 30_000 });
        if (saved.status !== 200) conflicts.push(`save ${i}: ${saved.status} ${show(saved.text, 200)}`);
      }
    } finally {
      for (const child of load) child.kill('SIGKILL');
    }
    note(`50 edit+save pairs under load took ${Date.now() - t0} ms`);
    deepEq(conflicts, [], 'saves that did not answer 200');
    const onDisk = (readJson(ctx.analysis.path).cells as { id: string; source: string | string[] }[]).find(
      (c) => c.id === cell.id,
    );
    const source = Array.isArray(onDisk?.source) ? onDisk.source.join('') : onDisk?.source;
    eq(source, `save_loop_${tag} = 50`, 'the last edit is in the file');
  }

  it('cells: the curl examples of SKILL.md run as written (placeholder ids replaced)', async () => {
    const { signal } = checkRun();
    const cell = await create('', signal);
    const skill = fs.readFileSync(path.join(REPO_ROOT, 'skills', 'agent-bridge', 'SKILL.md'), 'utf8');
    const blocks = [...skill.matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]!).filter((b) => b.includes('curl '));
    ok(blocks.length >= 2, `only ${blocks.length} curl examples found in SKILL.md`);
    for (const block of blocks) {
      const script = block.replaceAll('s_ab12cd', ctx.sid).replaceAll('c0a1', cell.id);
      const run = spawnSync('bash', ['-c', `set -e\n${script}`], {
        env: { ...process.env, AGENT_BRIDGE_URL: ctx.advert.url, MARIMO_TOKEN: ctx.advert.token ?? '' },
        encoding: 'utf8',
        timeout: 30_000,
      });
      eq(run.status, 0, `exit status of\n${script}\n(stderr ${show(run.stderr, 300)})`);
      ok(run.stdout.trim().startsWith('{'), `no JSON from\n${script}\n: ${show(run.stdout, 300)}`);
      ok(!run.stdout.includes('"detail"'), `an error from\n${script}\n: ${show(run.stdout, 400)}`);
    }
    eq((await getCell(cell.id, signal)).code, 'x = 2', 'the PATCH example wrote the cell');
  });

  it('cells: /notebooks/open outside the workspace → 403, the same whether the file exists or not', async () => {
    const { signal } = checkRun();
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'bridge-outside-'));
    try {
      const real = path.join(outside, 'x.ipynb');
      fs.writeFileSync(real, `private ${tag}`);
      const answers: [number, string][] = [];
      for (const file of [real, path.join(outside, 'missing.ipynb')]) {
        const r = await ctx.client.post('/notebooks/open', { path: file }, { signal });
        const err = expectError(r, 403, `open ${file}`);
        ok(!r.text.includes(`private ${tag}`), 'the file content is not echoed');
        answers.push([r.status, String(err.detail).replace(file, '<path>')]);
      }
      deepEq(answers[0], answers[1], 'existing and missing files get the same answer');
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
    }
  });

  it('cells: run with Accept: text/event-stream streams stdout as printed, then done', async () => {
    const { signal } = checkRun();
    const gate = new PrintGate(ctx.workspace);
    const lines = [0, 1, 2].map((i) => `s${tag} ${i}`);
    const cell = await create(gate.code(lines), signal);
    const stream = ctx.client.stream({
      method: 'POST',
      path: `/notebooks/cells/${cell.id}/run`,
      json: { notebook: ctx.sid },
      headers: { accept: 'text/event-stream' },
      timeoutMs: 60_000,
      signal,
    });
    // Each line must reach the client before the cell prints the next.
    await gate.follow(stream, lines).finally(() => gate.dispose());
    const r = await stream.result;
    eq(r.status, 200, `status (body ${show(r.raw, 300)})`);
    match(String(r.headers['content-type']), /^text\/event-stream/, 'content-type');
    ok(r.framingErrors.length === 0, `framing: ${r.framingErrors.join('; ')}`);
    eq(r.trailing, '', 'bytes after the last event');
    ok(r.ended === 'closed', `the stream did not close cleanly (${r.ended}${r.error ? `: ${r.error}` : ''})`);
    const names = r.events.map((e) => e.event);
    ok(
      names.every((n) => ['stdout', 'stderr', 'output', 'done'].includes(n)),
      `unexpected event names ${show(names)}`,
    );
    eq(names.filter((n) => n === 'done').length, 1, `number of done events in ${show(names)}`);
    eq(names[names.length - 1], 'done', 'last event');
    eq(r.stdout, `s${tag} 0\ns${tag} 1\ns${tag} 2\n`, 'streamed stdout');
    const done = r.done!.data as { success: boolean; cell: Cell };
    eq(done.success, true, 'done.success');
    eq(done.cell?.id, cell.id, 'done.cell.id');
  }).timeout(120_000);

  // ------------------------------------------------------------------------------- batches

  it('cells: a batch whose last op is invalid → 4xx and nothing changes (versions included)', async () => {
    const { signal } = checkRun();
    const a = await create(`batch_a_${tag} = 1`, signal);
    const { cells: before } = await list(signal);
    const md = before.find((c) => c.kind === 'markup');
    ok(md, 'no markup cell to use');
    for (const last of [
      { op: 'delete', ref: 9999 }, // index out of range
      { op: 'edit', ref: md.id, code: 'x', version: md.version + 7 }, // stale version
      { op: 'move', ref: a.id, to: before.length + 3 }, // target out of range
      { op: 'delete', ref: a.id }, // deletes a cell an earlier op edits
      { op: 'edit', ref: `cnope${tag.slice(0, 1)}` }, // no code: schema error
    ]) {
      const r = await ctx.client.post(
        '/notebooks/edits',
        {
          notebook: ctx.sid,
          ops: [
            { op: 'create', code: `batch_new_${tag} = 1`, index: 0 },
            { op: 'edit', ref: a.id, code: `batch_a_${tag} = 10` },
            { op: 'move', ref: md.id, to: 0 },
            last,
          ],
        },
        { signal },
      );
      expectError(r, [400, 404, 409], `batch ending with ${show(last)}`);
      const after = (await list(signal)).cells;
      deepEq(after, before, `cells after the batch ending with ${show(last)}`);
    }
  });

  it('cells: a batch names its new cells, places one after another by name and runs them by name', async () => {
    const { signal } = checkRun();
    const a = await create(`named_anchor_${tag} = 1`, signal);
    const r = await ctx.client.post(
      '/notebooks/edits',
      {
        notebook: ctx.sid,
        ops: [
          { op: 'create', name: 'notes', kind: 'markup', code: `# named_${tag}`, after: a.id },
          { op: 'create', name: 'calc', code: `named_${tag} = 1 + 1\nprint("named", named_${tag})`, after: 'notes' },
        ],
        run: ['calc'],
        wait: true,
        timeoutMs: 10_000,
      },
      { signal, timeoutMs: 12_000 },
    );
    eq(r.status, 200, `status (body ${show(r.text, 300)})`);
    const body = r.json<{ names: Record<string, string>; cells: Cell[]; runs: { success: boolean; cellId: string }[] }>();
    deepEq(Object.keys(body.names ?? {}).sort(), ['calc', 'notes'], 'names in the answer');
    eq(body.runs[0]!.cellId, body.names.calc, 'the run is the cell named calc');
    eq(body.runs[0]!.success, true, `run success (${show(body.runs[0], 400)})`);
    const calc = body.cells.find((c) => c.id === body.names.calc);
    ok(calc, `the cell named calc among the answer's cells (${show(body.cells, 400)})`);
    includes(items(calc)[0]?.text ?? '', 'named 2', 'run output');
    const cells = (await list(signal)).cells;
    const at = cells.findIndex((c) => c.id === a.id);
    deepEq(
      cells.slice(at, at + 3).map((c) => c.id),
      [a.id, body.names.notes, body.names.calc],
      'the new cells follow the anchor, in the order named',
    );
  });

  it('cells: a valid batch applies every op at once and runs a cell', async () => {
    const { signal } = checkRun();
    const a = await create(`batch_ok_${tag} = 1`, signal);
    const gone = await create(`batch_gone_${tag} = 1`, signal);
    const before = (await list(signal)).cells;
    const r = await ctx.client.post(
      '/notebooks/edits',
      {
        notebook: ctx.sid,
        ops: [
          { op: 'edit', ref: a.id, code: `batch_ok_${tag} = 2\nprint("batch", batch_ok_${tag})` },
          { op: 'delete', ref: gone.id },
          { op: 'create', code: `# batch_made_${tag}`, after: a.id },
        ],
        run: [a.id],
        wait: true,
        timeoutMs: 10_000,
        outputs: 'full',
      },
      { signal, timeoutMs: 12_000 },
    );
    eq(r.status, 200, `status (body ${show(r.text, 300)})`);
    const body = r.json<{ cells: Cell[]; deleted: string[]; cellCount: number; runs: { success: boolean; cellId: string }[] }>();
    deepEq(body.deleted, [gone.id], 'deleted');
    eq(body.cellCount, before.length, 'cellCount (one created, one deleted)');
    eq(body.runs?.length, 1, 'number of runs');
    eq(body.runs[0]!.success, true, 'run success');
    eq(body.runs[0]!.cellId, a.id, 'the run names the edited cell');
    deepEq(
      items(body.cells.find((c) => c.id === a.id) ?? { ...a, outputs: [] }).map((i) => i.text),
      ['batch 2\n'],
      'run output',
    );
    const after = (await list(signal)).cells;
    const ai = after.findIndex((c) => c.id === a.id);
    eq(after[ai + 1]?.code, `# batch_made_${tag}`, 'the created cell follows the edited one');
    ok(!after.some((c) => c.id === gone.id), 'the deleted cell is still listed');
  });

  // ----------------------------------------------------------------------------- bad input

  it('cells: unknown notebook → 404 listing the open notebooks', async () => {
    const { signal } = checkRun();
    const missing = `${ctx.workspace}/nope.ipynb`;
    const r = await ctx.client.get(`/notebooks/cells?notebook=${encodeURIComponent(missing)}`, { signal });
    const body = expectError(r, 404, 'GET with an unknown notebook');
    includes(body.detail, ctx.analysis.path, 'detail');
    includes(body.detail, ctx.other.path, 'detail');
    const ids = (body.notebooks ?? []).map((n: { sessionId: string }) => n.sessionId);
    ok(ids.includes(ctx.sid) && ids.includes(ctx.other.session.id), `notebooks in the body: ${show(body.notebooks, 300)}`);
    // The same for a write, and nothing is created anywhere.
    const count = (await list(signal)).cells.length;
    expectError(await ctx.client.post('/notebooks/cells', { notebook: 's_nope00', code: 'x' }, { signal }), 404, 'POST');
    eq((await list(signal)).cells.length, count, 'cell count of analysis.ipynb');
  });

  it('cells: unknown cell id or index out of range → 404 with the cell count', async () => {
    const { signal } = checkRun();
    const count = (await list(signal)).cells.length;
    for (const [method, path, json] of [
      ['GET', `/notebooks/cells/cnope00?${ctx.q}`, undefined],
      ['GET', `/notebooks/cells/${count + 5}?${ctx.q}`, undefined],
      ['PATCH', '/notebooks/cells/cnope00', { notebook: ctx.sid, code: 'x' }],
      ['DELETE', `/notebooks/cells/cnope00?${ctx.q}`, undefined],
      ['POST', '/notebooks/cells/cnope00/run', { notebook: ctx.sid, wait: true }],
    ] as const) {
      const body = expectError(await call(method, path, json, { signal }), 404, `${method} ${path}`);
      eq(body.cellCount, count, `${method} ${path}: cellCount`);
      includes(body.detail, String(count), `${method} ${path}: detail`);
    }
  });

  it('cells: wrong types → 400 naming the field, nothing changes', async () => {
    const { signal } = checkRun();
    const cell = await create(`typed_${tag} = 1`, signal);
    const before = (await list(signal)).cells;
    for (const [method, path, json, field] of [
      ['POST', '/notebooks/cells', { notebook: ctx.sid, code: 42 }, 'code'],
      ['POST', '/notebooks/cells', { notebook: ctx.sid, code: 'x', index: 'one' }, 'index'],
      ['POST', '/notebooks/cells', { notebook: ctx.sid, code: 'x', kind: 'sql' }, 'kind'],
      ['PATCH', `/notebooks/cells/${cell.id}`, { notebook: ctx.sid, code: 'x', version: 'latest' }, 'version'],
      ['PATCH', `/notebooks/cells/${cell.id}`, { notebook: ctx.sid, code: 'x', colour: 'red' }, 'colour'],
      ['POST', `/notebooks/cells/${cell.id}/move`, { notebook: ctx.sid, to: -1 }, 'to'],
      ['POST', `/notebooks/cells/${cell.id}/run`, { notebook: ctx.sid, wait: 'yes' }, 'wait'],
      ['POST', '/notebooks/edits', { notebook: ctx.sid, ops: [{ op: 'rename', ref: cell.id }] }, 'op'],
      ['POST', '/notebooks/edits', { notebook: ctx.sid, ops: [] }, 'ops'],
    ] as const) {
      const body = expectError(await call(method, path, json, { signal }), 400, `${method} ${path} ${show(json)}`);
      includes(body.detail, field, `${method} ${path} ${show(json)}: detail`);
    }
    deepEq((await list(signal)).cells, before, 'cells after the refused requests');
  });

  // ------------------------------------------------------------------- read-before-write

  it('cells: 409 after a human edit typed in the workbench (Chromium keyboard)', async () => {
    const { signal, note } = checkRun();
    const page = ctx.sandbox.page;
    const marker = `human_${tag}`;
    const typed = `typed_${tag}`;
    const cell = await create(`${marker} = 1`, signal, { index: 1 });
    const read = await getCell(cell.id, signal); // what the agent was shown
    const t0 = Date.now();
    // The person: bring analysis.ipynb to the front, click into the cell's editor, type.
    await page
      .getByRole('tab', { name: /analysis\.ipynb/ })
      .first()
      .click({ timeout: 5_000 });
    const editor = page.locator('.notebook-editor .monaco-list-row .view-lines', { hasText: marker });
    await editor.first().waitFor({ state: 'visible', timeout: 5_000 });
    eq(await editor.count(), 1, `editors showing ${marker}`);
    await editor.first().click({ timeout: 5_000 });
    await page.keyboard.press('End');
    await page.keyboard.type(`  # ${typed}`);
    note(`clicked and typed in ${Date.now() - t0} ms`);
    // Wait until the extension host has the keystrokes (reading them does not matter: the PATCH
    // below names the version the agent read before the person typed).
    let current: Cell | undefined;
    for (const end = Date.now() + 5_000; Date.now() < end; await sleep(100)) {
      current = await getCell(cell.id, signal);
      if (current.code.includes(typed)) break;
    }
    if (!current?.code.includes(typed)) fail(`the typed text never reached the bridge; the cell reads ${show(current?.code)}`);
    note(`bridge saw the typing after ${Date.now() - t0} ms (version ${read.version} → ${current.version})`);
    const clobber = `agent_${tag} = 2`;
    const r = await call(
      'PATCH',
      `/notebooks/cells/${cell.id}`,
      { notebook: ctx.sid, code: clobber, version: read.version },
      { signal },
    );
    const body = expectError(r, 409, 'PATCH with the version read before the human edit');
    const shown: Cell | undefined = body.cell;
    ok(shown, `no current cell in the 409 body: ${show(r.text, 300)}`);
    eq(shown.id, cell.id, '409 body: cell.id');
    includes(shown.code, typed, '409 body: cell.code');
    eq(shown.code, `${marker} = 1  # ${typed}`, '409 body: cell.code');
    ok(shown.version > read.version, `409 body: version ${shown.version} is not past ${read.version}`);
    const still = await getCell(cell.id, signal);
    eq(still.code, shown.code, 'the cell after the 409 (nothing changed)');
    // Same with a batch edit: refused whole.
    const batch = await ctx.client.post(
      '/notebooks/edits',
      { notebook: ctx.sid, ops: [{ op: 'edit', ref: cell.id, code: clobber, version: read.version }] },
      { signal },
    );
    expectError(batch, 409, 'batch edit with the stale version');
    // Having read the person's text, the agent may write (no version: the bridge's own record),
    // once the person has not typed in the cell for 10 s (presence; checked in the presence suite).
    for (const end = Date.now() + 15_000; (await getCell(cell.id, signal)).personEditing && Date.now() < end;) await sleep(500);
    const ok2 = await call('PATCH', `/notebooks/cells/${cell.id}`, { notebook: ctx.sid, code: clobber }, { signal });
    eq(ok2.status, 200, `PATCH after re-reading (body ${show(ok2.text, 300)})`);
    eq((await getCell(cell.id, signal)).code, clobber, 'code after the PATCH that was allowed');
    // ... and the person sees the agent's text in the same editor.
    await page
      .locator('.notebook-editor .monaco-list-row .view-lines', { hasText: `agent_${tag}` })
      .first()
      .waitFor({ state: 'visible', timeout: 5_000 })
      .catch(() => fail(`the workbench does not show the agent's write agent_${tag}`));
  }).timeout(40_000);
}

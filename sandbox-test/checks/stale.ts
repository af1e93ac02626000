/**
 * Stale marks an agent can trust, on popcon.ipynb with the builtin kernel: a pandas notebook that
 * reads a CSV, adds a column in place (`popcon['kb'] = …`) and shows `popcon.dtypes`. Changing
 * the column makes the display cell stale (the kernel's record of the runs, and the editor's
 * mark), run-stale re-runs exactly it, and a cell that reads popcon only in a branch its run
 * skipped stays fresh. After a restart nothing is stale: outputs are from an earlier kernel.
 */
import * as path from 'node:path';
import { deepEq, eq, fail, includes, match, ok, show } from '../assert';
import type { BridgeClient } from '../http';
import { checkRun, context } from './context';
import { screenshot } from '../screenshots';
import { sleep } from '../../src/core/sleep';

const FIXTURE = 'popcon.ipynb';

interface Cell {
  id: string;
  code: string;
  execution: { order: number | null; inKernel: boolean; status: string; outputsFrom?: string } | null;
  outputs?: { items: { type: string; text?: string }[] }[];
  dependsOn?: string[];
  stale?: { reason: string; from: string } | null;
  dataflow?: { from: string; reads?: string[]; changes?: string[] };
}

interface StaleCell {
  id: string;
  index: number;
  reason: string;
}

/** The notebook opened with the builtin kernel, and its cells as the bridge lists them. */
async function opened(client: BridgeClient, signal: AbortSignal) {
  const { workspace } = context();
  const r = await client.post(
    '/notebooks/open',
    { path: path.join(workspace, FIXTURE), kernel: 'builtin' },
    { signal, timeoutMs: 30_000 },
  );
  eq(r.status, 200, `open ${FIXTURE} (${show(r.text, 300)})`);
  const sid = r.json<{ session: { id: string } }>().session.id;
  const cells = async () => {
    const listed = await client.get(`/notebooks/cells?notebook=${sid}&outputs=full`, { signal });
    eq(listed.status, 200, `list (${show(listed.text, 300)})`);
    return new Map(listed.json<{ cells: Cell[] }>().cells.map((c) => [c.id, c]));
  };
  const runAll = async () => {
    const ran = await client.post(
      '/notebooks/run',
      { notebook: sid, all: true, wait: true, timeoutMs: 60_000 },
      { signal, timeoutMs: 65_000 },
    );
    eq(ran.json<{ status: string }>().status, 'succeeded', `run all (${show(ran.text, 400)})`);
  };
  return { sid, cells, runAll };
}

const staleOf = (cells: Map<string, Cell>) => [...cells.values()].filter((c) => c.stale).map((c) => c.id);
const text = (cell: Cell | undefined) => (cell?.outputs ?? []).flatMap((o) => o.items.map((i) => i.text ?? '')).join('');

/** Shows the notebook in the editor, waits for a cell status item with `label`, and saves a screenshot. */
async function screenshotMark(label: string, file: string, note: (m: string) => void): Promise<void> {
  const page = context().sandbox.page;
  await page
    .getByRole('tab', { name: /popcon\.ipynb/ })
    .first()
    .click({ timeout: 5_000 });
  // Other notebooks' editors stay in the page: only this one's cells count.
  const editor = page.locator('.notebook-editor').filter({ hasText: 'show_all' });
  const mark = editor.locator('.cell-statusbar-container .cell-status-item', { hasText: label });
  await mark
    .first()
    .waitFor({ state: 'visible', timeout: 15_000 })
    .catch(() => fail(`no "${label}" cell status bar item in the editor`));
  await mark.first().scrollIntoViewIfNeeded();
  await mark.first().hover();
  await sleep(1500);
  await screenshot(page, file, note);
}

export function staleChecks(): void {
  it("stale: changing a column in place (popcon['kb'] = …) makes the cell showing popcon.dtypes stale (marked in the editor), run-stale re-runs exactly it, and a cell reading popcon only in a branch its run skipped stays fresh", async () => {
    const { signal, note } = checkRun();
    const { client } = context();
    const { sid, cells, runAll } = await opened(client, signal);
    await runAll();
    let now = await cells();
    deepEq(staleOf(now), [], 'nothing stale after running all');
    deepEq(
      now.get('p4')?.dependsOn,
      ['p3', 'p2'],
      'the display cell depends on the cell changing popcon, and on the one reading it',
    );
    deepEq(
      now.get('p5')?.dataflow,
      { from: 'run', reads: ['show_all'] },
      "the branch cell's run did not read popcon (show_all is False)",
    );
    deepEq(now.get('p3')?.dataflow?.changes, ['popcon'], 'the column cell changes popcon in place');

    const changed = await client.post(
      '/notebooks/edits',
      { notebook: sid, ops: [{ op: 'edit', ref: 'p3', code: "popcon['kb'] = popcon['size'] // 1024" }], run: ['p3'], wait: true },
      { signal, timeoutMs: 35_000 },
    );
    eq(changed.status, 200, `edit and run the column cell (${show(changed.text, 400)})`);
    const caused = changed.json<{ stale: StaleCell[] }>().stale;
    deepEq(
      caused.map((s) => [s.id, s.index]),
      [['p4', 4]],
      `the answer names the display cell, and it only (${show(caused)})`,
    );
    match(
      caused[0]!.reason,
      /^cell p3 \(index 3\), which changes popcon in place \(popcon\['kb'\] = …\), ran again/,
      'its reason',
    );
    now = await cells();
    deepEq(staleOf(now), ['p4'], 'only the display cell is stale');
    eq(now.get('p4')?.stale?.from, 'run', 'from the runs the kernel recorded');
    await screenshotMark('stale', 'stale-mutation.png', note);

    const rerun = await client.post(
      '/notebooks/run-stale',
      { notebook: sid, wait: true, outputs: 'full' },
      { signal, timeoutMs: 35_000 },
    );
    eq(rerun.status, 200, `run-stale (${show(rerun.text, 400)})`);
    const body = rerun.json<{ runs: { cell: Cell }[]; detail: string; stale: StaleCell[] }>();
    deepEq(
      body.runs.map((r) => r.cell.id),
      ['p4'],
      'run-stale ran exactly the display cell',
    );
    eq(body.detail, 'Runs 1 stale cell, in notebook order', 'what it says it runs');
    match(text(body.runs[0]!.cell), /kb\s+int64/, 'the display cell shows the new column type');
    deepEq(staleOf(await cells()), [], 'nothing stale after run-stale');
  }).timeout(150_000);

  it('stale: after a kernel restart no cell is stale, outputs are "from an earlier kernel" (marked in the editor); run-stale names what a stale cell needs, and rebuilds it when asked', async () => {
    const { signal, note } = checkRun();
    const { client } = context();
    const { sid, cells, runAll } = await opened(client, signal);
    await runAll();
    const restarted = await client.post('/notebooks/restart', { notebook: sid }, { signal, timeoutMs: 30_000 });
    eq(restarted.status, 200, `restart (${show(restarted.text, 300)})`);
    let now = await cells();
    const code = [...now.values()].filter((c) => c.execution);
    deepEq(
      code.map((c) => [c.id, c.execution?.inKernel, c.stale]),
      code.map((c) => [c.id, false, null]),
      'no cell has run in the new kernel, and none is stale',
    );
    eq(now.get('p4')?.execution?.outputsFrom, 'earlier kernel', "the display cell's outputs are from an earlier kernel");
    await screenshotMark('from an earlier kernel', 'stale-earlier-kernel.png', note);

    const alone = await client.post(`/notebooks/cells/p4/run`, { notebook: sid, wait: true }, { signal, timeoutMs: 35_000 });
    eq(
      alone.json<{ status: string }>().status,
      'failed',
      `the display cell alone fails: popcon is not defined (${show(alone.text, 300)})`,
    );
    now = await cells();
    match(now.get('p4')?.stale?.reason ?? '', /has not run in this kernel/, 'then it is stale: what it needs has not run');
    const offered = await client.post('/notebooks/run-stale', { notebook: sid }, { signal });
    eq(offered.status, 202, `run-stale without waiting (${show(offered.text, 300)})`);
    const plan = offered.json<{ queued: string[]; needs: StaleCell[]; detail: string }>();
    deepEq(plan.queued, ['p4'], 'it runs the stale cell');
    deepEq(
      plan.needs.map((n) => n.id),
      ['p1', 'p2', 'p3'],
      'and names the cells it needs (not the branch or the note cell)',
    );
    includes(plan.detail, '"rebuild": true', 'and says how to run them too');
    await client.post('/notebooks/cells/p4/wait', { notebook: sid, timeoutMs: 30_000 }, { signal, timeoutMs: 35_000 });
    const rebuilt = await client.post(
      '/notebooks/run-stale',
      { notebook: sid, rebuild: true, wait: true },
      { signal, timeoutMs: 65_000 },
    );
    eq(rebuilt.status, 200, `run-stale with rebuild (${show(rebuilt.text, 400)})`);
    deepEq(
      rebuilt.json<{ runs: { cell: Cell }[] }>().runs.map((r) => r.cell.id),
      ['p1', 'p2', 'p3', 'p4'],
      'rebuild runs what the display cell needs, then it',
    );
    now = await cells();
    deepEq(staleOf(now), [], 'nothing stale once rebuilt');
    ok(
      now.get('p4')?.execution?.inKernel && now.get('p4')?.execution?.outputsFrom === undefined,
      'its outputs are of this kernel',
    );
  }).timeout(180_000);
}

/**
 * Honest cell state, end to end on an nbformat 4.4 notebook (no cell ids in the file; counts and
 * outputs from an earlier session) with the builtin kernel: `GET /notebooks` says where the kernel
 * is; cells not run in the current kernel show their count as saved, not as a run, also after a
 * restart; a traceback names cells by the execution count the file saves and the answer gives
 * (`Cell In[n]`), never by a bridge id or an index that inserts change; a save keeps the file
 * 4.4 without ids and is logged as a save.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deepEq, eq, includes, match, ok, show } from '../assert';
import { sleep } from '../../src/core/sleep';
import { auditLines, checkRun, context } from './context';

const FIXTURE = 'nbformat44.ipynb';

interface Execution {
  order: number | null;
  inKernel: boolean;
  savedOrder?: number;
  status: string;
}
interface Cell {
  id: string;
  kind: string;
  code: string;
  execution: Execution | null;
}
interface SavedCell {
  cell_type: string;
  id?: string;
  execution_count?: number | null;
  source: string | string[];
  outputs?: { output_type: string; traceback?: string[] }[];
}

const joined = (v: string | string[] | undefined) => (Array.isArray(v) ? v.join('') : (v ?? ''));

export function cellStateChecks(): void {
  it('cell state: an nbformat 4.4 notebook shows saved counts as saved, names cells in tracebacks by count, saves as 4.4 and logs a save', async () => {
    const { signal, note } = checkRun();
    const { client, workspace, sandbox } = context();
    const file = path.join(workspace, FIXTURE);
    const opened = await client.post('/notebooks/open', { path: file, kernel: 'builtin' }, { signal, timeoutMs: 30_000 });
    eq(opened.status, 200, `open ${FIXTURE} (${show(opened.text, 300)})`);
    const sid = opened.json<{ session: { id: string } }>().session.id;
    const kernelState = async () => {
      const r = await client.get('/notebooks', { signal });
      note(`GET /notebooks: ${r.text}`);
      const entry = r
        .json<{ notebooks: { sessionId: string; kernelState: string | null }[] }>()
        .notebooks.find((n) => n.sessionId === sid);
      return entry?.kernelState;
    };
    const cells = async () => {
      const r = await client.get(`/notebooks/cells?notebook=${sid}&outputs=none`, { signal });
      eq(r.status, 200, `list (${show(r.text, 300)})`);
      return r.json<{ cells: Cell[] }>().cells;
    };

    eq(await kernelState(), 'idle', 'the builtin kernel started with the open, and runs nothing');
    const loaded = (await cells()).filter((c) => c.kind === 'code');
    deepEq(
      loaded.map((c) => [c.execution?.order, c.execution?.inKernel, c.execution?.savedOrder, c.execution?.status]),
      [
        [null, false, 3, 'idle'],
        [null, false, 4, 'idle'],
        [null, false, undefined, 'idle'],
      ],
      'counts loaded from the file are shown as saved, not as runs',
    );

    // Inserts before the cells: an index in a traceback would now be wrong.
    const inserted = await client.post(
      '/notebooks/edits',
      {
        notebook: sid,
        ops: [
          { op: 'create', index: 0, code: 'import math' },
          { op: 'create', index: 0, kind: 'markup', code: '## Added' },
        ],
      },
      { signal },
    );
    eq(inserted.status, 200, `insert two cells (${show(inserted.text, 300)})`);
    const ran = await client.post(
      '/notebooks/run',
      { notebook: sid, all: true, onError: 'continue', wait: true, timeoutMs: 60_000 },
      { signal, timeoutMs: 65_000 },
    );
    eq(ran.status, 200, `run all (${show(ran.text, 300)})`);
    eq(await kernelState(), 'idle', 'the kernel is idle after the runs');
    const after = (await cells()).filter((c) => c.kind === 'code');
    ok(
      after.every(
        (c) => c.execution?.inKernel === true && typeof c.execution.order === 'number' && c.execution.savedOrder === undefined,
      ),
      `every code cell ran in this kernel: ${show(after.map((c) => c.execution))}`,
    );
    const [, def, , failing] = after;
    const defCount = def!.execution!.order!;
    const failCount = failing!.execution!.order!;

    const saved = await client.post('/notebooks/save', { notebook: sid }, { signal });
    eq(saved.status, 200, `save (${show(saved.text, 300)})`);
    const text = fs.readFileSync(file, 'utf8');
    const nb = JSON.parse(text) as { nbformat: number; nbformat_minor: number; cells: SavedCell[] };
    deepEq([nb.nbformat, nb.nbformat_minor], [4, 4], 'the file stays nbformat 4.4 (as VS Code and nbformat keep it)');
    deepEq(nb.cells.filter((c) => 'id' in c).length, 0, 'no cell of the 4.4 file got an id');
    for (const c of after) ok(!text.includes(c.id), `the saved file never mentions the bridge's id ${c.id}`);
    const savedFailing = nb.cells.find((c) => joined(c.source) === 'ratio(1, 0)')!;
    eq(savedFailing.execution_count, failCount, 'the file saves the count the answer gave');
    const traceback = joined(savedFailing.outputs?.find((o) => o.output_type === 'error')?.traceback);
    note(`saved traceback: ${show(traceback, 800)}`);
    match(traceback, new RegExp(`Cell In ?\\[${failCount}\\], line 1`), 'the traceback names the failing cell by its count');
    match(traceback, new RegExp(`Cell In ?\\[${defCount}\\], line 2, in ratio`), 'and the cell that defined ratio by its count');
    ok(!/cell id|index \d/.test(traceback), 'no id or index in the traceback');

    // The audit log is appended after the answer is sent, so its line may lag the answer a little.
    const lastAuditLine = () => auditLines(sandbox.dirs.userData).at(-1) ?? '';
    let audit = lastAuditLine();
    for (let tries = 0; tries < 50 && !audit.includes('"kind":"save"'); tries++) {
      await sleep(200);
      audit = lastAuditLine();
    }
    note(`audit: ${show(audit, 600)}`);
    includes(audit, '"kind":"save","action":"notebook save"', 'the save is logged as a save');

    const restarted = await client.post('/notebooks/restart', { notebook: sid }, { signal, timeoutMs: 30_000 });
    eq(restarted.status, 200, `restart (${show(restarted.text, 300)})`);
    const fresh = (await cells()).filter((c) => c.kind === 'code');
    deepEq(
      fresh.map((c) => [c.execution?.order, c.execution?.inKernel, c.execution?.savedOrder]),
      after.map((c) => [null, false, c.execution!.order]),
      'after a restart no cell has run in the kernel; the counts are shown as saved',
    );
  }).timeout(180_000);
}

/**
 * Save, run many, clear outputs, metadata and tags, ids from the file, run states and the
 * limits of /notebooks/open, inside a real VS Code with the builtin kernel, over real HTTP.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { HttpResult } from '../../sandbox-test/http';
import { sleep } from '../../src/core/sleep';
import { poll, useBridge } from './support';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are read loosely
type Json = any;

describe('agent verbs in VS Code', function () {
  this.timeout(90_000);
  const bridge = useBridge('verbs-it');

  const call = (method: string, route: string, json?: unknown, timeoutMs = 60_000): Promise<HttpResult> =>
    bridge.client.request({ method, path: route, ...(json === undefined ? {} : { json }), timeoutMs });
  const cellsOf = async (session: string): Promise<Json[]> => {
    const res = await call('GET', `/notebooks/cells?notebook=${session}`);
    assert.equal(res.status, 200, res.text);
    return res.json().cells;
  };
  const fileCells = (doc: vscode.NotebookDocument): Json[] => JSON.parse(fs.readFileSync(doc.uri.fsPath, 'utf8')).cells;

  it("uses the file's nbformat cell ids, writes new cells' ids into the file, and saves", async () => {
    const { doc, session } = await bridge.openNotebook(['a = 1', 'b = 2']);
    assert.deepEqual(
      (await cellsOf(session)).map((c) => c.id),
      ['it0', 'it1'],
    );
    const created = await call('POST', '/notebooks/cells', { notebook: session, code: 'c = 3', tags: ['parameters'] });
    assert.equal(created.status, 201, created.text);
    const id = created.json().cell.id as string;
    assert.deepEqual(created.json().cell.tags, ['parameters']);
    assert.equal(doc.isDirty, true);
    const saved = await call('POST', '/notebooks/save', { notebook: session });
    assert.deepEqual(saved.json(), { saved: [{ sessionId: session, path: doc.uri.fsPath, saved: true }] });
    assert.equal(doc.isDirty, false);
    const onDisk = fileCells(doc);
    assert.deepEqual(
      onDisk.map((c) => [c.id, [c.source].flat().join(''), c.metadata.tags]),
      [
        ['it0', 'a = 1', undefined],
        ['it1', 'b = 2', undefined],
        [id, 'c = 3', ['parameters']],
      ],
    );
  });

  it('keeps ids and versions when the file is edited on disk and VS Code reloads it', async () => {
    const { doc, session } = await bridge.openNotebook(['a = 1', 'b = 2', 'c = 3']);
    const before = await cellsOf(session);
    const json = JSON.parse(fs.readFileSync(doc.uri.fsPath, 'utf8'));
    json.cells[1].source = 'b = 20';
    fs.writeFileSync(doc.uri.fsPath, JSON.stringify(json));
    await poll('VS Code to reload the notebook', 20_000, () =>
      doc.cellAt(1).document.getText() === 'b = 20' ? true : undefined,
    );
    const after = await cellsOf(session);
    assert.deepEqual(
      after.map((c) => c.id),
      before.map((c) => c.id),
    );
    assert.equal(after[0].version, before[0].version, 'unchanged text, unchanged version');
    assert.ok(after[1].version > before[1].version, 'changed text, new version');
    // The old ids still address the cells.
    assert.equal((await call('GET', `/notebooks/cells/${before[2].id}?notebook=${session}`)).json().cell.code, 'c = 3');
  });

  it('writes tags and metadata in place (same cell, same version) and they reach the file', async () => {
    const { doc, session } = await bridge.openNotebook(['x = 1']);
    const [cell] = await cellsOf(session);
    const cellObject = doc.cellAt(0);
    const res = await call('PATCH', `/notebooks/cells/${cell.id}`, { notebook: session, tags: ['slow'] });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual([res.json().cell.tags, res.json().cell.version], [['slow'], cell.version]);
    assert.equal(doc.cellAt(0), cellObject, 'the cell was updated, not re-created');
    const batch = await call('POST', '/notebooks/edits', {
      notebook: session,
      ops: [{ op: 'edit', ref: cell.id, metadata: { papermill: { parameters: true } } }],
    });
    assert.equal(batch.status, 200, batch.text);
    assert.equal((await call('POST', '/notebooks/save', { notebook: session })).status, 200);
    assert.deepEqual(fileCells(doc)[0].metadata, { papermill: { parameters: true } });
  });

  it('answers runs before the editor shows them; a move, tags and a save right after still carry them', async () => {
    const { doc, session } = await bridge.openNotebook(['print("same")', 'y = 2']);
    const [first] = await cellsOf(session);
    // Each stream reports its own print, though every run prints what the last one left.
    for (let k = 0; k < 3; k++) {
      const streamed = await bridge.client.stream({
        method: 'POST',
        path: `/notebooks/cells/${first.id}/run`,
        json: { notebook: session },
        headers: { accept: 'text/event-stream' },
        timeoutMs: 30_000,
      }).result;
      const stdout = streamed.events.filter((e) => e.event === 'stdout').map((e) => e.data.data);
      assert.deepEqual([stdout.join(''), streamed.events.at(-1)?.event], ['same\n', 'done'], streamed.raw);
    }
    // Run, then at once: move the cell (a copy of it), tag it and save, before the editor caught up.
    const ran = await call('POST', `/notebooks/cells/${first.id}/run`, { notebook: session, wait: true });
    assert.equal(ran.json().cell.execution.order, 4, ran.text);
    const moved = await call('POST', '/notebooks/edits', {
      notebook: session,
      ops: [
        { op: 'move', ref: first.id, to: 1 },
        { op: 'edit', ref: first.id, tags: ['moved'] },
      ],
    });
    assert.equal(moved.status, 200, moved.text);
    assert.equal((await call('POST', '/notebooks/save', { notebook: session })).status, 200);
    const saved = fileCells(doc)[1];
    assert.deepEqual(
      [saved.id, saved.execution_count, saved.metadata.tags, saved.outputs.map((o: Json) => [o.text].flat().join(''))],
      [first.id, 4, ['moved'], ['same\n']],
      JSON.stringify(saved),
    );
    const [, cell] = await cellsOf(session);
    assert.deepEqual([cell.id, cell.execution.status, cell.execution.order], [first.id, 'succeeded', 4]);
  });

  it('runs all cells in order, stops at the first error or goes on, and reports states', async () => {
    const { doc, session } = await bridge.openNotebook(['x = 1', 'print(x)', 'raise ValueError("no")', 'print("after")']);
    const stop = await call('POST', '/notebooks/run', { notebook: session, all: true, wait: true });
    assert.equal(stop.status, 200, stop.text);
    const body = stop.json();
    assert.deepEqual(
      body.runs.map((r: Json) => [r.cell.index, r.status, r.success]),
      [
        [0, 'succeeded', true],
        [1, 'succeeded', true],
        [2, 'failed', false],
      ],
    );
    assert.equal(body.status, 'failed');
    assert.equal(body.skipped.length, 1);
    assert.equal((await cellsOf(session))[3].execution.status, 'idle');
    // The editor, once it caught up, shows the skipped cell as never run (no count, no end), and so does the bridge.
    await poll('the editor to show the failure', 10_000, () => doc.cellAt(2).executionSummary?.success === false || undefined);
    await sleep(500);
    const skipped = doc.cellAt(3).executionSummary;
    assert.deepEqual([skipped?.executionOrder, skipped?.success, skipped?.timing], [undefined, undefined, undefined]);
    assert.deepEqual(
      (await cellsOf(session)).map((c) => [c.execution.status, c.execution.order === null]),
      [
        ['succeeded', false],
        ['succeeded', false],
        ['failed', false],
        ['idle', true],
      ],
    );
    const go = await call('POST', '/notebooks/run', { notebook: session, all: true, onError: 'continue', wait: true });
    assert.deepEqual(
      go.json().runs.map((r: Json) => r.status),
      ['succeeded', 'succeeded', 'failed', 'succeeded'],
    );
    assert.equal(go.json().runs[3].cell.outputs[0].items[0].text, 'after\n');
    const cleared = await call('POST', '/notebooks/clear-outputs', { notebook: session, range: { start: 1, end: 4 } });
    assert.equal(cleared.status, 200, cleared.text);
    const cells = await cellsOf(session);
    assert.deepEqual(
      cells.map((c) => [c.outputs.length, c.execution.status]),
      [
        [0, 'succeeded'],
        [0, 'idle'],
        [0, 'idle'],
        [0, 'idle'],
      ],
    );
  });

  it('reports an interrupted run as interrupted with success false, never null', async () => {
    const { session } = await bridge.openNotebook(['import time\ntime.sleep(30)']);
    const [cell] = await cellsOf(session);
    assert.equal((await call('POST', `/notebooks/cells/${cell.id}/run`, { notebook: session })).status, 202);
    await poll('the cell to run', 20_000, async () =>
      (await cellsOf(session))[0].execution.status === 'running' ? true : undefined,
    );
    const interrupt = await call('POST', '/notebooks/interrupt', { notebook: session });
    assert.equal(interrupt.status, 200);
    const ended = await poll('the cell to end', 20_000, async () => {
      const c = (await cellsOf(session))[0];
      return c.execution.status === 'running' || c.execution.status === 'queued' ? undefined : c;
    });
    assert.deepEqual([ended.execution.status, ended.execution.success], ['interrupted', false], interrupt.text);
  });

  it('a save that conflicts with a newer file on disk fails with a clear detail; nothing is lost', async () => {
    // code-server saves after a delay by default; desktop VS Code does not (the case that matters).
    const files = vscode.workspace.getConfiguration('files');
    const autoSave = files.inspect('autoSave')?.globalValue;
    await files.update('autoSave', 'off', vscode.ConfigurationTarget.Global);
    try {
      await conflictingSave();
    } finally {
      await files.update('autoSave', autoSave, vscode.ConfigurationTarget.Global);
    }
  });

  async function conflictingSave(): Promise<void> {
    const { doc, session } = await bridge.openNotebook(['a = 1']);
    await call('POST', '/notebooks/cells', { notebook: session, code: 'b = 2' });
    assert.equal(doc.isDirty, true);
    // Someone else writes the file meanwhile (VS Code keeps the dirty editor's version).
    await sleep(1100);
    const json = JSON.parse(fs.readFileSync(doc.uri.fsPath, 'utf8'));
    json.cells[0].source = 'a = 100';
    fs.writeFileSync(doc.uri.fsPath, JSON.stringify(json));
    await sleep(1500);
    const state = `dirty ${doc.isDirty}, ${doc.cellCount} cells: ${doc.getCells().map((c) => c.document.getText())}`;
    const res = await call('POST', '/notebooks/save', { notebook: session });
    assert.equal(res.status, 409, `${res.text} (before the save: ${state})`);
    assert.match(res.json().detail, /changed on disk/);
    assert.equal(doc.cellCount, 2, "the editor keeps the agent's cell");
    assert.equal(fileCells(doc)[0].source, 'a = 100', 'the file was not overwritten');
  }

  it('opens notebooks only inside the workspace; outside, the same answer whether the file exists or not', async () => {
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'verbs-outside-'));
    const real = path.join(outside, 'secret.ipynb');
    fs.writeFileSync(real, 'not a notebook: private text');
    const answers = [];
    for (const file of [real, path.join(outside, 'missing.ipynb')]) {
      const res = await call('POST', '/notebooks/open', { path: file });
      answers.push([res.status, res.json().detail.replace(file, '<path>')]);
      assert.ok(!res.text.includes('private text'));
    }
    assert.equal(answers[0]![0], 403);
    assert.deepEqual(answers[0], answers[1]);
    // Inside the workspace, a file that is not a notebook: 404 without its content.
    const folder = vscode.workspace.workspaceFolders![0]!.uri.fsPath;
    const junk = path.join(folder, `verbs-junk-${process.pid}.ipynb`);
    fs.writeFileSync(junk, 'private text, not JSON');
    const res = await call('POST', '/notebooks/open', { path: junk });
    assert.equal(res.status, 404, res.text);
    assert.ok(!res.text.includes('private text'), res.text);
    fs.rmSync(outside, { recursive: true, force: true });
  });
});

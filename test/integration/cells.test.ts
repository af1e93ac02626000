/**
 * The cell routes inside a real VS Code, over real HTTP: a fresh .ipynb per test, opened with the
 * builtin kernel through POST /notebooks/open; the person is simulated with WorkspaceEdits applied
 * through the VS Code API (not through the bridge).
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import type { HttpResult } from '../../sandbox-test/http';
import { sleep } from '../../src/core/sleep';
import { contents, personStops, personTypes, poll, saveNow, useBridge } from './support';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are read loosely
type Json = any;

describe('cell routes in VS Code', function () {
  this.timeout(60_000);
  const bridge = useBridge('cells-it');
  const { openNotebook } = bridge;

  const call = (method: string, route: string, json?: unknown, timeoutMs = 45_000): Promise<HttpResult> =>
    bridge.client.request({ method, path: route, ...(json === undefined ? {} : { json }), timeoutMs });
  const cellsOf = async (session: string): Promise<Json[]> => {
    const res = await call('GET', `/notebooks/cells?notebook=${session}`);
    assert.equal(res.status, 200, res.text);
    return res.json().cells;
  };

  it('lists the notebook with its kernel, and cells with ids, kinds and versions', async () => {
    const { doc, session } = await openNotebook([
      { kind: 'code', source: 'a = 1' },
      { kind: 'markdown', source: '# Notes' },
    ]);
    const list = (await call('GET', '/notebooks')).json().notebooks as Json[];
    const entry = list.find((n) => n.sessionId === session);
    assert.deepEqual(
      [entry.path, entry.kernel, entry.cellCount, entry.notebookType],
      [doc.uri.fsPath, 'builtin', 2, 'jupyter-notebook'],
    );
    const cells = await cellsOf(session);
    assert.deepEqual(
      cells.map((c) => [c.index, c.kind, c.language, c.code]),
      [
        [0, 'code', 'python', 'a = 1'],
        [1, 'markup', 'markdown', '# Notes'],
      ],
    );
    assert.equal(cells[0].id, 'it0', "the file's nbformat cell id");
  });

  it('keeps ids stable across inserts, deletes and moves, by the bridge and by the person', async () => {
    const { doc, session } = await openNotebook([
      { kind: 'code', source: 'a = 1' },
      { kind: 'code', source: 'b = 2' },
      { kind: 'code', source: 'c = 3' },
    ]);
    const [a, b, c] = (await cellsOf(session)).map((x) => x.id as string);
    const created = await call('POST', '/notebooks/cells', { notebook: session, code: 'first = 0', index: 0 });
    assert.equal(created.status, 201, created.text);
    assert.equal((await call('DELETE', `/notebooks/cells/${b}?notebook=${session}`)).status, 200);
    // The person inserts a cell above everything.
    const edit = new vscode.WorkspaceEdit();
    edit.set(doc.uri, [
      vscode.NotebookEdit.insertCells(0, [new vscode.NotebookCellData(vscode.NotebookCellKind.Code, '# person', 'python')]),
    ]);
    assert.equal(await vscode.workspace.applyEdit(edit), true);
    let cells = await cellsOf(session);
    assert.deepEqual(
      cells.map((x) => [x.id === a || x.id === c ? x.id : 'other', x.code]),
      [
        ['other', '# person'],
        ['other', 'first = 0'],
        [a, 'a = 1'],
        [c, 'c = 3'],
      ],
    );
    assert.equal(cells[1].id, created.json().cell.id);
    const moved = await call('POST', `/notebooks/cells/${c}/move`, { notebook: session, to: 0 });
    assert.equal(moved.status, 200, moved.text);
    cells = await cellsOf(session);
    assert.deepEqual([cells[0].id, cells[0].code, cells[3].id], [c, 'c = 3', a]);
    assert.equal(doc.cellAt(0).document.getText(), 'c = 3');
  });

  it('refuses with 409 an edit of a cell the person changed since it was read', async () => {
    const { doc, session } = await openNotebook([{ kind: 'code', source: 'x = 1' }]);
    const [cell] = await cellsOf(session);
    await personTypes(doc, 0, 'x = 100  # typed by the person');
    const res = await call('PATCH', `/notebooks/cells/${cell.id}`, { notebook: session, code: 'x = 2' });
    assert.equal(res.status, 409, res.text);
    const body = res.json();
    assert.match(body.detail, /changed since you read it/);
    assert.equal(body.cell.code, 'x = 100  # typed by the person');
    assert.ok(body.cell.version > cell.version);
    assert.equal(doc.cellAt(0).document.getText(), 'x = 100  # typed by the person');
    // Having read it again, the agent may write, once the person has stopped typing in it.
    await cellsOf(session);
    const typing = await call('PATCH', `/notebooks/cells/${cell.id}`, { notebook: session, code: 'x = 2' });
    assert.equal(typing.status, 409, typing.text);
    assert.match(typing.json<{ detail: string }>().detail, /the person is editing this cell right now/);
    await personStops(bridge.client, session);
    const ok = await call('PATCH', `/notebooks/cells/${cell.id}`, { notebook: session, code: 'x = 2' });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(doc.cellAt(0).document.getText(), 'x = 2');
    assert.equal(ok.json().cell.version, body.cell.version + 1);
  });

  it('leaves the notebook byte-identical when the last op of a batch is invalid', async () => {
    const { doc, session } = await openNotebook([
      { kind: 'code', source: 'a = 1' },
      { kind: 'markdown', source: '# Notes' },
      { kind: 'code', source: 'b = 2' },
    ]);
    await saveNow(doc);
    const file = fs.readFileSync(doc.uri.fsPath);
    const [a, notes] = await cellsOf(session);
    const before = { version: doc.version, contents: contents(doc) };
    for (const last of [
      { op: 'delete', ref: 7 },
      { op: 'edit', ref: notes.id, code: 'x', version: 99 },
      { op: 'move', ref: a.id, to: 4 },
    ]) {
      const res = await call('POST', '/notebooks/edits', {
        notebook: session,
        ops: [
          { op: 'create', code: 'new = 1', index: 0 },
          { op: 'edit', ref: a.id, code: 'a = 10' },
          { op: 'move', ref: notes.id, to: 0 },
          last,
        ],
      });
      assert.ok([400, 404, 409].includes(res.status), `${JSON.stringify(last)}: ${res.status} ${res.text}`);
      assert.equal(doc.version, before.version, 'the notebook changed');
      assert.equal(contents(doc), before.contents);
      assert.equal(doc.isDirty, false);
    }
    await saveNow(doc);
    assert.ok(fs.readFileSync(doc.uri.fsPath).equals(file), 'the file on disk changed');
  });

  it('applies a valid batch as one edit that one undo reverts', async () => {
    const { doc, session } = await openNotebook([
      { kind: 'code', source: 'a = 1' },
      { kind: 'markdown', source: '# Notes' },
      { kind: 'code', source: 'b = 2' },
      { kind: 'code', source: 'c = 3' },
    ]);
    const editor = await vscode.window.showNotebookDocument(doc, { preserveFocus: false });
    const [a, notes, b, c] = await cellsOf(session);
    const before = contents(doc);
    const res = await call('POST', '/notebooks/edits', {
      notebook: session,
      ops: [
        { op: 'create', code: 'import math', index: 0 },
        { op: 'edit', ref: a.id, code: 'a = math.pi' },
        { op: 'delete', ref: b.id },
        { op: 'move', ref: c.id, to: 0 },
        { op: 'edit', ref: notes.id, code: '# Notes, edited' },
      ],
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      doc.getCells().map((x) => x.document.getText()),
      ['c = 3', 'import math', 'a = math.pi', '# Notes, edited'],
    );
    assert.deepEqual(
      (await cellsOf(session)).map((x) => x.id).filter((id: string) => [a.id, notes.id, c.id].includes(id)),
      [c.id, a.id, notes.id],
    );

    assert.equal(vscode.window.activeNotebookEditor, editor, 'the notebook editor is not active');
    await vscode.commands.executeCommand('undo');
    await poll('the undo', 5_000, () => (contents(doc) === before ? true : undefined)).catch(() => undefined);
    assert.deepEqual(
      doc.getCells().map((x) => x.document.getText()),
      ['a = 1', '# Notes', 'b = 2', 'c = 3'],
    );
    assert.equal(contents(doc), before);
  });

  it('runs a cell and waits for the output of print', async () => {
    const { session } = await openNotebook([{ kind: 'code', source: 'print("hello from", 6 * 7)' }]);
    const res = await call('POST', '/notebooks/cells/0/run', { notebook: session, wait: true });
    assert.equal(res.status, 200, res.text);
    const body = res.json();
    assert.equal(body.success, true);
    assert.deepEqual(
      body.cell.outputs.flatMap((o: Json) => o.items.map((i: Json) => [i.type, i.text])),
      [['stdout', 'hello from 42\n']],
    );
    assert.equal(body.cell.execution.status, 'succeeded');
    assert.equal(typeof body.cell.execution.order, 'number');
  });

  it('answers a run when the kernel is done; reads and a save right after agree with the answer', async () => {
    const { doc, session } = await openNotebook([{ kind: 'code', source: 'n = globals().get("n", 0) + 1\nprint(n)\nn' }]);
    for (const n of [1, 2, 3]) {
      const res = await call('POST', '/notebooks/cells/0/run', { notebook: session, wait: true });
      assert.equal(res.status, 200, res.text);
      const answered = res.json().cell;
      assert.deepEqual(
        answered.outputs.flatMap((o: Json) => o.items.map((i: Json) => i.text)),
        [`${n}\n`, `${n}`],
      );
      assert.equal(answered.execution.status, 'succeeded');
      const [read] = await cellsOf(session);
      assert.deepEqual([read.outputs, read.execution], [answered.outputs, answered.execution], 'a read right after the run');
    }
    // The person saves at once: the file has the last run's outputs and count.
    await saveNow(doc);
    const saved = JSON.parse(fs.readFileSync(doc.uri.fsPath, 'utf8')).cells[0];
    assert.equal(saved.execution_count, 3, JSON.stringify(saved));
    assert.deepEqual(
      saved.outputs.map((o: Json) => o.output_type),
      ['stream', 'execute_result'],
    );
    const [cell] = await cellsOf(session);
    assert.deepEqual(
      [cell.execution.order, cell.execution.status, doc.cellAt(0).executionSummary?.executionOrder],
      [3, 'succeeded', 3],
    );
  });

  it('a run of a cell already running waits for that run, as the Run button skips it', async () => {
    const { session } = await openNotebook([
      { kind: 'code', source: 'import time\nm = globals().get("m", 0) + 1\ntime.sleep(0.5)\nprint(m)' },
      { kind: 'code', source: 'm' },
    ]);
    assert.equal((await call('POST', '/notebooks/cells/0/run', { notebook: session })).status, 202);
    const again = await call('POST', '/notebooks/cells/0/run', { notebook: session, wait: true });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json().cell.outputs[0].items[0].text, '1\n');
    const m = await call('POST', '/notebooks/cells/1/run', { notebook: session, wait: true });
    assert.equal(m.json().cell.outputs[0].items[0].text, '1', 'the cell ran once');
  });

  it("keeps the id of a cell the person moves with the editor's own command", async () => {
    const { doc, session } = await openNotebook([
      { kind: 'code', source: 'a = 1' },
      { kind: 'code', source: 'b = 2' },
    ]);
    const [a, b] = await cellsOf(session);
    const editor = await vscode.window.showNotebookDocument(doc, {
      preserveFocus: false,
      selections: [new vscode.NotebookRange(0, 1)],
    });
    assert.equal(vscode.window.activeNotebookEditor, editor);
    await vscode.commands.executeCommand('notebook.cell.moveDown');
    await poll('the move', 5_000, () => (doc.cellAt(1).document.getText() === 'a = 1' ? true : undefined));
    const cells = await cellsOf(session);
    assert.deepEqual(
      cells.map((c) => [c.id, c.code]),
      [
        [b.id, 'b = 2'],
        [a.id, 'a = 1'],
      ],
    );
  });

  it('shows a cell as idle after the person clears outputs (not as queued)', async () => {
    const { doc, session } = await openNotebook([{ kind: 'code', source: 'print(1)' }]);
    assert.equal((await call('POST', '/notebooks/cells/0/run', { notebook: session, wait: true })).status, 200);
    await vscode.window.showNotebookDocument(doc, { preserveFocus: false });
    await vscode.commands.executeCommand('notebook.clearAllCellsOutputs');
    await poll('cleared outputs', 5_000, () => (doc.cellAt(0).outputs.length === 0 ? true : undefined));
    await sleep(200);
    const [cell] = await cellsOf(session);
    assert.deepEqual([cell.outputs, cell.execution.status], [[], 'idle']);
    const again = await call('POST', '/notebooks/cells/0/run', { notebook: session, wait: true });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.json().cell.outputs[0].items[0].text, '1\n');
  });

  it('runs a cell that raises and returns the error with success false', async () => {
    const { session } = await openNotebook([{ kind: 'code', source: 'print("start")\n{}["missing"]' }]);
    const res = await call('POST', '/notebooks/cells/0/run?wait=true', { notebook: session, outputs: 'full' });
    assert.equal(res.status, 200, res.text);
    const body = res.json();
    assert.equal(body.success, false);
    const items = body.cell.outputs.flatMap((o: Json) => o.items);
    assert.deepEqual(items[0], { type: 'stdout', text: 'start\n', bytes: 6 });
    const error = items.find((i: Json) => i.type === 'error');
    assert.ok(error, JSON.stringify(items));
    assert.equal(error.name, 'KeyError');
    assert.match(error.traceback, /KeyError/);
  });

  it('waits again for a second run of the same cell, and times out with 504 without interrupting', async () => {
    const { doc, session } = await openNotebook([
      { kind: 'code', source: 'import time\nn = globals().get("n", 0) + 1\ntime.sleep(0.1 if n < 3 else 1.5)\nprint(n)' },
    ]);
    for (const n of [1, 2]) {
      const res = await call('POST', '/notebooks/cells/0/run', { notebook: session, wait: true });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().cell.outputs[0].items[0].text, `${n}\n`);
    }
    const slow = await call('POST', '/notebooks/cells/0/run', { notebook: session, wait: true, timeoutMs: 300 });
    assert.equal(slow.status, 504, slow.text);
    assert.ok(['queued', 'running'].includes(slow.json().cell.execution.status), slow.text);
    // Not interrupted: the run completes and prints 3, and the editor shows it.
    const cell = await poll('the run to finish', 10_000, async () => {
      const [now] = await cellsOf(session);
      return now.execution.status === 'succeeded' ? now : undefined;
    });
    assert.equal(cell.outputs[0].items[0].text, '3\n');
    await poll('the editor to show it', 10_000, () =>
      doc.cellAt(0).executionSummary?.executionOrder === cell.execution.order ? true : undefined,
    );
  });

  it('interrupts a running cell, and restarts the builtin kernel', async () => {
    const { doc, session } = await openNotebook([
      { kind: 'code', source: 'kept = 1' },
      { kind: 'code', source: 'import time\ntime.sleep(30)' },
      { kind: 'code', source: 'print(kept)' },
    ]);
    assert.equal((await call('POST', '/notebooks/cells/0/run', { notebook: session, wait: true })).status, 200);
    const queued = await call('POST', '/notebooks/cells/1/run', { notebook: session });
    assert.equal(queued.status, 202, queued.text);
    await poll('the cell to run', 10_000, async () =>
      (await cellsOf(session))[1].execution.status === 'running' ? true : undefined,
    );
    const interrupt = await call('POST', '/notebooks/interrupt', { notebook: session });
    assert.equal(interrupt.status, 200);
    // The cell sleeps 30 s: an end before that is the interrupt's.
    await poll('the interrupted run to end', 20_000, () => (doc.cellAt(1).executionSummary?.timing ? true : undefined));
    // The builtin kernel ends an interrupted run as cancelled: no success either way.
    assert.notEqual(doc.cellAt(1).executionSummary?.success, true);
    const [, interrupted] = await cellsOf(session);
    assert.deepEqual(
      [interrupted.execution.status, interrupted.execution.success, interrupted.execution.inKernel],
      ['interrupted', false, true],
      interrupt.text,
    );

    assert.deepEqual((await call('POST', '/notebooks/restart', { notebook: session })).json(), { restarted: true });
    const after = await call('POST', '/notebooks/cells/2/run', { notebook: session, wait: true });
    assert.equal(after.json().success, false);
    assert.match(JSON.stringify(after.json().cell.outputs), /NameError/);
  });

  it('streams a run as server-sent events', async () => {
    const { session } = await openNotebook([
      { kind: 'code', source: 'import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.05)' },
    ]);
    const stream = bridge.client.stream({
      method: 'POST',
      path: '/notebooks/cells/0/run',
      json: { notebook: session },
      headers: { accept: 'text/event-stream' },
      timeoutMs: 30_000,
    });
    const result = await stream.result;
    assert.equal(result.status, 200);
    assert.deepEqual(result.framingErrors, []);
    const names = result.events.map((e) => e.event);
    assert.equal(names.at(-1), 'done', result.raw);
    assert.equal(result.events.at(-1)!.data.success, true);
    assert.equal(
      result.events
        .filter((e) => e.event === 'stdout')
        .map((e) => e.data.data)
        .join(''),
      '0\n1\n2\n',
    );
  });
});

/**
 * Code mode inside a real VS Code, end to end over HTTP: scratchpad runs (POST /api/kernel/execute)
 * that import `agent_bridge` and change and run the notebook's cells through the builtin kernel.
 * The person is simulated with WorkspaceEdits and commands through the VS Code API.
 */
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import type { SseResult } from '../../sandbox-test/http';
import { contents, personStops, personTypes, poll, useBridge } from './support';

const texts = (doc: vscode.NotebookDocument) => doc.getCells().map((c) => c.document.getText());
const stdoutOf = (cell: vscode.NotebookCell) =>
  cell.outputs
    .flatMap((o) => o.items)
    .filter((i) => i.mime === 'application/vnd.code.notebook.stdout')
    .map((i) => Buffer.from(i.data).toString('utf8'))
    .join('');

describe('code mode (agent_bridge) in VS Code', function () {
  this.timeout(60_000);
  const bridge = useBridge('code-mode-it');
  const { openNotebook } = bridge;

  const execute = async (session: string, ...lines: string[]): Promise<SseResult> => {
    const r = await bridge.client.run(session, lines.join('\n'), { timeoutMs: 45_000 });
    assert.equal(r.status, 200, r.raw);
    assert.ok(r.done, `no done event: ${r.raw}`);
    return r;
  };
  const done = (r: SseResult) => r.done!.data as { success: boolean; output: { mimetype: string; data: string } };

  it('creates and runs cells from one scratchpad call; a later call reads what they defined', async () => {
    const { doc, session } = await openNotebook(['a = 20']);
    const r = await execute(
      session,
      'import agent_bridge as cm',
      'async with cm.get_context() as ctx:',
      '    first = ctx.cells[0]',
      '    new = ctx.create_cell("b = a + 22\\nprint(\'b is\', b)", after=first.id)',
      '    ctx.run_cell(first.id)',
      '    ctx.run_cell(new)',
      'ctx.globals["b"]',
    );
    assert.equal(done(r).success, true, r.stderr);
    assert.equal(done(r).output.data, '42');
    assert.deepEqual(texts(doc), ['a = 20', "b = a + 22\nprint('b is', b)"]);
    const ids = (await bridge.client.get(`/notebooks/cells?notebook=${session}`)).json().cells.map((c: { id: string }) => c.id);
    assert.equal(r.stdout, `b is 42\ncreated cell '${ids[1]}' and ran\nran cell '${ids[0]}'\n`);
    // The answer comes when the kernel is done; the editor shows the runs a moment later.
    await poll(
      'the editor to show the new cell its own output',
      10_000,
      () => stdoutOf(doc.cellAt(1)) === 'b is 42\n' || undefined,
    );
    assert.equal(doc.cellAt(1).executionSummary?.success, true);

    const later = await execute(session, 'b * 2');
    assert.equal(done(later).output.data, '84', 'b lives in the kernel');
    assert.equal(done(await execute(session, 'import agent_bridge')).success, true, 'importable in scratchpads');
  });

  it('rejects a block with a syntax error and leaves the notebook unchanged', async () => {
    const { doc, session } = await openNotebook(['x = 1', 'y = 2']);
    const before = contents(doc);
    const r = await execute(
      session,
      'import agent_bridge as cm',
      'async with cm.get_context() as ctx:',
      '    ctx.cells[0]',
      '    ctx.edit_cell(0, "x = 10")',
      '    ctx.create_cell("def broken(:\\n    pass")',
      '    ctx.delete_cell(1)',
    );
    assert.equal(done(r).success, false);
    assert.match(r.stderr, /SyntaxError: invalid syntax.*nothing was changed/);
    assert.equal(contents(doc), before);
    assert.equal(doc.isDirty, false);
  });

  it('raises StaleCellError when the person edited a cell since the agent read it', async () => {
    const { doc, session } = await openNotebook(['x = 1', 'y = 2']);
    const read = await execute(
      session,
      'import agent_bridge as cm',
      'async with cm.get_context() as ctx:',
      '    c = ctx.cells[0]',
      'c.code',
    );
    assert.equal(done(read).output.data, "'x = 1'");
    await personTypes(doc, 0, 'x = 100');
    const r = await execute(
      session,
      'import agent_bridge as cm',
      'async with cm.get_context() as ctx:',
      '    ctx.edit_cell(0, "x = 2")',
      '    ctx.create_cell("z = 3")',
    );
    assert.equal(done(r).success, false);
    // `agent_bridge.StaleCellError` in plain Python's traceback, `StaleCellError` in IPython's.
    assert.match(r.stderr, /\bStaleCellError: ctx\.edit_cell\(0\): Cell [\w-]+ \(index 0\) changed since you read it/);
    assert.deepEqual(texts(doc), ['x = 100', 'y = 2'], 'nothing changed');

    await personStops(bridge.client, session); // a write to a cell the person typed in waits (presence)
    const retry = await execute(
      session,
      'import agent_bridge as cm',
      'async with cm.get_context() as ctx:',
      '    assert ctx.cells[0].code == "x = 100"',
      '    ctx.edit_cell(0, "x = 2")',
    );
    assert.equal(done(retry).success, true, retry.stderr);
    assert.deepEqual(texts(doc), ['x = 2', 'y = 2']);
  });

  it('applies a block as one edit that one undo reverts', async () => {
    const { doc, session } = await openNotebook(['a = 1', 'b = 2', 'c = 3']);
    const editor = await vscode.window.showNotebookDocument(doc, { preserveFocus: false });
    const before = contents(doc);
    const r = await execute(
      session,
      'import agent_bridge as cm',
      'async with cm.get_context() as ctx:',
      '    cells = list(ctx.cells)',
      '    ctx.edit_cell(cells[0].id, "a = 10")',
      '    ctx.delete_cell(cells[1].id)',
      '    ctx.move_cell(cells[2].id, before=cells[0].id)',
      '    first = ctx.create_cell("import math", before=cells[2].id)',
      '    ctx.create_cell("# Notes", kind="markdown", after=first)',
    );
    assert.equal(done(r).success, true, r.stderr);
    assert.deepEqual(texts(doc), ['import math', '# Notes', 'c = 3', 'a = 10']);
    assert.match(
      r.stdout,
      /^edited cell '[\w-]+'\ndeleted cell '[\w-]+'\nmoved cell '[\w-]+'\ncreated cell '[\w-]+'\ncreated cell '[\w-]+'\n$/,
    );

    assert.equal(vscode.window.activeNotebookEditor, editor, 'the notebook editor is not active');
    await vscode.commands.executeCommand('undo');
    await poll('the undo', 5_000, () => (contents(doc) === before ? true : undefined)).catch(() => undefined);
    assert.deepEqual(texts(doc), ['a = 1', 'b = 2', 'c = 3']);
    assert.equal(contents(doc), before);
  });

  it('makes the call fail when a cell it ran raises, with the traceback on stderr', async () => {
    const { doc, session } = await openNotebook(['ok = 1']);
    const r = await execute(
      session,
      'import agent_bridge as cm',
      'async with cm.get_context() as ctx:',
      "    bad = ctx.create_cell(\"print('start')\\nraise ValueError('nope')\")",
      '    ctx.run_cell(bad)',
    );
    assert.equal(done(r).success, false);
    assert.match(r.stderr, /ValueError: nope/);
    assert.match(r.stdout, /^start\ncreated cell '[\w-]+' and ran: failed with ValueError: nope\n$/);
    await poll('the editor to show the failed run', 10_000, () => doc.cellAt(1).executionSummary?.success === false || undefined);
    assert.equal(done(await execute(session, '6 * 7')).output.data, '42', 'the kernel goes on');
  });

  it('interrupts a cell it runs (POST /notebooks/interrupt), and cancels the runs queued after it', async () => {
    const { doc, session } = await openNotebook(['import time']);
    const stream = bridge.client.execute(
      session,
      [
        'import agent_bridge as cm',
        'async with cm.get_context() as ctx:',
        '    slow = ctx.create_cell("print(\'sleeping\', flush=True)\\ntime.sleep(60)")',
        '    after = ctx.create_cell("never = 1")',
        '    ctx.run_cell(0)',
        '    ctx.run_cell(slow)',
        '    ctx.run_cell(after)',
      ].join('\n'),
      { timeoutMs: 45_000 },
    );
    assert.ok(
      await stream.next((e) => e.event === 'stdout' && String((e.data as { data: string }).data).includes('sleeping'), 20_000),
    );
    const res = await bridge.client.post('/notebooks/interrupt', { notebook: session });
    assert.equal(res.status, 200, res.text);
    const r = await stream.result;
    assert.equal(done(r).success, false);
    assert.match(r.stderr, /KeyboardInterrupt/);
    assert.match(
      r.stdout,
      /^sleeping\ncreated cell '[\w-]+' and ran: failed with KeyboardInterrupt\b.*\ncreated cell '[\w-]+' and ran: cancelled\nran cell '[\w-]+'\n$/,
    );
    assert.equal(doc.cellAt(2).executionSummary?.success ?? null, null, 'the cell queued after it did not run');
    assert.equal(done(await execute(session, '"alive"')).output.data, "'alive'");
    assert.equal(done(await execute(session, '"never" in globals()')).output.data, 'False');
  });

  it('with agentBridge.codeMode.inCells on, a cell can create and run another cell', async () => {
    const config = () => vscode.workspace.getConfiguration('agentBridge');
    await config().update('codeMode.inCells', true, vscode.ConfigurationTarget.Global);
    try {
      // The setting is read when the kernel starts: a new notebook's kernel starts on its first run.
      const { doc, session } = await openNotebook([
        [
          'import agent_bridge as cm',
          'async with cm.get_context() as ctx:',
          '    made = ctx.create_cell("made_by_cell = 7")',
          '    ctx.run_cell(made)',
          'print("sees", made_by_cell)',
        ].join('\n'),
      ]);
      const res = await bridge.client.request({
        method: 'POST',
        path: '/notebooks/cells/0/run',
        json: { notebook: session, wait: true, timeoutMs: 30_000 },
        timeoutMs: 45_000,
      });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().success, true, res.text);
      assert.deepEqual(texts(doc).slice(1), ['made_by_cell = 7']);
      assert.match(
        res.json().cell.outputs[0].items[0].text,
        /created cell '[\w-]+' and ran\nsees 7\n$/,
        'the answer shows what the cell printed',
      );
      await poll('the editor to show both runs', 10_000, () =>
        doc.cellAt(1).executionSummary?.success === true && /sees 7\n$/.test(stdoutOf(doc.cellAt(0))) ? true : undefined,
      );
    } finally {
      await config().update('codeMode.inCells', undefined, vscode.ConfigurationTarget.Global);
    }
  });

  it('is not importable in ordinary cells', async () => {
    const { doc, session } = await openNotebook(['import agent_bridge']);
    const res = await bridge.client.request({
      method: 'POST',
      path: '/notebooks/cells/0/run',
      json: { notebook: session, wait: true },
      timeoutMs: 45_000,
    });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().success, false);
    const error = await poll('the editor to show the error', 10_000, () =>
      doc
        .cellAt(0)
        .outputs.flatMap((o) => o.items)
        .find((i) => i.mime === 'application/vnd.code.notebook.error'),
    );
    assert.match(Buffer.from(error.data).toString('utf8'), /scratchpad runs/);
  });
});

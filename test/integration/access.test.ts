/**
 * The person's say over agents inside a real VS Code, over real HTTP and the builtin kernel: each
 * access mode, the ask prompt answered through the workbench's notification commands, the run
 * limit, Stop Agents, the cell marks, the audit log and the session export.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { sleep } from '../../src/core/sleep';
import { personTypes, poll, useBridge } from './support';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are read loosely
type Json = any;

const access = () => vscode.workspace.getConfiguration('agentBridge.access');
const setAccess = (key: string, value: unknown) => access().update(key, value, vscode.ConfigurationTarget.Global);

describe('access modes, activity record and audit log in VS Code', function () {
  this.timeout(90_000);
  const bridge = useBridge('access-it');
  const CLIENT = { 'x-agent-bridge-client': 'access-test-agent' };

  afterEach(async () => {
    for (const key of ['mode', 'maxRunSeconds', 'askTimeoutSeconds']) await setAccess(key, undefined);
  });

  const run = (session: string, code: string, timeoutMs = 30_000) =>
    bridge.client.run(session, code, { headers: CLIENT, timeoutMs });

  it('read-only: reads answer, execute and edits get a 403 saying the person chose read-only', async () => {
    const { session } = await bridge.openNotebook(['x = 1']);
    await setAccess('mode', 'read-only');
    const cells = await bridge.client.get(`/notebooks/cells?notebook=${session}`);
    assert.equal(cells.status, 200, cells.text);
    const executed = await run(session, 'print(1)');
    assert.equal(executed.status, 403);
    assert.match(JSON.parse(executed.raw).detail, /person chose read-only/);
    const edited = await bridge.client.request({
      method: 'PATCH',
      path: `/notebooks/cells/0`,
      json: { notebook: session, code: 'x = 2', force: true },
    });
    assert.equal(edited.status, 403, edited.text);
  });

  it('off: everything but /health is refused', async () => {
    await setAccess('mode', 'off');
    assert.equal((await bridge.client.get('/health', { token: null })).status, 200);
    const sessions = await bridge.client.get('/api/sessions');
    assert.equal(sessions.status, 403);
    assert.match(sessions.json().detail, /off/);
  });

  it('ask: the run waits for the person; Allow lets it through, no answer in time refuses it', async () => {
    const { session } = await bridge.openNotebook(['y = 1']);
    await setAccess('mode', 'ask');
    await setAccess('askTimeoutSeconds', 5);
    const pending = run(session, 'print(6 * 7)');
    await sleep(1500);
    // The person clicks the notification's first button (Allow).
    await vscode.commands.executeCommand('notifications.focusFirstToast');
    await vscode.commands.executeCommand('notification.acceptPrimaryAction');
    const allowed = await pending;
    assert.equal(allowed.status, 200, allowed.raw);
    assert.equal(allowed.stdout, '42\n');
    const started = Date.now();
    const unanswered = await run(session, 'print(1)');
    assert.equal(unanswered.status, 403);
    assert.match(JSON.parse(unanswered.raw).detail, /did not answer in time/);
    assert.ok(Date.now() - started >= 4500, 'the refusal came after the ask timeout');
  });

  it('a run past the limit is interrupted and reported as timed out', async () => {
    const { session } = await bridge.openNotebook(['z = 1']);
    await setAccess('maxRunSeconds', 1);
    const result = await run(session, 'import time\nprint("start", flush=True)\ntime.sleep(60)');
    assert.equal(result.done?.data.success, false);
    assert.equal(result.done?.data.status, 'timed_out');
    assert.match(result.stderr, /limit the person set/);
    assert.ok(result.durationMs < 20_000, `took ${result.durationMs} ms`);
  });

  it('a cell run past the limit is interrupted: it ends failed, logged as timed out', async () => {
    const { doc, session } = await bridge.openNotebook(['import time\nprint("start", flush=True)\ntime.sleep(60)']);
    await setAccess('maxRunSeconds', 1);
    const started = Date.now();
    const res = await bridge.client.post(
      '/notebooks/cells/0/run',
      { notebook: session, wait: true, timeoutMs: 30_000 },
      { headers: CLIENT, timeoutMs: 40_000 },
    );
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().success, false);
    assert.equal(res.json().status, 'timed_out');
    assert.ok(Date.now() - started < 20_000, `took ${Date.now() - started} ms`);
    const file = (await vscode.commands.executeCommand<string>('agentBridge.showAuditLog'))!;
    const runs = fs
      .readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Json)
      .filter((r) => r.notebookUri === doc.uri.toString() && r.action === 'cell run');
    assert.deepEqual(
      runs.map((r) => r.outcome),
      ['timed_out'],
    );
  });

  it('a run of many past the limit is interrupted as a whole: timed out, the rest skipped', async () => {
    const { session } = await bridge.openNotebook(['import time\ntime.sleep(60)', 'after = 1']);
    await setAccess('maxRunSeconds', 1);
    const started = Date.now();
    const res = await bridge.client.post(
      '/notebooks/run',
      { notebook: session, all: true, wait: true, timeoutMs: 30_000 },
      { headers: CLIENT, timeoutMs: 40_000 },
    );
    assert.equal(res.status, 200, res.text);
    const body = res.json();
    assert.equal(body.status, 'timed_out', res.text);
    assert.match(body.detail, /limit the person set/);
    assert.equal(body.skipped.length, 1);
    assert.ok(Date.now() - started < 20_000, `took ${Date.now() - started} ms`);
  });

  it('Stop Agents interrupts a run under way and turns access off', async () => {
    const { session } = await bridge.openNotebook(['w = 1']);
    const stream = bridge.client.execute(session, 'import time\nprint("start", flush=True)\ntime.sleep(60)', {
      headers: CLIENT,
      timeoutMs: 30_000,
    });
    await poll('the run to start', 15_000, () => (stream.events.some((e) => e.event === 'stdout') ? true : undefined));
    await vscode.commands.executeCommand('agentBridge.stopAgents');
    const result = await stream.result;
    assert.equal(result.done?.data.success, false);
    assert.equal(result.done?.data.status, 'interrupted');
    assert.equal(access().get('mode'), 'off');
  });

  it("marks a cell the agent changed; the mark opens that cell's change in VS Code's notebook diff and goes when the person edits the cell", async () => {
    const { doc, session } = await bridge.openNotebook(['a = 1', 'b = 1']);
    const edited = await bridge.client.post(
      '/notebooks/edits',
      {
        notebook: session,
        ops: [
          { op: 'edit', ref: 0, code: 'a = 2', force: true },
          { op: 'edit', ref: 1, code: 'b = 2', force: true },
        ],
      },
      { headers: CLIENT },
    );
    assert.equal(edited.status, 200, edited.text);
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('agentBridge.showCellChange', doc.cellAt(0).document.uri);
    const diff = await poll('the notebook diff tab', 10_000, () => {
      const input = vscode.window.tabGroups.activeTabGroup.activeTab?.input;
      return input instanceof vscode.TabInputNotebookDiff ? input : undefined;
    });
    assert.equal(diff.notebookType, doc.notebookType);
    assert.equal(diff.modified.toString(), doc.uri.toString(), 'the right side is the notebook itself, as the agent left it');
    // The left side: the notebook now with only this cell as it was (the agent's other edit stays).
    const before = await vscode.workspace.openNotebookDocument(diff.original);
    assert.deepEqual(
      before.getCells().map((c) => c.document.getText()),
      ['a = 1', 'b = 2'],
    );
    assert.equal(vscode.workspace.fs.isWritableFileSystem(diff.original.scheme), false, 'the left side is read-only');

    await personTypes(doc, 0, 'a = 3');
    await vscode.commands.executeCommand('workbench.action.closeAllEditors');
    await vscode.commands.executeCommand('agentBridge.showCellChange', doc.cellAt(0).document.uri);
    await sleep(500);
    assert.ok(
      !(vscode.window.tabGroups.activeTabGroup.activeTab?.input instanceof vscode.TabInputNotebookDiff),
      'the mark went with the person edit',
    );
  });

  it('logs every action as JSON Lines (hash, outcome, never the token) and exports the session', async () => {
    const { doc, session } = await bridge.openNotebook(['base = 10']);
    assert.equal((await run(session, 'print(40 + 2)')).status, 200);
    const created = await bridge.client.post(
      '/notebooks/cells',
      { notebook: session, code: 'total = base * 2\nprint(total)' },
      { headers: CLIENT },
    );
    assert.equal(created.status, 201, created.text);
    // An agent that pastes the token into its code: the log must not keep it.
    const token = bridge.client.token;
    assert.ok(token);
    assert.equal((await run(session, `secret = ${JSON.stringify(token)}`)).status, 200);

    const file = (await vscode.commands.executeCommand<string>('agentBridge.showAuditLog'))!;
    const text = fs.readFileSync(file, 'utf8');
    assert.ok(!text.includes(token), 'the token is not in the audit log');
    const records = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Json)
      .filter((r) => r.notebookUri === doc.uri.toString());
    assert.deepEqual(
      records.map((r) => [r.client, r.action, r.outcome]),
      [
        ['access-test-agent (unverified)', 'scratchpad run', 'succeeded'],
        ['access-test-agent (unverified)', 'cell create', 'succeeded'],
        ['access-test-agent (unverified)', 'scratchpad run', 'succeeded'],
      ],
    );
    assert.match(records[0].sha256, /^[0-9a-f]{64}$/);
    assert.equal(records[0].code, 'print(40 + 2)');
    assert.equal(typeof records[0].durationMs, 'number');
    assert.deepEqual(
      records[1].cells.map((c: Json) => [c.before, c.after]),
      [['', 'total = base * 2\nprint(total)']],
    );

    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'access-it-'));
    const py = (await vscode.commands.executeCommand<string>(
      'agentBridge.exportSession',
      doc.uri.toString(),
      path.join(out, 's.py'),
    ))!;
    const script = fs.readFileSync(py, 'utf8');
    assert.ok(script.indexOf('print(40 + 2)') < script.indexOf('total = base * 2'), script);
    assert.ok(!script.includes(token));
    const nb = (await vscode.commands.executeCommand<string>(
      'agentBridge.exportSession',
      doc.uri.toString(),
      path.join(out, 's.ipynb'),
    ))!;
    const cells = (JSON.parse(fs.readFileSync(nb, 'utf8')) as Json).cells as Json[];
    assert.deepEqual(
      cells.map((c) => c.source.join('')),
      ['print(40 + 2)', 'total = base * 2\nprint(total)', 'secret = "[token]"'],
    );
    fs.rmSync(out, { recursive: true, force: true });

    // A save is logged as a save, not as an edit (whatever its outcome: an earlier test of this
    // suite can leave VS Code asking the person about a dirty editor, and VS Code then cancels saves).
    const saved = await bridge.client.post('/notebooks/save', { notebook: session }, { headers: CLIENT });
    await vscode.commands.executeCommand('agentBridge.showAuditLog');
    const last = JSON.parse(fs.readFileSync(file, 'utf8').trim().split('\n').at(-1)!) as Json;
    assert.deepEqual(
      [last.kind, last.action, last.outcome, last.notebookUri],
      ['save', 'notebook save', saved.status === 200 ? 'succeeded' : 'failed', doc.uri.toString()],
    );
  });
});

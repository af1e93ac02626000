/**
 * Contract test of the extension kernel adapter (src/kernels/extensionApi.ts) inside a real VS
 * Code, over real HTTP to the bridge. The marimo extension cannot be installed here, so a
 * TEST-ONLY STAND-IN for it (test/fixtures/stand-in-marimo, loaded by scripts/test-integration.ts
 * as a second development extension) takes its id and notebook type and exports the same kernels
 * API shape (protocol.md §7) with scripted outputs. What this proves is the bridge's side of that
 * contract, not the real extension's behaviour.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { BridgeClient, SseResult } from '../../sandbox-test/http';
import { connect, poll, sleep } from './support';

const STAND_IN_ID = 'marimo-team.vscode-marimo';

interface Done {
  success: boolean;
  output: { mimetype: string; data: string };
}

describe('extension kernels: marimo API shape (test-only stand-in extension)', function () {
  this.timeout(30_000);
  let client: BridgeClient;
  let folder: string;

  before(async function () {
    this.timeout(30_000);
    ({ client } = await connect());
    const standIn = vscode.extensions.getExtension(STAND_IN_ID);
    assert.ok(standIn, `the stand-in ${STAND_IN_ID} is not loaded (scripts/test-integration.ts passes it)`);
    assert.match(String(standIn.packageJSON.description), /STAND-IN/, 'not the test stand-in: refusing to run');
    await standIn.activate();
    folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? fs.mkdtempSync(path.join(os.tmpdir(), 'stand-in-marimo-'));
  });

  /** Writes a stand-in marimo notebook and opens it the way the person would. */
  async function openStandIn(name: string): Promise<vscode.NotebookDocument> {
    const file = path.join(folder, `it-${process.pid}-${name}.stand-in-marimo`);
    fs.writeFileSync(file, JSON.stringify(['x = 1']));
    const doc = await vscode.workspace.openNotebookDocument(vscode.Uri.file(file));
    assert.equal(doc.notebookType, 'marimo-notebook');
    await vscode.window.showNotebookDocument(doc, { preserveFocus: true, preview: false });
    return doc;
  }

  async function listed(): Promise<Record<string, { path: string | null }>> {
    const r = await client.get('/api/sessions', { timeoutMs: 5000 });
    assert.equal(r.status, 200, r.text);
    return r.json();
  }

  const sessionOf = async (doc: vscode.NotebookDocument) =>
    Object.entries(await listed()).find(([, s]) => s.path === doc.uri.fsPath)?.[0];

  /** The session id of any open notebook, listed or not (POST /notebooks/open answers it). */
  async function idOf(doc: vscode.NotebookDocument): Promise<string> {
    const r = await client.post('/notebooks/open', { path: doc.uri.fsPath }, { timeoutMs: 15_000 });
    assert.equal(r.status, 200, r.text);
    return r.json().session.id as string;
  }

  const done = (r: SseResult) => {
    assert.equal(r.status, 200, r.raw);
    assert.ok(r.done, `no done event: ${r.raw}`);
    return r.done.data as Done;
  };

  let session: string;

  it('lists a marimo notebook whose kernel the extension hands out in /api/sessions', async () => {
    const doc = await openStandIn('ok');
    session = await poll(`${doc.uri.fsPath} in /api/sessions`, 10_000, () => sessionOf(doc));
    assert.match(session, /^s_[0-9a-z]{6}$/);
    assert.equal(await idOf(doc), session, 'one notebook, one session id');
  });

  it('streams stdout and stderr items as they arrive, in order, then done with success', async () => {
    const r = await client.run(session, 'stream', { timeoutMs: 15_000 });
    assert.deepEqual(
      r.events.map((e) => [e.event, e.event === 'done' ? null : e.data.data]),
      [
        ['stdout', 'one\n'],
        ['stderr', 'two\n'],
        ['stdout', 'three\n'],
        ['done', null],
      ],
    );
    assert.deepEqual(r.framingErrors, []);
    assert.ok(r.events[2]!.at - r.events[0]!.at >= 250, `events came together, not as yielded: ${r.raw}`);
    assert.deepEqual(done(r), { success: true, status: 'succeeded', output: { mimetype: 'text/plain', data: '' } });
  });

  it('gives the last rich value as done.output, text/plain preferred over text/html', async () => {
    const r = await client.run(session, 'value', { timeoutMs: 15_000 });
    assert.deepEqual(done(r), { success: true, status: 'succeeded', output: { mimetype: 'text/plain', data: '42' } });
    assert.equal(r.stdout + r.stderr, '');
  });

  it('turns an error item into a plain-text traceback on stderr and success false', async () => {
    const r = await client.run(session, 'fail', { timeoutMs: 15_000 });
    assert.deepEqual(done(r), { success: false, status: 'failed', output: { mimetype: 'text/plain', data: '' } });
    assert.equal(r.stdout, 'before\n');
    assert.match(r.stderr, /^Traceback \(most recent call last\):\n {2}File "<cell 1>", line 1, in <module>\n/);
    assert.match(r.stderr, /ZeroDivisionError: division by zero\n$/);
    assert.doesNotMatch(r.stderr, /\x1b|<b>/, 'ANSI and HTML are stripped'); // eslint-disable-line no-control-regex
  });

  it("treats marimo's marimo-error channel as failure, its text on stderr", async () => {
    const r = await client.run(session, 'marimo-error', { timeoutMs: 15_000 });
    assert.equal(done(r).success, false);
    assert.match(r.stderr, /NameError: name 'undefined_name' is not defined/);
    assert.equal(r.stdout, '');
  });

  it('ends the stream when executeCode throws (a consent denial raised at run time): reason on stderr, success false', async () => {
    const r = await client.run(session, 'revoked', { timeoutMs: 15_000 });
    assert.deepEqual(done(r), { success: false, status: 'failed', output: { mimetype: 'text/plain', data: '' } });
    assert.match(r.stderr, /Access to Jupyter Kernel has been revoked \(stand-in\)/);
    assert.match(r.stderr, /allow "Agent Bridge" when VS Code asks/, 'the person is told how to grant access');
    const next = await client.run(session, 'value', { timeoutMs: 15_000 });
    assert.equal(done(next).success, true, 'the session still runs code');
  });

  it('frees the session when a kernel ignores cancellation after the client disconnects', async () => {
    const stream = client.execute(session, 'stuck', { timeoutMs: 15_000 });
    assert.equal((await stream.next((e) => e.event === 'stdout', 10_000))?.data.data, 'stuck\n');
    stream.disconnect();
    await stream.result;
    const next = await client.run(session, 'value', { timeoutMs: 5_000 });
    assert.equal(done(next).success, true, 'the next run on the notebook is not blocked behind the stuck one');
  });

  it('cancels the run through the cancellation token when the client disconnects', async () => {
    const before = JSON.parse(done(await client.run(session, 'cancelled?', { timeoutMs: 15_000 })).output.data) as {
      cancelled: number;
      runs: number;
    };
    const stream = client.execute(session, 'forever', { timeoutMs: 15_000 });
    const first = await stream.next((e) => e.event === 'stdout', 10_000);
    assert.equal(first?.data.data, 'started\n');
    await sleep(500);
    stream.disconnect();
    const r = await stream.result;
    assert.equal(r.ended, 'disconnected');
    assert.equal(r.done, undefined);
    // Runs of one session take turns: this one only starts once the cancelled run has ended.
    const after = await poll('the stand-in to see the cancellation', 10_000, async () => {
      const state = JSON.parse(done(await client.run(session, 'cancelled?', { timeoutMs: 5000 })).output.data) as {
        cancelled: number;
        runs: number;
      };
      return state.cancelled > before.cancelled ? state : undefined;
    });
    assert.deepEqual(after, { cancelled: before.cancelled + 1, runs: before.runs + 1 });
  });

  it('leaves out a notebook without a kernel, and answers its execute with 409 saying to select one', async () => {
    const doc = await openStandIn('nokernel');
    const id = await idOf(doc);
    // Once the working notebook is listed, the list is current: this one must be missing.
    await poll('the working notebook in /api/sessions', 10_000, async () => ((await listed())[session] ? true : undefined));
    assert.equal(await sessionOf(doc), undefined, 'a notebook without a kernel is no session');
    assert.equal((await listed())[id], undefined);
    const r = await client.execute(id, '1 + 1', { timeoutMs: 10_000 }).result;
    assert.equal(r.status, 409, r.raw);
    const detail = JSON.parse(r.raw).detail as string;
    assert.ok(detail.includes(doc.uri.fsPath), detail);
    assert.match(detail, /No marimo kernel is running for this notebook: select a marimo kernel/);
    assert.match(detail, /run a cell once/);
  });

  it('answers 409 saying to allow access when the extension refuses its kernel', async () => {
    const doc = await openStandIn('denied');
    const id = await idOf(doc);
    assert.equal((await listed())[id], undefined, 'a refused notebook is no session');
    const r = await client.execute(id, '1 + 1', { timeoutMs: 10_000 }).result;
    assert.equal(r.status, 409, r.raw);
    const detail = JSON.parse(r.raw).detail as string;
    assert.match(detail, /refused access to its kernel \(The user denied access to the kernel \(stand-in\)\)/);
    assert.match(detail, /allow "Agent Bridge" when VS Code asks, then retry/);
  });
});

/**
 * Contract test of the marimo kernel adapter (src/kernels/marimoKernels.ts, extensionApi.ts)
 * inside a real VS Code, over real HTTP to the bridge, against the FAKE marimo extension
 * (test/fixtures/fake-marimo, id agent-bridge-tests.fake-marimo, installed by
 * scripts/test-integration.ts). The fake reproduces the real extension's API behaviour (getKernel
 * undefined until a controller is selected, status always "idle", outputs as VS Code cell outputs
 * with marimo's value mime and HTML tracebacks, cancellation ending the stream and that run) with
 * a real Python process as its kernel. The harness's `marimo extension` suite runs the same
 * surface against the real extension when it is given.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { BridgeClient, SseResult } from '../../sandbox-test/http';
import { connect, poll } from './support';

const FAKE_ID = 'agent-bridge-tests.fake-marimo';

interface Done {
  success: boolean;
  status: string;
  output: { mimetype: string; data: string };
}

const NOTEBOOK = 'import marimo\n\napp = marimo.App()\n\n\n@app.cell\ndef _():\n    x = 41\n    return (x,)\n';

describe('extension kernels: marimo API (FAKE marimo extension)', function () {
  this.timeout(60_000);
  let client: BridgeClient;
  let folder: string;

  before(async function () {
    ({ client } = await connect());
    const fake = vscode.extensions.getExtension(FAKE_ID);
    assert.ok(fake, `the fake ${FAKE_ID} is not installed (scripts/test-integration.ts installs it)`);
    await fake.activate();
    folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ?? fs.mkdtempSync(path.join(os.tmpdir(), 'fake-marimo-'));
  });

  /** Writes a marimo notebook and opens it as the person would, with the fake's notebook type. */
  async function open(name: string): Promise<{ doc: vscode.NotebookDocument }> {
    const file = path.join(folder, `it_${process.pid}_${name}.py`);
    fs.writeFileSync(file, NOTEBOOK);
    const doc = await vscode.workspace.openNotebookDocument(vscode.Uri.file(file));
    assert.equal(doc.notebookType, 'marimo-notebook');
    await vscode.window.showNotebookDocument(doc, { preserveFocus: true, preview: false });
    return { doc };
  }

  async function listed(): Promise<Record<string, { path: string | null }>> {
    const r = await client.get('/api/sessions', { timeoutMs: 5000 });
    assert.equal(r.status, 200, r.text);
    return r.json();
  }

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
  let working: vscode.NotebookDocument;

  it('answers 409 saying to select a marimo kernel and run a cell while no controller is selected', async () => {
    const { doc } = await open('nokernel');
    const id = await idOf(doc);
    assert.equal((await listed())[id], undefined, 'a notebook without a kernel is no session');
    const r = await client.execute(id, '1 + 1', { timeoutMs: 10_000 }).result;
    assert.equal(r.status, 409, r.raw);
    const detail = JSON.parse(r.raw).detail as string;
    assert.ok(detail.includes(doc.uri.fsPath), detail);
    assert.match(detail, /No marimo kernel is running for this notebook: select a marimo kernel/);
    assert.match(detail, /run a cell once/);
  });

  it('POST /notebooks/kernel/start with kernel "marimo" starts the only marimo controller with a starter cell it removes', async () => {
    const { doc } = await open('ok');
    working = doc;
    const r = await client.post('/notebooks/kernel/start', { notebook: doc.uri.fsPath, kernel: 'marimo' }, { timeoutMs: 60_000 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json().kernel, 'marimo');
    assert.deepEqual(
      doc.getCells().map((c) => c.document.getText()),
      ['x = 41'],
      'the starter cell is gone',
    );
    session = await poll(
      `${doc.uri.fsPath} in /api/sessions`,
      15_000,
      async () => Object.entries(await listed()).find(([, s]) => s.path === doc.uri.fsPath)?.[0],
    );
    assert.equal(await idOf(doc), session, 'one notebook, one session id');
  });

  it('streams stdout and stderr as the kernel writes them, in order, then done with success', async () => {
    const code =
      'import sys, time\nprint("one", flush=True)\ntime.sleep(0.3)\nprint("two", file=sys.stderr, flush=True)\ntime.sleep(0.3)\nprint("three")';
    const r = await client.run(session, code, { timeoutMs: 30_000 });
    assert.deepEqual(
      r.events.filter((e) => e.event !== 'done').map((e) => [e.event, e.data.data]),
      [
        ['stdout', 'one'],
        ['stdout', '\n'],
        ['stderr', 'two'],
        ['stderr', '\n'],
        ['stdout', 'three'],
        ['stdout', '\n'],
      ],
    );
    assert.ok(r.events[4]!.at - r.events[0]!.at >= 400, `events came together, not as written: ${r.raw}`);
    assert.deepEqual(done(r), { success: true, status: 'succeeded', output: { mimetype: 'text/plain', data: '' } });
  });

  it("gives a trailing expression's value (marimo's value mime) as done.output", async () => {
    const r = await client.run(session, '6 * 7', { timeoutMs: 30_000 });
    const d = done(r);
    assert.equal(d.success, true);
    assert.match(d.output.data, /42/);
  });

  it("turns marimo's HTML traceback into plain text on stderr, on lines of its own: no tags, no colour codes, success false", async () => {
    const r = await client.run(session, "print('before')\nraise ValueError('no <b>bold</b> here')", { timeoutMs: 30_000 });
    assert.deepEqual(done(r), { success: false, status: 'failed', output: { mimetype: 'text/plain', data: '' } });
    assert.equal(r.stdout, 'before\n');
    // marimo's one-line message comes first, with no line break: the traceback still starts its own line.
    assert.match(r.stderr, /^ValueError: no <b>bold<\/b> here\nTraceback \(most recent call last\):\n/);
    assert.match(r.stderr, /ValueError: no <b>bold<\/b> here\n$/, 'the message keeps its own text');
    assert.doesNotMatch(r.stderr, /\x1b|<a |<span|<pre|&lt;/, 'ANSI and markup are stripped'); // eslint-disable-line no-control-regex
  });

  it('discards new bindings, keeps the globals', async () => {
    assert.equal(done(await client.run(session, 'zz_new = 1', { timeoutMs: 30_000 })).success, true);
    const r = await client.run(session, 'zz_new', { timeoutMs: 30_000 });
    assert.equal(done(r).success, false);
    assert.match(r.stderr, /NameError/);
  });

  it('a client that disconnects ends its run (the extension cancels it) and frees the notebook', async () => {
    const stream = client.execute(session, 'import time\nprint("looping", flush=True)\nwhile True: time.sleep(0.05)', {
      timeoutMs: 30_000,
    });
    assert.ok(await stream.next((e) => e.event === 'stdout', 20_000), 'the loop never started');
    stream.disconnect();
    await stream.result;
    const next = await client.run(session, '1 + 1', { timeoutMs: 20_000 });
    assert.equal(done(next).success, true, 'the next run on the notebook is not blocked behind the cancelled one');
  });

  it("interrupts through marimo's controller (VS Code's notebook interrupt): a running loop ends with KeyboardInterrupt", async () => {
    const stream = client.execute(session, 'import time\nprint("looping", flush=True)\nwhile True: time.sleep(0.05)', {
      timeoutMs: 30_000,
    });
    assert.ok(await stream.next((e) => e.event === 'stdout', 20_000), 'the loop never started');
    const r = await client.post('/notebooks/interrupt', { notebook: session }, { timeoutMs: 15_000 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json().how, 'sigint');
    const result = await stream.result;
    assert.equal(done(result).success, false);
    assert.match(result.stderr, /KeyboardInterrupt/);
  });

  it("says how to change cells through the bridge when marimo's code_mode fails there", async () => {
    const r = await client.run(session, 'import marimo._code_mode as cm\ncm.get_context()', { timeoutMs: 30_000 });
    assert.equal(done(r).success, false);
    assert.match(r.stderr, /code_mode \(marimo\._code_mode\) is not available in this kernel of marimo's VS Code extension/);
    assert.match(r.stderr, /\/notebooks\/cells/);
    assert.match(r.stderr, /create_cell/);
    assert.ok(working.notebookType === 'marimo-notebook');
    // Code about code_mode that fails for its own reason gets no such hint.
    const other = await client.run(session, '# then marimo._code_mode\nraise ValueError("own failure")', {
      timeoutMs: 30_000,
    });
    assert.equal(done(other).success, false);
    assert.match(other.stderr, /own failure/);
    assert.doesNotMatch(other.stderr, /Agent Bridge:/);
  });
});

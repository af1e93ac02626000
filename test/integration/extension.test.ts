/**
 * Runs inside the extension host of a real VS Code (see scripts/test-integration.ts): the extension
 * is present and active, its bridge answers on the port its discovery file names, and a notebook
 * opened through the VS Code API shows up in /api/sessions.
 */
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { BridgeClient } from '../../sandbox-test/http';
import { connect, EXTENSION_ID, poll, type Advert } from './support';

/** The builtin kernel's NotebookController id (src/kernels/builtin/controller.ts). */
const BUILTIN_KERNEL_ID = 'agent-bridge-python';

/** The repository root (this file is bundled into out/integration/index.js). */
const REPO_ROOT = path.resolve(__dirname, '..', '..');

describe('Agent Bridge extension', () => {
  let advert: Advert;
  let client: BridgeClient;

  before(async function () {
    this.timeout(30_000);
    ({ advert, client } = await connect());
  });

  it('is present and active', () => {
    const ext = vscode.extensions.getExtension(EXTENSION_ID);
    assert.ok(ext, 'extension missing');
    assert.equal(ext.isActive, true);
    assert.equal(ext.packageJSON.name, 'agent-bridge');
  });

  it('registers every command package.json contributes', async () => {
    const declared = (
      vscode.extensions.getExtension(EXTENSION_ID)!.packageJSON as { contributes: { commands: { command: string }[] } }
    ).contributes.commands.map((c) => c.command);
    assert.ok(declared.length > 0, 'package.json contributes no commands');
    const registered = new Set(await vscode.commands.getCommands(true));
    assert.deepEqual(
      declared.filter((id) => !registered.has(id)),
      [],
      'commands declared in package.json but not registered',
    );
  });

  it('answers /health on the port in its discovery file', async () => {
    assert.equal(advert.url, `http://127.0.0.1:${advert.port}`);
    const r = await client.get('/health', { token: null, timeoutMs: 2000 });
    assert.equal(r.status, 200);
    assert.equal(r.json().status, 'healthy');
  });

  it('lists a notebook opened with the VS Code API in /api/sessions once its kernel is picked', async function () {
    this.timeout(30_000);
    const fixture = path.join(REPO_ROOT, 'sandbox-test', 'fixtures', 'analysis.ipynb');
    const doc = await vscode.workspace.openNotebookDocument(vscode.Uri.file(fixture));
    const editor = await vscode.window.showNotebookDocument(doc, { preserveFocus: true });
    // Sessions are notebooks that code can run in: pick the builtin kernel as a user would.
    await vscode.commands.executeCommand('notebook.selectKernel', {
      notebookEditor: editor,
      id: BUILTIN_KERNEL_ID,
      extension: EXTENSION_ID,
    });
    const id = await poll(`${fixture} in /api/sessions`, 10_000, async () => {
      const r = await client.get('/api/sessions', { timeoutMs: 2000 });
      assert.equal(r.status, 200, r.text);
      const sessions = r.json<Record<string, { filename: string | null; path: string | null }>>();
      return Object.entries(sessions).find(([, s]) => s.path === doc.uri.fsPath)?.[0];
    });
    assert.match(id, /^s_[0-9a-z]{6}$/);
  });
});

/**
 * What the integration suites share: reaching the bridge of the extension under test, making
 * fresh notebooks, and playing the person through the VS Code API.
 */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { BridgeClient } from '../../sandbox-test/http';
import { errorMessage } from '../../src/core/errorMessage';
import { sleep } from '../../src/core/sleep';

export const EXTENSION_ID = 'agent-bridge.agent-bridge';

export interface Advert {
  url: string;
  port: number;
  token: string | null;
}

/**
 * Waits until the person has not typed in the notebook's cells for 10 s: till then a write to a
 * cell they typed in is refused as theirs (presence), apart from read-before-write.
 */
export async function personStops(client: BridgeClient, session: string): Promise<void> {
  await poll('the person to stop typing', 20_000, async () => {
    const r = await client.get(`/notebooks/presence?notebook=${session}`);
    assert.equal(r.status, 200, r.text);
    return r.json<{ person: { cells: { editing: boolean }[] } }>().person.cells.some((c) => c.editing) ? undefined : true;
  });
}

/** Polls `probe` until it gives a value; a throwing probe counts as "not yet" (its message is kept). */
export async function poll<T>(what: string, timeoutMs: number, probe: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (err) {
      last = errorMessage(err);
    }
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (${last})` : ''}`);
    await sleep(100);
  }
}

/**
 * Saves as the person does, and waits for the file to hold what the editor holds. code-server's
 * auto-save may be saving at the same moment: then save() answers false, and the editor's own save
 * writes it (or wrote an older state, and the next save writes the rest).
 */
export async function saveNow(doc: vscode.NotebookDocument): Promise<void> {
  await poll('the notebook saved and clean', 10_000, async () => ((await doc.save()) || !doc.isDirty ? true : undefined));
}

function readAdvert(): Advert | undefined {
  const file = process.env['AGENT_BRIDGE_DISCOVERY_FILE'];
  assert.ok(file, 'AGENT_BRIDGE_DISCOVERY_FILE is not set in the extension host');
  if (!fs.existsSync(file)) return undefined;
  const advert = JSON.parse(fs.readFileSync(file, 'utf8')) as Advert;
  return Number.isInteger(advert.port) && advert.port > 0 ? advert : undefined;
}

/** Activates the extension and finds its bridge through the discovery file. */
export async function connect(): Promise<{ advert: Advert; client: BridgeClient }> {
  const ext = vscode.extensions.getExtension(EXTENSION_ID);
  assert.ok(ext, `${EXTENSION_ID} is not installed`);
  await ext.activate();
  const advert = await poll('the discovery file', 15_000, readAdvert);
  return { advert, client: new BridgeClient(advert.url, advert.token) };
}

export type CellSource = string | { kind: 'code' | 'markdown'; source: string };

export function nbformat(cells: readonly CellSource[]): string {
  return JSON.stringify({
    cells: cells.map((c, i) => {
      const { kind, source } = typeof c === 'string' ? { kind: 'code' as const, source: c } : c;
      return {
        cell_type: kind,
        id: `it${i}`,
        metadata: {},
        source,
        ...(kind === 'code' ? { execution_count: null, outputs: [] } : {}),
      };
    }),
    metadata: {
      kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' },
      language_info: { name: 'python' },
    },
    nbformat: 4,
    nbformat_minor: 5,
  });
}

/** Writes fresh .ipynb files into the workspace and opens them through the bridge with the builtin kernel. */
export class NotebookMaker {
  private counter = 0;
  private readonly folder: string;

  constructor(
    private readonly client: BridgeClient,
    private readonly prefix: string,
  ) {
    this.folder =
      vscode.workspace.workspaceFolders?.[0]?.uri.fsPath ??
      fs.mkdtempSync(path.join(process.env['TMPDIR'] ?? '/tmp', `${prefix}-`));
  }

  async open(cells: readonly CellSource[]): Promise<{ doc: vscode.NotebookDocument; session: string }> {
    const file = path.join(this.folder, `${this.prefix}-${process.pid}-${this.counter++}.ipynb`);
    fs.writeFileSync(file, nbformat(cells));
    const res = await this.client.post('/notebooks/open', { path: file, kernel: 'builtin' }, { timeoutMs: 30_000 });
    assert.equal(res.status, 200, res.text);
    const doc = vscode.workspace.notebookDocuments.find((d) => d.uri.fsPath === file);
    assert.ok(doc, 'the notebook is not open');
    return { doc, session: res.json().session.id as string };
  }
}

/** What a suite's tests get from useBridge: filled in by its `before` hook. */
export interface BridgeSuite {
  readonly client: BridgeClient;
  openNotebook(cells: readonly CellSource[]): Promise<{ doc: vscode.NotebookDocument; session: string }>;
}

/** Call in a `describe` body: connects to the bridge before its tests, and opens notebooks named `prefix-*`. */
export function useBridge(prefix: string): BridgeSuite {
  let state: { client: BridgeClient; notebooks: NotebookMaker } | undefined;
  before(async function () {
    this.timeout(30_000);
    const { client } = await connect();
    state = { client, notebooks: new NotebookMaker(client, prefix) };
  });
  const ready = () => {
    assert.ok(state, 'useBridge: not connected yet (use it inside tests, not while defining the suite)');
    return state;
  };
  return {
    get client() {
      return ready().client;
    },
    openNotebook: (cells) => ready().notebooks.open(cells),
  };
}

/** Everything of a notebook a batch could change, to compare before and after. */
export function contents(doc: vscode.NotebookDocument): string {
  return JSON.stringify(
    doc.getCells().map((c) => ({
      kind: c.kind,
      language: c.document.languageId,
      text: c.document.getText(),
      metadata: c.metadata,
      outputs: c.outputs.map((o) => o.items.map((i) => [i.mime, Buffer.from(i.data).toString('base64')])),
    })),
  );
}

/** The person types: a WorkspaceEdit through the VS Code API, as an editor keystroke would be. */
export async function personTypes(doc: vscode.NotebookDocument, index: number, text: string): Promise<void> {
  const document = doc.cellAt(index).document;
  const edit = new vscode.WorkspaceEdit();
  edit.replace(document.uri, new vscode.Range(0, 0, document.lineCount, 0), text);
  assert.equal(await vscode.workspace.applyEdit(edit), true);
}

import * as vscode from 'vscode';
import type { ActivityStore, CellChange, Entry } from './record';
import { isPythonLanguage } from '../core/cellLanguages';

/** What a marked cell remembers: who changed it, when, and its text before and after. */
interface Mark {
  readonly id: number;
  /** The action of the activity record that made the change. */
  readonly action: number;
  readonly client: string;
  /** The client in full (the hover). */
  readonly about: string;
  readonly at: number;
  readonly before: string;
  readonly after: string;
  readonly created: boolean;
}

export const CHANGE_SCHEME = 'agent-bridge-change';
export const SHOW_CELL_CHANGE = 'agentBridge.showCellChange';
const NOTEBOOK_TYPES = ['jupyter-notebook', 'marimo-notebook'];

export function ago(at: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - at) / 1000));
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

/**
 * Marks the cells agents created or changed with a cell status bar item ("who · how long ago");
 * its click opens the diff of the agent's whole change (else of the cell before and after). A mark goes once the cell's text is no
 * longer what the agent left (the person edited it), or the cell goes.
 */
export class CellMarks
  implements vscode.NotebookCellStatusBarItemProvider, vscode.TextDocumentContentProvider, vscode.Disposable
{
  private readonly marks = new Map<vscode.NotebookCell, Mark>();
  private nextId = 1;
  private readonly refresh = new vscode.EventEmitter<void>();
  readonly onDidChangeCellStatusBarItems = this.refresh.event;
  private readonly disposables: vscode.Disposable[] = [this.refresh];
  private readonly ticker: NodeJS.Timeout;

  constructor(
    store: ActivityStore,
    /** Opens the whole change an action made (its checkpoint); false when it made none. */
    private readonly showWhole: (action: number) => Promise<boolean>,
  ) {
    this.disposables.push(
      store.onDidEnd((entry) => this.mark(entry)),
      ...NOTEBOOK_TYPES.map((type) => vscode.notebooks.registerNotebookCellStatusBarItemProvider(type, this)),
      vscode.workspace.registerTextDocumentContentProvider(CHANGE_SCHEME, this),
      vscode.workspace.onDidChangeNotebookDocument((e) => this.forgetEdited(e)),
      vscode.workspace.onDidCloseNotebookDocument((nb) => nb.getCells().forEach((c) => this.marks.delete(c))),
      vscode.commands.registerCommand(SHOW_CELL_CHANGE, (cell?: vscode.NotebookCell | vscode.Uri) => this.showChange(cell)),
    );
    // "how long ago" moves on; once a minute is enough for its words.
    this.ticker = setInterval(() => this.marks.size && this.refresh.fire(), 60_000);
  }

  /** The mark of a cell (for tests and the activity view). */
  markOf(cell: vscode.NotebookCell): Mark | undefined {
    return this.marks.get(cell);
  }

  provideCellStatusBarItems(cell: vscode.NotebookCell): vscode.NotebookCellStatusBarItem[] {
    const mark = this.marks.get(cell);
    if (!mark) return [];
    const item = new vscode.NotebookCellStatusBarItem(
      `$(hubot) ${mark.created ? 'Added' : 'Changed'} by ${mark.client} · ${ago(mark.at)}`,
      vscode.NotebookCellStatusBarAlignment.Right,
    );
    item.tooltip = `${mark.created ? 'Created' : 'Changed'} by ${mark.client} at ${new Date(mark.at).toLocaleTimeString()}: ${mark.about}. Click to compare before and after; the mark goes when you edit the cell.`;
    item.command = { title: 'Compare with before the agent', command: SHOW_CELL_CHANGE, arguments: [cell.document.uri] };
    return [item];
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    const id = Number(uri.query);
    const mark = [...this.marks.values()].find((m) => m.id === id);
    if (!mark) return '(this cell no longer carries an agent mark)';
    return uri.path.startsWith('/before') ? mark.before : mark.after;
  }

  private mark(entry: Entry): void {
    if (!entry.changes.length) return;
    for (const change of entry.changes) this.marks.set(change.cell, { id: this.nextId++, ...toMark(entry, change) });
    this.refresh.fire();
  }

  private forgetEdited(e: vscode.NotebookDocumentChangeEvent): void {
    let forgot = false;
    for (const change of e.cellChanges) {
      const mark = change.document && this.marks.get(change.cell);
      if (mark && change.cell.document.getText() !== mark.after) forgot = this.marks.delete(change.cell);
    }
    for (const content of e.contentChanges) for (const cell of content.removedCells) forgot = this.marks.delete(cell) || forgot;
    if (forgot) this.refresh.fire();
  }

  private findByDocument(uri: vscode.Uri | undefined): [vscode.NotebookCell, Mark] | undefined {
    if (!uri) return undefined;
    return [...this.marks].find(([cell]) => cell.document.uri.toString() === uri.toString());
  }

  private async showChange(target?: vscode.NotebookCell | vscode.Uri): Promise<void> {
    const uri = target instanceof vscode.Uri ? target : target?.document.uri;
    const found = this.findByDocument(uri);
    if (!found || !uri) {
      void vscode.window.showInformationMessage('This cell carries no agent change to compare.');
      return;
    }
    const [cell, mark] = found;
    if (await this.showWhole(mark.action)) return;
    const query = String(mark.id);
    const lang = isPythonLanguage(cell.document.languageId) ? '.py' : '';
    await vscode.commands.executeCommand(
      'vscode.diff',
      vscode.Uri.from({ scheme: CHANGE_SCHEME, path: `/before/cell${cell.index}${lang}`, query }),
      vscode.Uri.from({ scheme: CHANGE_SCHEME, path: `/after/cell${cell.index}${lang}`, query }),
      `Cell ${cell.index + 1}: before ↔ after ${mark.client}`,
    );
  }

  dispose(): void {
    clearInterval(this.ticker);
    for (const d of this.disposables) d.dispose();
  }
}

function toMark(entry: Entry, change: CellChange): Omit<Mark, 'id'> {
  return {
    action: entry.action.id,
    client: entry.action.client,
    about: entry.action.about,
    at: entry.action.startedAt + (entry.end?.durationMs ?? 0),
    before: change.before,
    after: change.after,
    created: change.created,
  };
}

import * as vscode from 'vscode';
import type { ActivityStore, CellChange, Entry } from './record';

/** What a marked cell remembers: who changed it, when, and the text the agent left. */
interface Mark {
  /** The action of the activity record that made the change. */
  readonly action: number;
  readonly client: string;
  /** The client in full (the hover). */
  readonly about: string;
  readonly at: number;
  readonly after: string;
  readonly created: boolean;
}

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
 * its click opens the notebook diff of the agent's change to that cell, in the whole notebook. A
 * mark goes once the cell's text is no longer what the agent left (the person edited it), or the
 * cell goes.
 */
export class CellMarks implements vscode.NotebookCellStatusBarItemProvider, vscode.Disposable {
  private readonly marks = new Map<vscode.NotebookCell, Mark>();
  private readonly refresh = new vscode.EventEmitter<void>();
  readonly onDidChangeCellStatusBarItems = this.refresh.event;
  private readonly disposables: vscode.Disposable[] = [this.refresh];
  private readonly ticker: NodeJS.Timeout;

  constructor(
    store: ActivityStore,
    /** Opens the change an action made to this cell (from its checkpoint); false when there is none. */
    private readonly showCell: (action: number, cell: vscode.NotebookCell) => Promise<boolean>,
  ) {
    this.disposables.push(
      store.onDidEnd((entry) => this.mark(entry)),
      ...NOTEBOOK_TYPES.map((type) => vscode.notebooks.registerNotebookCellStatusBarItemProvider(type, this)),
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

  private mark(entry: Entry): void {
    if (!entry.changes.length) return;
    for (const change of entry.changes) this.marks.set(change.cell, toMark(entry, change));
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
    if (!(await this.showCell(mark.action, cell)))
      void vscode.window.showInformationMessage(
        `The change ${mark.client} made to this cell is no longer in Agent Changes: it was reverted, or dropped as the list grew.`,
      );
  }

  dispose(): void {
    clearInterval(this.ticker);
    for (const d of this.disposables) d.dispose();
  }
}

function toMark(entry: Entry, change: CellChange): Mark {
  return {
    action: entry.action.id,
    client: entry.action.client,
    about: entry.action.about,
    at: entry.action.startedAt + (entry.end?.durationMs ?? 0),
    after: change.after,
    created: change.created,
  };
}

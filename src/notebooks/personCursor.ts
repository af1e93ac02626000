import * as vscode from 'vscode';
import type { Presence } from '../core/agents/presence';

export interface CursorNotebooks {
  cellId(cell: vscode.NotebookCell): string;
  /** Whether a change of this cell text is the bridge's own write under way. */
  isWriting(document: vscode.TextDocument): boolean;
}

/**
 * The person's whereabouts, from the editor: a change of a cell's text in the editor that has the
 * focus, which is not a write of the bridge's, is their keystroke (typing, pasting, undoing); a
 * notebook editor's selection is theirs. Both are noted in the Presence record, which agents read
 * and which makes writes to a cell they are typing in wait.
 */
export class PersonCursor implements vscode.Disposable {
  private readonly subscriptions: vscode.Disposable[];

  constructor(presence: Presence, notebooks: CursorNotebooks) {
    this.subscriptions = [
      vscode.workspace.onDidChangeTextDocument((e) => {
        const { document } = e;
        if (document.uri.scheme !== 'vscode-notebook-cell' || !e.contentChanges.length) return;
        if (vscode.window.activeTextEditor?.document !== document || notebooks.isWriting(document)) return;
        const cell = cellOf(document);
        if (cell) presence.typed(cell.notebook.uri.toString(), notebooks.cellId(cell));
      }),
      vscode.window.onDidChangeNotebookEditorSelection(({ notebookEditor: { notebook }, selections }) => {
        const ids = selections.flatMap((range) => notebook.getCells(range)).map((cell) => notebooks.cellId(cell));
        presence.selected(notebook.uri.toString(), ids);
      }),
    ];
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
  }
}

/** The notebook cell whose text this is (cell documents share their notebook's path). */
function cellOf(document: vscode.TextDocument): vscode.NotebookCell | undefined {
  for (const notebook of vscode.workspace.notebookDocuments) {
    if (notebook.uri.path !== document.uri.path) continue;
    const cell = notebook.getCells().find((c) => c.document === document);
    if (cell) return cell;
  }
  return undefined;
}

import { stat } from 'node:fs/promises';
import * as vscode from 'vscode';

/**
 * When each open notebook's file was last known to match the editor: its modification time at
 * open, after each save, and whenever the notebook is seen clean (VS Code reloads a clean
 * notebook whose file changed). A file modified after that, under a dirty notebook, was changed
 * by someone else: saving would overwrite their work.
 */
export class FileStamps implements vscode.Disposable {
  private readonly stamps = new Map<string, Promise<number | undefined>>();
  private readonly subscriptions: vscode.Disposable[];

  constructor() {
    for (const notebook of vscode.workspace.notebookDocuments) this.note(notebook);
    this.subscriptions = [
      vscode.workspace.onDidOpenNotebookDocument((n) => this.note(n)),
      vscode.workspace.onDidSaveNotebookDocument((n) => this.note(n)),
      vscode.workspace.onDidChangeNotebookDocument((e) => {
        if (!e.notebook.isDirty) this.note(e.notebook);
      }),
      vscode.workspace.onDidCloseNotebookDocument((n) => this.stamps.delete(n.uri.toString())),
    ];
  }

  /** True when the file was modified since the editor last matched it. */
  async changedOnDisk(notebook: vscode.NotebookDocument): Promise<boolean> {
    const known = await this.stamps.get(notebook.uri.toString());
    const now = await mtime(notebook);
    return known !== undefined && now !== undefined && now > known;
  }

  private note(notebook: vscode.NotebookDocument): void {
    if (notebook.uri.scheme === 'file') this.stamps.set(notebook.uri.toString(), mtime(notebook));
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
  }
}

function mtime(notebook: vscode.NotebookDocument): Promise<number | undefined> {
  return stat(notebook.uri.fsPath).then(
    (s) => s.mtimeMs,
    () => undefined,
  );
}

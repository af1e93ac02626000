import * as vscode from 'vscode';
import type { Log } from '../../core/log';

/** Longest wait for VS Code's .ipynb support to update a count (a notebook it does not sync never does). */
const COUNT_WAIT_MS = 1_000;

/**
 * Keeps the execution counts the .ipynb file saves right when the builtin controller runs cells
 * itself. VS Code's .ipynb support keeps the saved count in the cell's metadata: when a run is
 * queued it clears the old count with an edit of its own, and when the document shows a run's end
 * with a count other than the metadata's it writes the new one (another edit). Both edits land one
 * workbench round trip after what triggers them, which runs that do not go through the workbench
 * can outpace:
 * - a run that ends before the clearing lands, with the same count as before (a re-run after a
 *   restart), looks already saved, then the clearing lands and the file saves no count: the end
 *   waits for the clearing (`cleared`);
 * - a save the person starts just after an agent's run was answered can find the end not yet
 *   shown, the new count not yet written: saves wait for the counts of runs that ended (`ended`).
 */
export class SavedCounts implements vscode.Disposable {
  /** Cells whose run ended with a count their metadata does not show yet. */
  private readonly unsaved = new Map<vscode.NotebookCell, number>();
  private readonly subscriptions: vscode.Disposable[];

  constructor(
    private readonly notebookType: string,
    private readonly log: Log,
  ) {
    this.subscriptions = [
      vscode.workspace.onWillSaveNotebookDocument((e) => {
        if (this.pending(e.notebook)) e.waitUntil(this.until(e.notebook, () => !this.pending(e.notebook), 'a save'));
      }),
    ];
  }

  /** Resolves when the cell's metadata no longer holds `order` from an earlier run (or after 1 s). */
  async cleared(cell: vscode.NotebookCell, order: number | undefined): Promise<void> {
    if (order === undefined || cell.notebook.notebookType !== this.notebookType || saved(cell) !== order) return;
    await this.until(cell.notebook, () => saved(cell) !== order, `the end of cell ${cell.index}`);
  }

  /** A run ended: saves wait until its count is in the metadata (the .ipynb support writes only counts of runs with a success). */
  ended(cell: vscode.NotebookCell, order: number | undefined, success: boolean | undefined): void {
    if (order === undefined || success === undefined || cell.notebook.notebookType !== this.notebookType) return;
    this.unsaved.set(cell, order);
  }

  private pending(notebook: vscode.NotebookDocument): boolean {
    for (const [cell, order] of this.unsaved)
      if (cell.index < 0 || saved(cell) === order) this.unsaved.delete(cell);
      else if (cell.notebook === notebook) return true;
    return false;
  }

  private until(notebook: vscode.NotebookDocument, done: () => boolean, what: string): Promise<void> {
    const since = Date.now();
    return new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        sub.dispose();
        const waited = Date.now() - since;
        this.log.debug(
          `${what} waited ${waited} ms for VS Code's .ipynb support to update saved counts${done() ? '' : ' (it did not)'}`,
        );
        resolve();
      };
      const timer = setTimeout(finish, COUNT_WAIT_MS);
      const sub = vscode.workspace.onDidChangeNotebookDocument((e) => e.notebook === notebook && done() && finish());
    });
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
    this.unsaved.clear();
  }
}

const saved = (cell: vscode.NotebookCell) => (cell.metadata as { execution_count?: unknown }).execution_count;

import * as vscode from 'vscode';
import type { Log } from '../../core/log';

/** Longest wait for a clearing this run has not been seen to trigger (it may have been merged away). */
const UNSEEN_CLEAR_WAIT_MS = 3_000;
/** Longest wait for a clearing this run triggered: a loaded workbench takes seconds to answer it. */
const DUE_CLEAR_WAIT_MS = 30_000;

/**
 * Watches, for one builtin run, the count VS Code's .ipynb support saves in the cell's metadata.
 *
 * That support keeps the saved count in the cell's metadata. A change to the cell that resets its
 * run (the execution's reset of the summary as the run is created, outputs cleared, the text
 * edited) makes it clear the count with an edit of its own; a run's end with a count other than
 * the metadata's makes it write the new one. Both edits land one workbench round trip after the
 * change that triggers them. A run the builtin controller starts itself (not through the
 * workbench, which queues the cell a round trip before the controller sees it) can end before
 * the clearing lands: with the same count as before (a re-run after a restart) the end looks
 * already saved, then the clearing lands and the file saves no count. So such an end waits for
 * the clearing: as long as a loaded workbench needs when this run was seen to trigger one (the
 * triggering event reaches every listener of this extension host alike), briefly otherwise.
 */
export class SavedCountWatch implements vscode.Disposable {
  private clearingDue = false;
  private readonly sub: vscode.Disposable | undefined;

  constructor(
    private readonly cell: vscode.NotebookCell,
    private readonly log: Log,
  ) {
    if (cell.notebook.notebookType !== 'jupyter-notebook' || cell.kind !== vscode.NotebookCellKind.Code) return;
    this.sub = vscode.workspace.onDidChangeNotebookDocument((e) => {
      if (e.notebook !== cell.notebook || !hasLanguage(e.notebook) || !this.saved()) return;
      if (e.cellChanges.some((c) => c.cell === cell && clearsSavedCount(c))) this.clearingDue = true;
    });
  }

  /** Resolves when the cell's metadata no longer holds `order` as its saved count, or the wait is over. */
  async cleared(order: number | undefined): Promise<void> {
    if (order === undefined || !this.sub || this.saved() !== order) return;
    const since = Date.now();
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        sub.dispose();
        resolve();
      };
      const waited = () => {
        const left = since + DUE_CLEAR_WAIT_MS - Date.now();
        if (this.clearingDue && left > 0) timer = setTimeout(waited, left);
        else done();
      };
      let timer = setTimeout(waited, UNSEEN_CLEAR_WAIT_MS);
      const sub = vscode.workspace.onDidChangeNotebookDocument(
        (e) => e.notebook === this.cell.notebook && this.saved() !== order && done(),
      );
    });
    const how = this.saved() === order ? 'was not cleared' : 'was cleared';
    const due = this.clearingDue ? 'a clearing was due' : 'none was seen due';
    this.log.debug(
      `cell ${this.cell.index}: its saved count ${order} ${how} (${due}) after ${Date.now() - since} ms; the run ends`,
    );
  }

  dispose(): void {
    this.sub?.dispose();
  }

  private saved(): unknown {
    return (this.cell.metadata as { execution_count?: unknown }).execution_count;
  }
}

/** The .ipynb support clears counts only in notebooks whose nbformat metadata names their language. */
function hasLanguage(notebook: vscode.NotebookDocument): boolean {
  const meta = notebook.metadata as { metadata?: { language_info?: { name?: string } } };
  return Boolean(meta.metadata?.language_info?.name);
}

/** Whether the .ipynb support answers this change by clearing the saved count: a reset, not a count or a metadata edit. */
function clearsSavedCount(c: vscode.NotebookDocumentCellChange): boolean {
  if (c.metadata) return false;
  if (c.outputs) return c.outputs.length === 0 && !c.executionSummary;
  const s = c.executionSummary;
  return !s?.executionOrder && !s?.success && !s?.timing;
}

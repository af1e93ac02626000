import * as vscode from 'vscode';
import type { Log } from '../../core/log';

/** Longest wait for a clearing this run has not been seen to trigger (it may have been merged away). */
const UNSEEN_CLEAR_WAIT_MS = 3_000;
/** Longest wait for a clearing this run triggered: a loaded workbench takes seconds to answer it. */
const DUE_CLEAR_WAIT_MS = 30_000;

/**
 * The count VS Code's .ipynb support saves in a cell's metadata, watched for the builtin runs.
 *
 * That support keeps the saved count in the cell's metadata. A change to the cell that resets its
 * run (the execution's reset of the summary as the run is created, outputs cleared, the text
 * edited) makes it clear the count with an edit of its own; a run's end with a count other than
 * the metadata's makes it write the new one. Both edits land one workbench round trip after the
 * change that triggers them. A run the builtin controller starts itself (not through the
 * workbench, which queues the cell a round trip before the controller sees it) can end before
 * the clearing lands: with the same count as before (a re-run after a restart) the end looks
 * already saved, then the clearing lands and the file saves no count. So such an end waits for
 * the clearing: as long as a loaded workbench needs when the run was seen to trigger one (the
 * triggering change reaches every listener of this extension host alike), briefly otherwise.
 *
 * One listener serves every run under watch (its flag and its wait), however many cells a Run All
 * queues. The builtin controller serves only `jupyter-notebook`, the .ipynb support's type.
 */
export class SavedCounts implements vscode.Disposable {
  private readonly watches = new Map<vscode.NotebookCell, SavedCountWatch>();
  private readonly sub = vscode.workspace.onDidChangeNotebookDocument((e) => {
    if (!this.watches.size) return;
    const clears = clearsCounts(e.notebook);
    for (const change of e.cellChanges) {
      const watch = this.watches.get(change.cell);
      if (!watch) continue;
      if (clears && savedCount(change.cell) && clearsSavedCount(change)) watch.clearingDue = true;
      watch.changed();
    }
  });

  constructor(private readonly log: Log) {}

  /**
   * Watches one run of `cell` from its execution's creation: the change that resets the cell comes
   * a round trip later. VS Code lets a cell have one execution at a time, so one watch per cell.
   */
  watch(cell: vscode.NotebookCell): SavedCountWatch {
    const watch = new SavedCountWatch(cell, this.log, () => this.watches.get(cell) === watch && this.watches.delete(cell));
    this.watches.set(cell, watch);
    return watch;
  }

  dispose(): void {
    this.sub.dispose();
    this.watches.clear();
  }
}

/** One run's watch of its cell's saved count, told of the cell's changes by `SavedCounts`. */
export class SavedCountWatch implements vscode.Disposable {
  /** Set once a change the .ipynb support answers with a clearing was seen during this run. */
  clearingDue = false;
  /** While `cleared()` waits: looks at the saved count again. */
  private recheck: (() => void) | undefined;

  constructor(
    private readonly cell: vscode.NotebookCell,
    private readonly log: Log,
    readonly dispose: () => void,
  ) {}

  /** @internal from SavedCounts: the cell changed. */
  changed(): void {
    this.recheck?.();
  }

  /** Resolves when the cell's metadata no longer holds `order` as its saved count, or the wait is over. */
  async cleared(order: number | undefined): Promise<void> {
    const { cell } = this;
    if (order === undefined || savedCount(cell) !== order) return;
    const since = Date.now();
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.recheck = undefined;
        resolve();
      };
      const waited = () => {
        const left = since + DUE_CLEAR_WAIT_MS - Date.now();
        if (this.clearingDue && left > 0) timer = setTimeout(waited, left);
        else done();
      };
      let timer = setTimeout(waited, UNSEEN_CLEAR_WAIT_MS);
      this.recheck = () => savedCount(cell) !== order && done();
    });
    const how = savedCount(cell) === order ? 'was not cleared' : 'was cleared';
    const due = this.clearingDue ? 'a clearing was due' : 'none was seen due';
    this.log.debug(`cell ${cell.index}: its saved count ${order} ${how} (${due}) after ${Date.now() - since} ms; the run ends`);
  }
}

function savedCount(cell: vscode.NotebookCell): unknown {
  return (cell.metadata as { execution_count?: unknown }).execution_count;
}

/** The .ipynb support clears counts only in its own notebooks, when their nbformat metadata names a language. */
function clearsCounts(notebook: vscode.NotebookDocument): boolean {
  const meta = notebook.metadata as { metadata?: { language_info?: { name?: string } } };
  return notebook.notebookType === 'jupyter-notebook' && Boolean(meta.metadata?.language_info?.name);
}

/** Whether the .ipynb support answers this change by clearing the saved count: a reset, not a count or a metadata edit. */
function clearsSavedCount(c: vscode.NotebookDocumentCellChange): boolean {
  if (c.metadata) return false;
  if (c.outputs) return c.outputs.length === 0 && !c.executionSummary;
  const s = c.executionSummary;
  return !s?.executionOrder && !s?.success && !s?.timing;
}

import * as vscode from 'vscode';
import type { Log } from '../../core/log';

/** Longest wait for VS Code's .ipynb support to clear a count (it does not when it sees no queueing). */
const CLEAR_WAIT_MS = 3_000;

/**
 * Resolves when the cell's metadata no longer holds `order` as its saved count (or after 3 s).
 *
 * VS Code's .ipynb support keeps the count the file saves in the cell's metadata: when it sees a
 * run queued it clears the old count with an edit of its own, and when it sees a run end with a
 * count other than the metadata's it writes the new one. Both edits land one workbench round trip
 * after the change that triggers them. A run the builtin controller starts itself (not through
 * the workbench, which queues the cell a round trip before the controller sees it) can end before
 * the clearing lands: with the same count as before (a re-run after a restart) the end looks
 * already saved, then the clearing lands and the file saves no count. So such an end waits.
 */
export async function savedCountCleared(cell: vscode.NotebookCell, order: number | undefined, log: Log): Promise<void> {
  const saved = () => (cell.metadata as { execution_count?: unknown }).execution_count;
  if (order === undefined || cell.notebook.notebookType !== 'jupyter-notebook' || saved() !== order) return;
  const since = Date.now();
  await new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      sub.dispose();
      resolve();
    };
    const timer = setTimeout(done, CLEAR_WAIT_MS);
    const sub = vscode.workspace.onDidChangeNotebookDocument((e) => e.notebook === cell.notebook && saved() !== order && done());
  });
  const how = saved() === order ? 'was not cleared' : 'was cleared';
  log.debug(`cell ${cell.index}: its saved count ${order} ${how} after ${Date.now() - since} ms; the run ends`);
}

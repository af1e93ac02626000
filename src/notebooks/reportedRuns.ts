import * as vscode from 'vscode';
import type { CellRunReport } from '../kernels/kernel';

/** What a cell shows by its controller's reports, ahead of the extension host's document. */
interface Reported {
  /** The run under way. */
  live: 'queued' | 'running' | undefined;
  summary: vscode.NotebookCellExecutionSummary;
  /** Undefined: as the document has them. */
  outputs: readonly vscode.NotebookCellOutput[] | undefined;
  /** End times of the reported ends the document does not show yet, oldest first (they only grow). */
  unshown: number[];
  /** Set while the document shows the last end but not yet the count the .ipynb support writes for it. */
  countWait?: NodeJS.Timeout;
}

/** Longest wait, once the document shows a run's end, for the .ipynb support's count of it. */
const COUNT_WAIT_MS = 2_000;

/**
 * Cell runs as the controller running them reported them (see KernelProvider.onDidReportRun),
 * held until the workbench has echoed them into the extension host's document. On a busy
 * workbench that echo comes a tenth of a second to seconds after the kernel is done; an agent's
 * answer need not wait for it, and what the bridge reads of such a cell (state, outputs) is
 * taken from here meanwhile. A cell's echoes of the steps reported here are stale news: the
 * caller ignores them until the document shows the last reported end.
 */
export class ReportedRuns implements vscode.Disposable {
  private readonly cells = new WeakMap<vscode.NotebookCell, Reported>();
  /** Per notebook, its cells with reported ends the document does not show yet. */
  private readonly behind = new WeakMap<vscode.NotebookDocument, Set<vscode.NotebookCell>>();
  /** Fires when a notebook's document showed more of the reported ends. */
  private readonly shown = new vscode.EventEmitter<vscode.NotebookDocument>();
  private readonly subscriptions = [
    this.shown,
    vscode.workspace.onDidCloseNotebookDocument((notebook) => {
      this.behind.delete(notebook);
      this.shown.fire(notebook);
    }),
    // A cell removed before the workbench applied its ends never shows them.
    vscode.workspace.onDidChangeNotebookDocument((e) => {
      for (const change of e.contentChanges) for (const cell of change.removedCells) this.caughtUpWith(cell);
    }),
  ];

  take(report: CellRunReport): void {
    const { cell } = report;
    const now = this.cells.get(cell);
    const unshown = now?.unshown ?? [];
    const outputs = 'outputs' in report ? report.outputs : now?.outputs;
    if (report.phase === 'ended') {
      clearTimeout(now?.countWait);
      const end = report.summary.timing?.endTime;
      if (end !== undefined) unshown.push(end);
      this.cells.set(cell, { live: undefined, summary: report.summary, outputs: outputs ?? now?.outputs, unshown });
      this.behindOf(cell.notebook).add(cell);
      return;
    }
    // VS Code empties a cell's summary when it queues it, and the order comes with the start.
    const summary = report.phase === 'queued' ? {} : { executionOrder: report.executionOrder };
    const live = report.phase === 'output' ? 'running' : report.phase;
    this.cells.set(cell, { live, summary, outputs, unshown, countWait: now?.countWait });
  }

  /**
   * The document changed the cell: true when the cell is held here, so the change is an echo of
   * steps reported here (the caller ignores it). The cell is no longer held once the document
   * shows its last reported end and no run is under way.
   */
  echoed(cell: vscode.NotebookCell): boolean {
    const reported = this.cells.get(cell);
    if (!reported) return false;
    const shown = cell.executionSummary?.timing?.endTime;
    const last = reported.unshown.at(-1);
    if (shown === undefined || last === undefined) return true;
    const before = reported.unshown.length;
    // Changes can arrive merged: an end shown also shows the ones before it.
    reported.unshown = reported.unshown.filter((end) => end > shown || end === last);
    if (reported.unshown.length < before) this.shown.fire(cell.notebook);
    if (last <= shown) {
      if (countShown(cell)) this.release(cell, last);
      // Should the .ipynb support not write the count, the end is enough after a while.
      else reported.countWait ??= setTimeout(() => this.release(cell, last), COUNT_WAIT_MS);
    }
    return true;
  }

  summary(cell: vscode.NotebookCell): vscode.NotebookCellExecutionSummary | undefined {
    return this.cells.get(cell)?.summary;
  }

  outputs(cell: vscode.NotebookCell): readonly vscode.NotebookCellOutput[] {
    return this.cells.get(cell)?.outputs ?? cell.outputs;
  }

  /**
   * Resolves once the notebook's document shows all but at most `unshown` of the run ends
   * reported (0: all of them, so what is then written from the document's cells, a save, a
   * copy of a cell or its metadata, carries those runs); false after `timeoutMs`.
   */
  async caughtUp(notebook: vscode.NotebookDocument, unshown: number, timeoutMs: number): Promise<boolean> {
    const within = () => {
      let n = 0;
      for (const cell of this.behind.get(notebook) ?? []) n += this.cells.get(cell)?.unshown.length ?? 0;
      return n <= unshown;
    };
    if (within()) return true;
    return new Promise<boolean>((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        sub.dispose();
        resolve(ok);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      const sub = this.shown.event((n) => n === notebook && within() && done(true));
    });
  }

  /** The document shows the end at `endTime`, the cell's last reported one. */
  private release(cell: vscode.NotebookCell, endTime: number): void {
    const reported = this.cells.get(cell);
    if (reported?.unshown.at(-1) !== endTime) return;
    this.caughtUpWith(cell);
    if (reported.live === undefined) this.cells.delete(cell);
  }

  private caughtUpWith(cell: vscode.NotebookCell): void {
    const reported = this.cells.get(cell);
    if (reported) {
      clearTimeout(reported.countWait);
      reported.countWait = undefined;
      reported.unshown = [];
    }
    if (this.behind.get(cell.notebook)?.delete(cell)) this.shown.fire(cell.notebook);
  }

  private behindOf(notebook: vscode.NotebookDocument): Set<vscode.NotebookCell> {
    let set = this.behind.get(notebook);
    if (!set) this.behind.set(notebook, (set = new Set()));
    return set;
  }

  dispose(): void {
    for (const s of this.subscriptions) s.dispose();
  }
}

/**
 * The cell metadata holds the count VS Code's .ipynb support keeps there for the file: it writes
 * it one round trip after it sees a run end, and a copy or metadata edit made before that would
 * carry the old one.
 */
function countShown(cell: vscode.NotebookCell): boolean {
  const summary = cell.executionSummary;
  if (cell.notebook.notebookType !== 'jupyter-notebook' || typeof summary?.success !== 'boolean' || !summary.executionOrder)
    return true;
  return (cell.metadata as { execution_count?: unknown }).execution_count === summary.executionOrder;
}

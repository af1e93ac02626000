import * as vscode from 'vscode';
import type { CellDependencies } from '../core/cellGraph';
import type { Log } from '../core/log';
import { errorMessage } from '../core/errorMessage';

/**
 * Changes come in bursts (typing, a run's outputs, a Run All's hundred cells): the marks follow
 * once it settles. Until then the editor's requests (it asks again for each cell as its run
 * moves on) are answered from the analysis before the burst, so a burst costs one analysis of
 * the notebook, not one per change.
 */
const SETTLE_MS = 300;

/**
 * Marks stale cells in the editor: a status bar item under the cell, "stale", with the reason on
 * hover, from the same analysis agents read in the cell views (cellGraph.ts).
 */
export class StaleMarks implements vscode.NotebookCellStatusBarItemProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCellStatusBarItems = this.changed.event;
  private readonly graphs = new Map<string, Promise<Map<string, CellDependencies> | undefined>>();
  /** Notebooks changed since their analysis: it is dropped once the burst settles. */
  private readonly changedSince = new Set<string>();
  private readonly disposables: vscode.Disposable[];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly dependencies: (uri: string) => Promise<Map<string, CellDependencies> | undefined>,
    private readonly cellId: (cell: vscode.NotebookCell) => string,
    private readonly log: Log,
  ) {
    this.disposables = [
      this.changed,
      vscode.notebooks.registerNotebookCellStatusBarItemProvider('jupyter-notebook', this),
      vscode.workspace.onDidChangeNotebookDocument((e) => this.invalidate(e.notebook.uri.toString())),
      vscode.workspace.onDidCloseNotebookDocument((n) => {
        this.graphs.delete(n.uri.toString());
        this.changedSince.delete(n.uri.toString());
      }),
    ];
  }

  async provideCellStatusBarItems(cell: vscode.NotebookCell): Promise<vscode.NotebookCellStatusBarItem[]> {
    const uri = cell.notebook.uri.toString();
    let graph = this.graphs.get(uri);
    if (!graph) {
      graph = this.dependencies(uri).catch((error: unknown) => {
        this.log.debug(`stale marks: no analysis of ${uri}: ${errorMessage(error)}`);
        return undefined;
      });
      this.graphs.set(uri, graph);
    }
    const stale = (await graph)?.get(this.cellId(cell))?.stale;
    if (!stale) return [];
    const item = new vscode.NotebookCellStatusBarItem('$(warning) stale', vscode.NotebookCellStatusBarAlignment.Left);
    item.tooltip = `Agent Bridge: this cell's outputs are out of date: ${stale.reason}`;
    return [item];
  }

  private invalidate(uri: string): void {
    this.changedSince.add(uri);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      for (const changed of this.changedSince) this.graphs.delete(changed);
      this.changedSince.clear();
      this.changed.fire();
    }, SETTLE_MS);
  }

  dispose(): void {
    clearTimeout(this.timer);
    for (const d of this.disposables) d.dispose();
  }
}

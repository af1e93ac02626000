import * as vscode from 'vscode';
import type { CellDependencies } from '../core/cellGraph';
import type { Log } from '../core/log';
import { errorMessage } from '../core/errorMessage';

/** Changes come in bursts (typing, a run's outputs): the marks follow once it settles. */
const SETTLE_MS = 300;

/**
 * Marks stale cells in the editor: a status bar item under the cell, "stale", with the reason on
 * hover, from the same analysis agents read in the cell views (cellGraph.ts).
 */
export class StaleMarks implements vscode.NotebookCellStatusBarItemProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCellStatusBarItems = this.changed.event;
  private readonly graphs = new Map<string, Promise<Map<string, CellDependencies> | undefined>>();
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
      vscode.workspace.onDidCloseNotebookDocument((n) => this.graphs.delete(n.uri.toString())),
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
    this.graphs.delete(uri);
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.changed.fire(), SETTLE_MS);
  }

  dispose(): void {
    clearTimeout(this.timer);
    for (const d of this.disposables) d.dispose();
  }
}

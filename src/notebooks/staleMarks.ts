import * as vscode from 'vscode';
import type { CellDependencies } from '../core/model/cellGraph';
import type { Log } from '../core/log';
import { errorMessage } from '../core/errorMessage';

/**
 * Changes come in bursts (typing, a run's outputs, a Run All's hundred cells): the marks follow
 * once it settles. Until then the editor's requests (it asks again for each cell as its run
 * moves on) are answered from the analysis before the burst, so a burst costs one analysis of
 * the notebook, not one per change.
 */
const SETTLE_MS = 300;

/** What the marks are read from: NotebookCells.dependencies. */
type Dependencies = { graph: Map<string, CellDependencies> | undefined; earlierKernel: ReadonlySet<string> };

/**
 * Marks stale cells in the editor: a status bar item under the cell, "stale", with the reason on
 * hover, from the same analysis agents read in the cell views (cellGraph.ts). After a restart or
 * a kernel's death the cells that ran before say their outputs are "from an earlier kernel".
 */
export class StaleMarks implements vscode.NotebookCellStatusBarItemProvider, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCellStatusBarItems = this.changed.event;
  private readonly graphs = new Map<string, Promise<Dependencies | undefined>>();
  /** Notebooks changed since their analysis: it is dropped once the burst settles. */
  private readonly changedSince = new Set<string>();
  private readonly disposables: vscode.Disposable[];
  private timer: NodeJS.Timeout | undefined;

  /** `kernelsChanged`: a kernel started, restarted or died (which runs count changes). */
  constructor(
    private readonly dependencies: (uri: string) => Promise<Dependencies>,
    private readonly cellId: (cell: vscode.NotebookCell) => string,
    private readonly log: Log,
    kernelsChanged: vscode.Event<void>,
  ) {
    this.disposables = [
      this.changed,
      vscode.notebooks.registerNotebookCellStatusBarItemProvider('jupyter-notebook', this),
      vscode.notebooks.registerNotebookCellStatusBarItemProvider('marimo-notebook', this),
      vscode.workspace.onDidChangeNotebookDocument((e) => this.invalidate(e.notebook.uri.toString())),
      kernelsChanged(() => {
        for (const uri of this.graphs.keys()) this.invalidate(uri);
      }),
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
    const found = await graph;
    const id = this.cellId(cell);
    if (found?.earlierKernel.has(id)) {
      const item = new vscode.NotebookCellStatusBarItem(
        '$(history) from an earlier kernel',
        vscode.NotebookCellStatusBarAlignment.Left,
      );
      item.tooltip =
        'Agent Bridge: these outputs come from a run before the kernel restarted (or stopped): the cell has not run in the current kernel, so nothing it defines is there yet';
      return [item];
    }
    const stale = found?.graph?.get(id)?.stale;
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

import * as vscode from 'vscode';
import { BridgeError } from '../../core/bridgeError';
import type { InterruptHow, Kernel } from '../../core/model/kernelPort';
import type { Log } from '../../core/log';
import type { CellRunReport, KernelProvider } from '../kernelProvider';
import { EditorCellRun } from './editorCellRun';
import { KernelProcess, type CallHandler } from './kernelProcess';
import type { KernelCommand } from './kernelCommand';
import { BuiltinScratchpad } from './scratchpad';
import { SavedCounts } from './savedCounts';
import { errorMessage } from '../../core/errorMessage';

export const BUILTIN_CONTROLLER_ID = 'agent-bridge-python';
const NOTEBOOK_TYPE = 'jupyter-notebook';

interface NotebookKernel {
  process: KernelProcess;
  /** Cells queued or running; an interrupt cancels them all, as Jupyter does. */
  pending: Set<AbortController>;
}

export interface BuiltinOptions {
  extensionId: string;
  python: () => string;
  script: string;
  log: Log;
  /** Answers the host calls of a notebook's kernel (code mode: `agent_bridge`); read at each call. */
  calls?: (notebook: vscode.NotebookDocument) => CallHandler;
  /** Whom a run is for, read when it is queued (kernelProcess.ts: its calls' `run.owner`). */
  owner?: () => unknown;
  /** Setting agentBridge.codeMode.inCells: `agent_bridge` importable in cells too (read at each kernel start). */
  codeModeInCells?: () => boolean;
  /** The bridge's stable id of a cell: messages about a cell's run name it. */
  cellId?: (cell: vscode.NotebookCell) => string;
  /** The kernel as it starts (the sandbox, workspaceSandbox.ts), or as it is when undefined; asked at each kernel start. */
  wrap?: (argv: readonly string[], env: NodeJS.ProcessEnv, cwd?: string) => KernelCommand | undefined;
}

/**
 * The kernel that ships with the bridge: a NotebookController for .ipynb notebooks backed by
 * one python3 process per notebook, started on first use. It serves the bridge for every
 * notebook the person (or `POST /notebooks/open`) selected it for.
 */
export class BuiltinKernels implements KernelProvider, vscode.Disposable {
  readonly name = 'builtin';
  private readonly controller: vscode.NotebookController;
  private readonly selected = new Set<vscode.NotebookDocument>();
  private readonly kernels = new Map<vscode.NotebookDocument, NotebookKernel>();
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChange = this.changed.event;
  private readonly reports = new vscode.EventEmitter<CellRunReport>();
  readonly onDidReportRun = this.reports.event;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly savedCounts: SavedCounts;

  constructor(private readonly options: BuiltinOptions) {
    this.savedCounts = new SavedCounts(options.log);
    const controller = vscode.notebooks.createNotebookController(BUILTIN_CONTROLLER_ID, NOTEBOOK_TYPE, 'Agent Bridge Python');
    controller.description = 'python3 kernel shipped with Agent Bridge';
    controller.supportedLanguages = ['python'];
    controller.supportsExecutionOrder = true;
    controller.executeHandler = (cells, notebook) => this.executeCells(cells, notebook);
    controller.interruptHandler = async (notebook) => void (await this.interrupt(notebook));
    this.controller = controller;
    this.disposables.push(
      controller,
      this.savedCounts,
      this.changed,
      this.reports,
      controller.onDidChangeSelectedNotebooks(({ notebook, selected }) => {
        if (selected) this.selected.add(notebook);
        else this.selected.delete(notebook);
        this.changed.fire();
      }),
      vscode.workspace.onDidCloseNotebookDocument((notebook) => this.forget(notebook)),
    );
  }

  async kernelFor(notebook: vscode.NotebookDocument): Promise<Kernel | undefined> {
    // One per request: it remembers the kernel as the request found it (see BuiltinScratchpad).
    return this.selected.has(notebook) ? new BuiltinScratchpad(this.kernelOf(notebook).process) : undefined;
  }

  /** Selects this controller for the editor's notebook, waits until VS Code confirms it, and starts its process. */
  async start(editor: vscode.NotebookEditor): Promise<void> {
    const { notebook } = editor;
    if (notebook.notebookType !== NOTEBOOK_TYPE)
      throw new BridgeError(
        'bad_input',
        `The builtin kernel runs .ipynb (jupyter-notebook) notebooks; ${notebook.uri.fsPath} is a ${notebook.notebookType}`,
      );
    await this.select(editor);
    await this.kernelOf(editor.notebook).process.start();
  }

  /** Selects this kernel for the editor's notebook, and waits for VS Code to confirm it (a round trip after the command answers). */
  async select(editor: vscode.NotebookEditor): Promise<void> {
    if (this.selected.has(editor.notebook)) return;
    let confirm = () => {};
    const confirmed = new Promise<void>((resolve) => (confirm = resolve));
    const sub = this.onDidChange(() => this.selected.has(editor.notebook) && confirm());
    let timer: NodeJS.Timeout | undefined;
    try {
      await vscode.commands.executeCommand('notebook.selectKernel', {
        notebookEditor: editor,
        id: BUILTIN_CONTROLLER_ID,
        extension: this.options.extensionId,
      });
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('VS Code did not confirm the kernel selection within 10 s')), 10_000);
      });
      await Promise.race([confirmed, timeout]);
    } finally {
      clearTimeout(timer);
      sub.dispose();
    }
  }

  /** Cancels the queued cells and stops the running one: SIGINT, or a restart if it ignores that for 2 s. */
  async interrupt(notebook: vscode.NotebookDocument): Promise<InterruptHow | undefined> {
    if (!this.selected.has(notebook)) return undefined;
    const kernel = this.kernels.get(notebook);
    if (!kernel) return 'sigint';
    const stopping = kernel.process.interrupt();
    for (const pending of kernel.pending) pending.abort();
    return (await stopping) ?? 'sigint';
  }

  /** Interrupts the notebooks whose kernel runs (or has queued) a run for an owner `of` takes: the agents' runs, for "Stop Agents". */
  async interruptRunsFor(of: (owner: unknown) => boolean): Promise<void> {
    const running = [...this.kernels].filter(([, kernel]) => kernel.process.runsFor(of)).map(([notebook]) => notebook);
    await Promise.all(running.map((notebook) => this.interrupt(notebook)));
  }

  async restart(notebook: vscode.NotebookDocument): Promise<boolean> {
    if (!this.selected.has(notebook)) return false;
    const kernel = this.kernels.get(notebook);
    if (!kernel) return true;
    for (const pending of kernel.pending) pending.abort();
    // A fresh process rather than KernelProcess.restart(), so a changed pythonPath takes effect.
    kernel.process.dispose('restarted');
    this.kernels.delete(notebook);
    await this.kernelOf(notebook).process.start();
    return true;
  }

  /** The controller creates the cells' executions itself: no round trip through the workbench. */
  runCells(notebook: vscode.NotebookDocument, cells: readonly vscode.NotebookCell[], stopAfterFailure: boolean): boolean {
    if (!this.selected.has(notebook)) return false;
    this.executeCells(cells, notebook, stopAfterFailure).catch((err: unknown) =>
      this.options.log.warn(`running cells failed: ${errorMessage(err)}`),
    );
    return true;
  }

  private kernelOf(notebook: vscode.NotebookDocument): NotebookKernel {
    let kernel = this.kernels.get(notebook);
    if (!kernel) {
      const name = notebook.uri.path.split('/').pop() ?? 'notebook';
      const folder = notebook.uri.scheme === 'file' ? vscode.Uri.joinPath(notebook.uri, '..').fsPath : undefined;
      const process = new KernelProcess({
        python: this.options.python(),
        script: this.options.script,
        cwd: folder,
        env: () => ({ ...globalThis.process.env, AGENT_BRIDGE_CODE_MODE_IN_CELLS: this.options.codeModeInCells?.() ? '1' : '0' }),
        wrap: (argv, env) => this.options.wrap?.(argv, env, folder),
        owner: this.options.owner,
        onCall: (method, params, ctx) => {
          const handler = this.options.calls?.(notebook);
          return handler ? handler(method, params, ctx) : Promise.reject(new Error(`No host calls are served for ${name}`));
        },
        log: (line) => this.options.log.debug(`[kernel ${name}] ${line}`),
        onExit: ({ code, signal, expected }) => {
          this.changed.fire(); // which runs are of the current kernel changed (stale marks)
          if (expected) return;
          const how = signal ? `signal ${signal}` : `exit code ${code}`;
          this.options.log.warn(`builtin kernel of ${name} stopped (${how})`);
          void vscode.window
            .showWarningMessage(
              `The Agent Bridge Python kernel of ${name} stopped (${how}). It starts again on the next run.`,
              'Restart Now',
            )
            .then((choice) => choice && this.restart(notebook));
        },
      });
      kernel = { process, pending: new Set() };
      this.kernels.set(notebook, kernel);
    }
    return kernel;
  }

  /**
   * Runs the cells in order. Their executions are created at once, so queued cells show as
   * pending in the editor. Without `stopAfterFailure` every cell goes to the kernel process at
   * once: it keeps the order, and does not make a cell wait behind a run that waits for it (a run
   * blocked in a host call, e.g. code mode running cells, lets the next ones in). With it, each
   * cell goes to the kernel once the one before it succeeded (a pipe round trip, no workbench
   * one), and after a failure the rest end as never run; a cell interrupted while queued still
   * ends as interrupted.
   */
  private async executeCells(
    cells: readonly vscode.NotebookCell[],
    notebook: vscode.NotebookDocument,
    stopAfterFailure = false,
  ): Promise<void> {
    const kernel = this.kernelOf(notebook);
    const runs = cells.flatMap((cell) => {
      const execution = this.execution(cell);
      return execution ? [{ cell, execution, abort: new AbortController() }] : [];
    });
    for (const { cell } of runs) this.reports.fire({ cell, phase: 'queued' });
    const ends: Promise<void>[] = [];
    let failed = false;
    for (const { execution, abort } of runs) {
      kernel.pending.add(abort);
      const cancel = execution.token.onCancellationRequested(() => abort.abort());
      const forget = () => {
        cancel.dispose();
        kernel.pending.delete(abort);
      };
      if (failed && !abort.signal.aborted) {
        forget();
        this.cellRun(execution).drop();
        continue;
      }
      const run = this.executeCell(kernel, execution, abort.signal);
      ends.push(run.ended.finally(forget));
      if (stopAfterFailure) failed = (await run.settled) !== true;
    }
    await Promise.all(ends);
  }

  /**
   * A new execution of the cell; undefined when it is queued or running already (VS Code's Run
   * skips such cells too: the run under way is the one to wait for).
   */
  private execution(cell: vscode.NotebookCell): vscode.NotebookCellExecution | undefined {
    try {
      return this.controller.createNotebookCellExecution(cell);
    } catch (err) {
      this.options.log.debug(`cell ${cell.index} not run again: ${errorMessage(err)}`);
      return undefined;
    }
  }

  /**
   * One cell's run: `settled` resolves with its success once the kernel is done with it
   * (undefined: interrupted, failed to run, or dropped before its turn), `ended` once the editor
   * was told its end.
   */
  private executeCell(
    kernel: NotebookKernel,
    execution: vscode.NotebookCellExecution,
    signal: AbortSignal,
  ): { settled: Promise<boolean | undefined>; ended: Promise<void> } {
    const run = this.cellRun(execution);
    const { cell } = run;
    const settled = (async () => {
      try {
        const name = this.options.cellId && { id: this.options.cellId(cell) };
        const result = await kernel.process.run(cell.document.getText(), 'cell', run.output, signal, run.start, name);
        // Dropped before its turn (interrupted while queued): it never ran.
        return run.started ? run.settle(result) : undefined;
      } catch (err) {
        this.options.log.warn(`cell run failed in the editor: ${errorMessage(err)}`);
        return undefined;
      }
    })();
    return { settled, ended: settled.then((success) => run.end(success)) };
  }

  private cellRun(execution: vscode.NotebookCellExecution): EditorCellRun {
    const watch = this.savedCounts.watch(execution.cell);
    return new EditorCellRun(execution, (report) => this.reports.fire(report), this.options.log, watch);
  }

  private forget(notebook: vscode.NotebookDocument): void {
    this.kernels.get(notebook)?.process.dispose();
    this.kernels.delete(notebook);
    if (this.selected.delete(notebook)) this.changed.fire();
  }

  dispose(): void {
    for (const kernel of this.kernels.values()) kernel.process.dispose();
    this.kernels.clear();
    for (const d of this.disposables) d.dispose();
  }
}

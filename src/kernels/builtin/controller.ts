import * as vscode from 'vscode';
import { homedir } from 'node:os';
import { BridgeError } from '../../core/bridgeError';
import type { InterruptHow, Kernel, StreamName } from '../../core/kernelPort';
import type { Log } from '../../core/log';
import type { CellRunReport, KernelProvider } from '../kernelProvider';
import { bundleToOutputs, errorOutput } from './editorOutputs';
import { KernelProcess, type CallHandler, type KernelOutput, type RunChain } from './kernelProcess';
import { sandboxedKernel } from './kernelSandbox';
import { OutputBudget } from './outputBudget';
import { RunOutputs } from './runOutputs';
import { savedCountCleared } from './savedCounts';
import { BuiltinScratchpad } from './scratchpad';

export const BUILTIN_CONTROLLER_ID = 'agent-bridge-python';
const NOTEBOOK_TYPE = 'jupyter-notebook';
/** Outputs shown during a run are reported at most this often (VS Code sends them on as often). */
const OUTPUT_REPORT_MS = 10;

interface NotebookKernel {
  process: KernelProcess;
  executionOrder: number;
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
  /** Setting agentBridge.codeMode.inCells: `agent_bridge` importable in cells too (read at each kernel start). */
  codeModeInCells?: () => boolean;
  /** The bridge's stable id of a cell: the kernel names cells by id and index in tracebacks. */
  cellId?: (cell: vscode.NotebookCell) => string;
  /** Setting agentBridge.kernel.sandbox: run kernels under bubblewrap (read at each kernel start). */
  sandbox?: () => boolean;
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

  constructor(private readonly options: BuiltinOptions) {
    const controller = vscode.notebooks.createNotebookController(BUILTIN_CONTROLLER_ID, NOTEBOOK_TYPE, 'Agent Bridge Python');
    controller.description = 'python3 kernel shipped with Agent Bridge';
    controller.supportedLanguages = ['python'];
    controller.supportsExecutionOrder = true;
    controller.executeHandler = (cells, notebook) => this.executeCells(cells, notebook);
    controller.interruptHandler = async (notebook) => void (await this.interrupt(notebook));
    this.controller = controller;
    this.disposables.push(
      controller,
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
        400,
        `The builtin kernel runs .ipynb (jupyter-notebook) notebooks; ${notebook.uri.fsPath} is a ${notebook.notebookType}`,
      );
    await this.select(editor);
    await this.kernelOf(editor.notebook).process.start();
  }

  private async select(editor: vscode.NotebookEditor): Promise<void> {
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
  runCells(notebook: vscode.NotebookDocument, cells: readonly vscode.NotebookCell[], stopAfterFailure = false): boolean {
    if (!this.selected.has(notebook)) return false;
    this.executeCells(cells, notebook, stopAfterFailure ? { broken: false } : undefined).catch((err: unknown) =>
      this.options.log.warn(`running cells failed: ${err instanceof Error ? err.message : String(err)}`),
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
        wrap: (argv) =>
          this.options.sandbox?.()
            ? sandboxedKernel(argv, {
                writable: (vscode.workspace.workspaceFolders ?? [])
                  .filter((f) => f.uri.scheme === 'file')
                  .map((f) => f.uri.fsPath),
                home: homedir(),
                cwd: folder,
              })
            : undefined,
        onCall: (method, params, ctx) => {
          const handler = this.options.calls?.(notebook);
          return handler ? handler(method, params, ctx) : Promise.reject(new Error(`No host calls are served for ${name}`));
        },
        log: (line) => this.options.log.debug(`[kernel ${name}] ${line}`),
        onExit: ({ code, signal, expected }) => {
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
      kernel = { process, executionOrder: 0, pending: new Set() };
      this.kernels.set(notebook, kernel);
    }
    return kernel;
  }

  private async executeCells(
    cells: readonly vscode.NotebookCell[],
    notebook: vscode.NotebookDocument,
    chain?: RunChain,
  ): Promise<void> {
    const kernel = this.kernelOf(notebook);
    // Executions are created at once so queued cells show as pending in the editor. The kernel
    // process keeps the order; it does not make a cell wait behind a run that waits for it
    // (a run blocked in a host call, e.g. code mode running cells, lets the next ones in).
    const runs = cells.flatMap((cell) => {
      const execution = this.execution(cell);
      return execution ? [{ cell, execution, abort: new AbortController() }] : [];
    });
    for (const { cell } of runs) this.reports.fire({ cell, phase: 'queued' });
    await Promise.all(
      runs.map((run) => {
        kernel.pending.add(run.abort);
        const cancel = run.execution.token.onCancellationRequested(() => run.abort.abort());
        return this.executeCell(kernel, run.execution, run.abort.signal, chain).finally(() => {
          cancel.dispose();
          kernel.pending.delete(run.abort);
        });
      }),
    );
  }

  /**
   * A new execution of the cell; undefined when it is queued or running already (VS Code's Run
   * skips such cells too: the run under way is the one to wait for).
   */
  private execution(cell: vscode.NotebookCell): vscode.NotebookCellExecution | undefined {
    try {
      return this.controller.createNotebookCellExecution(cell);
    } catch (err) {
      this.options.log.debug(`cell ${cell.index} not run again: ${err instanceof Error ? err.message : String(err)}`);
      return undefined;
    }
  }

  private async executeCell(
    kernel: NotebookKernel,
    execution: vscode.NotebookCellExecution,
    signal: AbortSignal,
    chain: RunChain | undefined,
  ): Promise<void> {
    // Output calls go out at once, in the order the kernel sent them: VS Code queues a run's
    // output edits and sends them before its end, so waiting for the editor to acknowledge each
    // (a round trip through the workbench, most of a trivial cell's run-and-wait) buys nothing.
    // One exception: items appended to a stream output sent in the same batch as the output
    // itself reach the extension host twice (VS Code 1.139), so they wait for the output.
    const emit = (edit: () => Thenable<void>) =>
      edit().then(undefined, (err: unknown) =>
        this.options.log.warn(`cell output could not be shown: ${err instanceof Error ? err.message : String(err)}`),
      );
    let appends: Thenable<unknown> = Promise.resolve();
    const cell = execution.cell;
    // What the cell shows, told to the editor layer as it changes (see KernelProvider.onDidReportRun).
    const shown = new RunOutputs();
    let outputReport: NodeJS.Timeout | undefined;
    const reportOutputs = (phase: 'running' | 'output') => {
      clearTimeout(outputReport);
      outputReport = undefined;
      this.reports.fire({ cell, phase, executionOrder: execution.executionOrder ?? 0, outputs: shown.current });
    };
    const outputsChanged = () => (outputReport ??= setTimeout(() => reportOutputs('output'), OUTPUT_REPORT_MS));
    let startTime: number | undefined;
    /** The cell's turn came (the kernel got it), or the driver reports on it before (a failure). */
    const start = () => {
      if (startTime !== undefined) return;
      startTime = Date.now();
      execution.start(startTime);
      execution.executionOrder = ++kernel.executionOrder;
      emit(() => execution.clearOutput());
      shown.cleared();
      reportOutputs('running');
    };
    let stream: { name: string; output: vscode.NotebookCellOutput; shown: Thenable<void> } | undefined;
    const budget = new OutputBudget();
    const appendStream = (name: StreamName, text: string) => {
      const item = name === 'stdout' ? vscode.NotebookCellOutputItem.stdout(text) : vscode.NotebookCellOutputItem.stderr(text);
      if (stream && stream.name === name) {
        const { output, shown: streamShown } = stream;
        appends = Promise.all([appends, streamShown.then(() => emit(() => execution.appendOutputItems(item, output)))]);
        shown.itemAppended(item, output);
      } else {
        const output = new vscode.NotebookCellOutput([item]);
        stream = { name, output, shown: emit(() => execution.appendOutput(output)) };
        shown.appended([output]);
      }
      outputsChanged();
    };
    const append = (outputs: vscode.NotebookCellOutput[]) => {
      stream = undefined;
      if (!outputs.length) return;
      emit(() => execution.appendOutput(outputs));
      shown.appended(outputs);
      outputsChanged();
    };
    const onOutput = (o: KernelOutput) => {
      start();
      if (o.kind === 'stream') {
        const text = budget.take(o.name, o.text);
        if (text) appendStream(o.name, text);
      } else
        append(
          o.kind === 'error'
            ? [errorOutput(o.name, o.message, o.traceback)]
            : bundleToOutputs(o.data, o.metadata, o.executionCount),
        );
    };
    let success: boolean | undefined;
    // The execution ends on every path: a cell left running blocks its notebook for good.
    try {
      const name = this.options.cellId && { id: this.options.cellId(cell), index: cell.index };
      const result = await kernel.process.run(cell.document.getText(), 'cell', onOutput, signal, start, name, chain);
      if (startTime === undefined) return; // dropped before its turn (interrupted while queued): it never ran
      if (result.executionCount !== undefined) {
        // IPython counts the cells it ran; the editor shows its count, as Jupyter does.
        execution.executionOrder = kernel.executionOrder = result.executionCount;
      }
      const held = budget.finish();
      if (held) {
        if (held.marker) append([new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.stderr(held.marker)])]);
        for (const piece of held.tail) appendStream(piece.name, piece.text);
      }
      if (result.value) append(bundleToOutputs(result.value, undefined, execution.executionOrder));
      success = result.status === 'interrupted' ? undefined : result.success;
    } catch (err) {
      this.options.log.warn(`cell run failed in the editor: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      clearTimeout(outputReport);
      await appends;
      const started = startTime !== undefined;
      startTime ??= Date.now();
      if (!started) execution.start(startTime);
      // A run dropped before its turn has no count (the execution still holds the cell's last one).
      const order = started ? execution.executionOrder : undefined;
      await savedCountCleared(cell, order, this.options.log);
      // After its start, so a cell's end times only grow: the editor layer tells its ends apart by them.
      const endTime = Math.max(Date.now(), startTime + 1);
      execution.end(success, endTime);
      this.reports.fire({
        cell,
        phase: 'ended',
        summary: { executionOrder: order, success, timing: { startTime, endTime } },
        outputs: started ? shown.current : undefined,
      });
    }
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

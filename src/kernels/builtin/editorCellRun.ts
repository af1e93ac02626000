import * as vscode from 'vscode';
import type { StreamName } from '../../core/model/kernelPort';
import type { Log } from '../../core/log';
import type { CellRunReport } from '../kernelProvider';
import { bundleToOutputs, errorOutput } from './editorOutputs';
import type { KernelOutput, KernelRunResult } from './kernelProcess';
import { OutputBudget } from './outputBudget';
import { RunOutputs } from './runOutputs';
import type { SavedCountWatch } from './savedCounts';
import { errorMessage } from '../../core/errorMessage';
import type { RunDataflow } from '../../core/model/cellGraph';

/** Outputs shown during a run are reported at most this often (VS Code sends them on as often). */
const OUTPUT_REPORT_MS = 10;
/**
 * Longest wait at a run's end for the editor to take its outputs. Past it the run ends without
 * them and the log says so: an output edit the workbench never answers must not leave the cell
 * running (and the notebook's Interrupt showing) for good.
 */
const OUTPUTS_TAKEN_MS = 30_000;

/**
 * One cell's run as the editor shows it: the execution's start, its outputs as the kernel sends
 * them (streams within the output budget), its value and its end, each told to the editor layer
 * (KernelProvider.onDidReportRun) as it happens. The builtin controller drives one per run:
 * `start` when the kernel takes the cell, `output` for each output, `settle` with the kernel's
 * result, and `end` on every path.
 *
 * Output calls go out at once, in the order the kernel sent them: VS Code queues a run's output
 * edits and sends them before its end, so waiting for the editor to acknowledge each (a round
 * trip through the workbench, most of a trivial cell's run-and-wait) buys nothing. One
 * exception: items appended to a stream output sent in the same batch as the output itself
 * reach the extension host twice (VS Code 1.139), so they wait for the output.
 */
export class EditorCellRun {
  readonly cell: vscode.NotebookCell;
  /** What the cell shows, known before the workbench echoes it back. */
  private readonly shown = new RunOutputs();
  private readonly budget = new OutputBudget();
  /** Appends to stream outputs still on their way to the editor; the end waits for them. */
  private appends: Thenable<unknown> = Promise.resolve();
  /** The stream output the next text of the same stream is appended to. */
  private stream: { name: string; output: vscode.NotebookCellOutput; shown: Thenable<void> } | undefined;
  private outputReport: NodeJS.Timeout | undefined;
  private startTime: number | undefined;
  /** What the run read and changed, from the kernel's result. */
  private dataflow: RunDataflow | undefined;

  constructor(
    private readonly execution: vscode.NotebookCellExecution,
    private readonly report: (report: CellRunReport) => void,
    private readonly log: Log,
    /** Watched from the execution's creation: the change that resets the cell comes a round trip later. */
    private readonly savedCount: SavedCountWatch,
  ) {
    this.cell = execution.cell;
  }

  /** Whether the cell's turn came (a run dropped while queued never started). */
  get started(): boolean {
    return this.startTime !== undefined;
  }

  /** The cell's turn came (the kernel got it, with the run's count), or the driver reports on it before (a failure). */
  readonly start = (executionCount?: number): void => {
    if (this.startTime !== undefined) return;
    this.startTime = Date.now();
    this.execution.start(this.startTime);
    this.execution.executionOrder = executionCount;
    this.emit(() => this.execution.clearOutput());
    this.shown.cleared();
    this.reportOutputs('running');
  };

  /** One output of the kernel, shown in the cell. */
  readonly output = (o: KernelOutput): void => {
    this.start(undefined);
    if (o.kind === 'stream') {
      const text = this.budget.take(o.name, o.text);
      if (text) this.appendStream(o.name, text);
    } else
      this.append(
        o.kind === 'error'
          ? [errorOutput(o.name, o.message, o.traceback)]
          : bundleToOutputs(o.data, o.metadata, o.executionCount),
      );
  };

  /**
   * The kernel's result: its count, the stream tail the budget held back, the value. Returns the
   * execution's success (undefined for an interrupted run, as the editor shows it).
   */
  settle(result: KernelRunResult): boolean | undefined {
    // The kernel's count of the cells it ran (IPython's own); the editor shows it, as Jupyter does.
    this.execution.executionOrder = result.executionCount;
    this.dataflow = result.dataflow;
    const held = this.budget.finish();
    if (held) {
      if (held.marker) this.append([new vscode.NotebookCellOutput([vscode.NotebookCellOutputItem.stderr(held.marker)])]);
      for (const piece of held.tail) this.appendStream(piece.name, piece.text);
    }
    if (result.value) this.append(bundleToOutputs(result.value, undefined, this.execution.executionOrder));
    return result.status === 'interrupted' ? undefined : result.success;
  }

  /**
   * A run dropped before its turn because the series it belongs to stopped at a failure: the
   * execution ends without a start or an end time, so the cell shows as never run (its outputs
   * as they were), as Jupyter leaves the cells it cancels after a failure.
   */
  drop(): void {
    this.savedCount.dispose();
    this.execution.end(undefined);
    this.report({ cell: this.cell, phase: 'dropped' });
  }

  /** Ends the execution once its outputs are out, on every path: a cell left running blocks its notebook for good. */
  async end(success: boolean | undefined): Promise<void> {
    clearTimeout(this.outputReport);
    if (!(await settlesWithin(this.appends, OUTPUTS_TAKEN_MS)))
      this.log.warn(
        `cell ${this.cell.index}: the editor had not taken this run's outputs ${OUTPUTS_TAKEN_MS / 1000} s after the kernel finished it; the run ends without waiting for them`,
      );
    const started = this.startTime !== undefined;
    const startTime = (this.startTime ??= Date.now());
    if (!started) this.execution.start(startTime);
    // A run dropped before its turn has no count (the execution still holds the cell's last one).
    const order = started ? this.execution.executionOrder : undefined;
    await this.savedCount.cleared(order);
    this.savedCount.dispose();
    // After its start, so a cell's end times only grow: the editor layer tells its ends apart by them.
    const endTime = Math.max(Date.now(), startTime + 1);
    try {
      this.execution.end(success, endTime);
    } catch (err) {
      // The run is over all the same: its ticket must end, or every wait on it hangs.
      this.log.warn(`cell ${this.cell.index}: the editor refused the end of this run (${errorMessage(err)})`);
    }
    this.report({
      cell: this.cell,
      phase: 'ended',
      summary: { executionOrder: order, success, timing: { startTime, endTime } },
      outputs: started ? this.shown.current : undefined,
      dataflow: this.dataflow,
    });
  }

  private appendStream(name: StreamName, text: string): void {
    const item = name === 'stdout' ? vscode.NotebookCellOutputItem.stdout(text) : vscode.NotebookCellOutputItem.stderr(text);
    if (this.stream && this.stream.name === name) {
      const { output, shown: streamShown } = this.stream;
      this.appends = Promise.all([
        this.appends,
        streamShown.then(() => this.emit(() => this.execution.appendOutputItems(item, output))),
      ]);
      this.shown.itemAppended(item, output);
    } else {
      const output = new vscode.NotebookCellOutput([item]);
      this.stream = { name, output, shown: this.emit(() => this.execution.appendOutput(output)) };
      this.shown.appended([output]);
    }
    this.outputsChanged();
  }

  private append(outputs: vscode.NotebookCellOutput[]): void {
    this.stream = undefined;
    if (!outputs.length) return;
    this.emit(() => this.execution.appendOutput(outputs));
    this.shown.appended(outputs);
    this.outputsChanged();
  }

  /** An output call to the editor; a failure is logged, the run goes on. */
  private emit(edit: () => Thenable<void>): Thenable<void> {
    return edit().then(undefined, (err: unknown) => this.log.warn(`cell output could not be shown: ${errorMessage(err)}`));
  }

  private reportOutputs(phase: 'running' | 'output'): void {
    clearTimeout(this.outputReport);
    this.outputReport = undefined;
    this.report({ cell: this.cell, phase, executionOrder: this.execution.executionOrder ?? 0, outputs: this.shown.current });
  }

  private outputsChanged(): void {
    this.outputReport ??= setTimeout(() => this.reportOutputs('output'), OUTPUT_REPORT_MS);
  }
}

/** Whether `thenable` settled within `ms`. */
function settlesWithin(thenable: Thenable<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    const done = () => {
      clearTimeout(timer);
      resolve(true);
    };
    thenable.then(done, done);
  });
}

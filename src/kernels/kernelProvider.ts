import type * as vscode from 'vscode';
import type { InterruptHow, Kernel } from '../core/model/kernelPort';
import type { OutcomeKind } from '../core/outcome';
import type { RunDataflow } from '../core/model/cellGraph';

/**
 * Why a provider that serves a notebook cannot run code in it now, and what the person can do.
 * `forbidden`: the person refused the bridge access to this kernel; `unavailable`: not ready yet, retry.
 */
export class KernelUnavailable {
  constructor(
    readonly outcome: Extract<OutcomeKind, 'forbidden' | 'conflict' | 'unavailable'>,
    readonly detail: string,
  ) {}
}

/**
 * A step of a cell's run as the controller running it took it: queued, running (its outputs
 * cleared), an output shown, ended. `outputs` are the cell's outputs as the controller has set
 * them (undefined: left as they were, a run interrupted before its turn). `dropped`: the run
 * never started and the cell shows as never run (a series stopped at a failure before it).
 */
export type CellRunReport =
  | { cell: vscode.NotebookCell; phase: 'queued' }
  | { cell: vscode.NotebookCell; phase: 'dropped' }
  | {
      cell: vscode.NotebookCell;
      phase: 'running' | 'output';
      executionOrder: number;
      outputs: readonly vscode.NotebookCellOutput[];
    }
  | {
      cell: vscode.NotebookCell;
      phase: 'ended';
      summary: vscode.NotebookCellExecutionSummary;
      outputs: readonly vscode.NotebookCellOutput[] | undefined;
      /** What the run read and changed, where its kernel recorded it. */
      dataflow?: RunDataflow | undefined;
    };

/**
 * One way of reaching a notebook's kernel (our builtin controller, or another extension's
 * exported API). `kernelFor` answers undefined when this provider does not serve that
 * notebook, so the next provider is asked, and KernelUnavailable when it serves it but cannot
 * run code now. The editor layer (src/notebooks) knows kernels only through this interface.
 */
export interface KernelProvider {
  readonly name: string;
  kernelFor(notebook: vscode.NotebookDocument): Promise<Kernel | KernelUnavailable | undefined>;
  /**
   * Stops what the notebook's kernel runs and says how (SIGINT, or a restart that lost its state);
   * undefined when this provider does not serve the notebook.
   */
  interrupt(notebook: vscode.NotebookDocument): Promise<InterruptHow | undefined>;
  /** Restarts the notebook's kernel (its state is lost); false when this provider does not serve the notebook. */
  restart(notebook: vscode.NotebookDocument): Promise<boolean>;
  /**
   * Selects this provider's kernel for the notebook shown in `editor` and starts it, as the
   * person would from the kernel picker; throws a BridgeError saying why when it cannot.
   */
  start(editor: vscode.NotebookEditor): Promise<void>;
  /**
   * Runs the cells through this provider's own notebook controller, as the editor's Run does
   * (queued, then running, shown in the editor), without waiting for them to end; false when
   * it does not serve the notebook. Saves VS Code's notebook command, which goes through the
   * workbench and back before the controller sees the cells; providers without it are run by
   * the command. `stopAfterFailure`: once a cell fails, the cells after it are dropped before
   * their turn and show as never run.
   */
  runCells?(notebook: vscode.NotebookDocument, cells: readonly vscode.NotebookCell[], stopAfterFailure: boolean): boolean;
  /**
   * Whether the notebook's kernel, run through VS Code's command, cancels the cells queued behind
   * a run that fails (they end unstarted and show as never run), as Jupyter's queue does unless
   * the failed cell is tagged `raises-exception`: a series that stops at a failure can then be
   * queued at once.
   */
  stopsAtFailure?(notebook: vscode.NotebookDocument): boolean;
  /**
   * Fires as this provider's own controller moves a cell's run along, at the moment it does:
   * before the workbench has applied the step and echoed it to the extension host's document
   * (on a busy workbench, a tenth of a second to seconds later).
   */
  readonly onDidReportRun?: vscode.Event<CellRunReport>;
  /** Fires when the set of notebooks this provider serves may have changed. */
  readonly onDidChange: vscode.Event<void>;
}

import * as vscode from 'vscode';
import type { ExecutionState } from '../core/model/cellService';
import { Ticket, runIdMinter, type RunTicket } from '../core/model/runTicket';
import type { CellRunReport } from '../kernels/kernelProvider';
import type { RunDataflow } from '../core/model/cellGraph';

/** VS Code clears a cell's outputs, then its summary, in two steps of one action. */
const CLEAR_WINDOW_MS = 500;
/** Longest wait, once the document shows a run's end, for the .ipynb support's count of it. */
const COUNT_WAIT_MS = 2_000;
/** Ended tickets kept for lookup by run id (a wait that timed out waits again by it). */
const KEEP_ENDED = 500;
/** Runs nobody asked the bridge for, kept per notebook to tell which followed a run (the newest). */
const KEEP_UNASKED = 200;

/** What a cell's controller reported of its runs, ahead of the extension host's document. */
interface Reported {
  summary: vscode.NotebookCellExecutionSummary;
  /** Undefined: as the document has them. */
  outputs: readonly vscode.NotebookCellOutput[] | undefined;
  /** End times of the reported ends the document does not show yet, oldest first (they only grow). */
  unshown: number[];
  /** Set while the document shows the last end but not yet the count the .ipynb support writes for it. */
  countWait?: NodeJS.Timeout;
  /**
   * The last run was dropped before its turn: the cell shows as never run. The document's echoes
   * of that (its summary emptied when queued, and again when the run ended unstarted) look like a
   * run queued, so they are not read as one; a summary with a count or an end is a later run.
   */
  dropped?: true;
}

interface CellRuns {
  /** The cell's latest run. */
  ticket: Ticket | undefined;
  /** The document showed the open ticket queued or running (an end after that is its end). */
  seenLive: boolean;
  /** End time of the last end taken, to tell a new end from the old summary. */
  lastEnd: number | undefined;
  /** Set while the cell's controller reported steps the document does not show yet. */
  reported: Reported | undefined;
  /** When the outputs were last cleared outside a run ("Clear Outputs" also resets the summary). */
  clearedAt?: number;
  /** The cell's text when its latest run started (what its outputs come from; staleness reads it). */
  ranCode?: string;
  /**
   * Its run was queued behind a run that failed, in a kernel that then cancels what is queued
   * (Jupyter's): the next emptied summary the document shows is that cancel, not a start.
   */
  cancelling?: true;
  /** What its latest run read and changed, where its controller reported it (the builtin kernel). */
  dataflow?: RunDataflow;
}

/**
 * The run tickets of the open notebooks' cells: one per cell run, whichever provider runs it.
 * Two fillers, each in one place: `report` takes the steps a provider's own controller reports
 * (the builtin kernel, ahead of the document: on a busy workbench its echo comes a tenth of a
 * second to seconds later); the document's changes fill the tickets of every other run (Jupyter,
 * marimo, any kernel run through `notebook.cell.execute`), and tell when the document caught up
 * with the reported ones, which saves and copies wait for (they are written from the document).
 */
export class RunTickets implements vscode.Disposable {
  private readonly cells = new WeakMap<vscode.NotebookCell, CellRuns>();
  private readonly byId = new Map<string, { ticket: Ticket; cell: vscode.NotebookCell; seq: number }>();
  /**
   * Per notebook, the runs the document showed that no one asked the bridge for, oldest first:
   * the kernel's own (marimo re-runs a cell's dependents) or the person's.
   */
  private readonly unasked = new WeakMap<vscode.NotebookDocument, { ticket: Ticket; seq: number }[]>();
  private opened = 0;
  /** Per notebook, its cells with reported ends the document does not show yet. */
  private readonly behind = new WeakMap<vscode.NotebookDocument, Set<vscode.NotebookCell>>();
  private readonly mint = runIdMinter();
  private readonly changed = new vscode.EventEmitter<vscode.NotebookDocument>();
  /** Fires after a notebook's cells changed, once its tickets are up to date. */
  readonly onDidChange = this.changed.event;
  /** Fires when a notebook's document showed more of the reported ends. */
  private readonly shown = new vscode.EventEmitter<vscode.NotebookDocument>();
  private readonly subscriptions = [
    this.changed,
    this.shown,
    vscode.workspace.onDidChangeNotebookDocument((e) => this.documentChanged(e)),
    vscode.workspace.onDidCloseNotebookDocument((notebook) => {
      for (const { ticket, cell } of this.byId.values()) if (cell.notebook === notebook) ticket.drop();
      this.behind.delete(notebook);
      this.shown.fire(notebook);
    }),
  ];

  constructor(
    private readonly cellId: (cell: vscode.NotebookCell) => string,
    /** Whether the notebook's kernel cancels the cells queued behind a failed run (KernelProvider.stopsAtFailure). */
    private readonly stopsAtFailure: (notebook: vscode.NotebookDocument) => boolean = () => false,
  ) {}

  /** The ticket of a run by its id, while the window remembers it. */
  ticket(runId: string): RunTicket | undefined {
    return this.byId.get(runId)?.ticket;
  }

  /**
   * Runs of other cells of the run's notebook that the document showed starting after this run
   * was opened and that no one asked the bridge for: the kernel's own (marimo queues a cell's
   * dependents when it runs the cell, before the cell's run ends), or the person's. Oldest first.
   */
  startedAfter(runId: string): RunTicket[] {
    const entry = this.byId.get(runId);
    if (!entry) return [];
    return (this.unasked.get(entry.cell.notebook) ?? [])
      .filter((u) => u.seq > entry.seq && u.ticket.cellId !== entry.ticket.cellId)
      .map((u) => u.ticket);
  }

  /** The ticket of the cell's latest run in this window. */
  latest(cell: vscode.NotebookCell): RunTicket | undefined {
    return this.cells.get(cell)?.ticket;
  }

  /**
   * The ticket of the cell's next run, before it is handed to a provider: the run under way when
   * there is one (VS Code's Run skips a queued or running cell too).
   */
  request(cell: vscode.NotebookCell): RunTicket {
    const runs = this.runs(cell);
    return runs.ticket?.open ? runs.ticket : this.open(cell, runs);
  }

  /** A run that was requested did not reach its provider: its ticket ends as gone. */
  failed(ticket: RunTicket): void {
    const entry = this.byId.get(ticket.runId);
    if (entry?.ticket.phase === 'queued') entry.ticket.drop();
  }

  /** A step of a run as its controller took it: the ticket moves on now, not at the document's echo. */
  report(report: CellRunReport): void {
    const { cell } = report;
    const runs = this.runs(cell);
    const ticket = runs.ticket?.open ? runs.ticket : this.open(cell, runs);
    const held = runs.reported;
    const unshown = held?.unshown ?? [];
    const outputs = 'outputs' in report ? (report.outputs ?? held?.outputs) : held?.outputs;
    if (report.phase === 'dropped') {
      // What the document is to show of the cell's earlier runs no longer matters: it shows none.
      this.caughtUpWith(cell);
      runs.reported = { summary: {}, outputs: undefined, unshown: [], dropped: true };
      ticket.step('ended');
      this.changed.fire(cell.notebook);
      return;
    }
    if (report.phase === 'ended') {
      clearTimeout(held?.countWait);
      const end = report.summary.timing?.endTime;
      if (end !== undefined) unshown.push(end);
      runs.reported = { summary: report.summary, outputs, unshown };
      runs.lastEnd = end;
      this.behindOf(cell.notebook).add(cell);
    } else {
      // VS Code empties a cell's summary when it queues it, and the order comes with the start.
      const summary = report.phase === 'queued' ? {} : { executionOrder: report.executionOrder };
      runs.reported = { summary, outputs, unshown, countWait: held?.countWait };
    }
    if (report.phase === 'running') {
      runs.ranCode = cell.document.getText();
      runs.dataflow = undefined;
    }
    if (report.phase === 'ended') runs.dataflow = report.dataflow;
    ticket.step(report.phase === 'output' ? 'running' : report.phase);
    this.changed.fire(cell.notebook);
  }

  execution(cell: vscode.NotebookCell): ExecutionState {
    const runs = this.runs(cell);
    const summary = runs.reported?.summary ?? cell.executionSummary;
    const timing = summary?.timing;
    return {
      order: summary?.executionOrder ?? null,
      success: summary?.success ?? null,
      ended: timing !== undefined,
      durationMs: timing ? Math.max(0, timing.endTime - timing.startTime) : null,
      status: runs.ticket?.phase === 'queued' || runs.ticket?.phase === 'running' ? runs.ticket.phase : 'idle',
      endedAt: timing?.endTime,
      startedAt: timing?.startTime,
      ranCode: runs.ranCode,
      dataflow: runs.dataflow,
    };
  }

  /** The cell's outputs, as its controller last reported them while the document lags behind. */
  outputs(cell: vscode.NotebookCell): readonly vscode.NotebookCellOutput[] {
    return this.cells.get(cell)?.reported?.outputs ?? cell.outputs;
  }

  /** A cell the bridge re-created (a move, a copy, cleared outputs) continues its original's runs. */
  adopt(cell: vscode.NotebookCell, from: vscode.NotebookCell): void {
    const previous = this.cells.get(from);
    if (previous)
      this.cells.set(cell, {
        ticket: previous.ticket,
        seenLive: false,
        lastEnd: cell.executionSummary?.timing?.endTime,
        reported: undefined,
      });
  }

  /**
   * Resolves once the notebook's document shows all but at most `unshown` of the run ends
   * reported (0: all of them, so what is then written from the document's cells, a save, a
   * copy of a cell or its metadata, carries those runs); false after `timeoutMs`.
   */
  async caughtUp(notebook: vscode.NotebookDocument, unshown: number, timeoutMs: number): Promise<boolean> {
    const within = () => {
      let n = 0;
      for (const cell of this.behind.get(notebook) ?? []) n += this.cells.get(cell)?.reported?.unshown.length ?? 0;
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

  private documentChanged(e: vscode.NotebookDocumentChangeEvent): void {
    if (e.cellChanges.some((c) => failedEnd(c)) && this.stopsAtFailure(e.notebook)) this.cancelQueued(e);
    for (const change of e.contentChanges)
      for (const cell of change.removedCells) {
        // A cell removed before its run ended (or before the workbench applied its ends).
        this.cells.get(cell)?.ticket?.drop();
        this.caughtUpWith(cell);
      }
    for (const change of e.cellChanges) {
      const runs = this.runs(change.cell);
      // The document catching up with steps the cell's controller reported already.
      if (runs.reported) {
        if (change.outputs?.length === 0 && !runs.ticket?.open && runs.reported.countWait !== undefined) {
          // Outputs cleared once the document showed the run's end (it waited only for the count):
          // the person cleared them, and the document is what the cell holds again.
          this.caughtUpWith(change.cell);
          runs.reported = undefined;
          runs.clearedAt = Date.now();
          continue;
        }
        this.echoed(change.cell, runs, change);
        continue;
      }
      const cleared = change.outputs?.length === 0;
      if (change.executionSummary) this.observe(change.cell, runs, change.executionSummary, cleared);
      else if (change.outputs && runs.ticket?.phase === 'running') runs.ticket.step('running');
      else if (cleared && !runs.ticket?.open) runs.clearedAt = Date.now();
    }
    this.changed.fire(e.notebook);
  }

  /**
   * A run failed in a kernel that then cancels the cells queued behind it (unless the failed cell
   * is tagged `raises-exception`): the runs the document shows queued, not started, are to end
   * unstarted. Their cancels arrive after the failure, in order.
   */
  private cancelQueued(e: vscode.NotebookDocumentChangeEvent): void {
    const failed = e.cellChanges.filter((c) => failedEnd(c)).map((c) => c.cell);
    if (failed.every((cell) => tagsOf(cell).includes('raises-exception'))) return;
    for (const cell of e.notebook.getCells()) {
      const runs = this.cells.get(cell);
      if (runs?.ticket?.phase === 'queued' && runs.seenLive && !runs.reported) runs.cancelling = true;
    }
  }

  /**
   * A run the document shows: VS Code clears a cell's summary when it queues it, and fills in the
   * timing when it ends. Changes of one cell can arrive merged, so an end counts when the
   * summary's end time is new, or the document showed the open run live before.
   */
  private observe(
    cell: vscode.NotebookCell,
    runs: CellRuns,
    summary: vscode.NotebookCellExecutionSummary,
    outputsCleared: boolean,
  ): void {
    const end = summary.timing?.endTime;
    const reset = summary.executionOrder === undefined && summary.success === undefined;
    if (runs.cancelling) {
      runs.cancelling = undefined;
      // Cancelled before its turn: the cell shows as never run, and the run ends so.
      if (reset && end === undefined && runs.ticket?.phase === 'queued') return runs.ticket.step('ended');
    }
    if (end === undefined) {
      const clearing = outputsCleared || Date.now() - (runs.clearedAt ?? 0) < CLEAR_WINDOW_MS;
      // "Clear Outputs" empties the summary the way queueing a run does; it starts no run.
      if (reset && clearing && !runs.ticket?.open) return;
      const ticket = runs.ticket?.open ? runs.ticket : this.open(cell, runs, true);
      runs.seenLive = true;
      const phase = summary.executionOrder === undefined ? 'queued' : 'running';
      if (phase === 'running' && ticket.phase !== 'running') {
        runs.ranCode = cell.document.getText();
        runs.dataflow = undefined;
      }
      ticket.step(phase);
      return;
    }
    if (end === runs.lastEnd && !runs.seenLive) return;
    runs.lastEnd = end;
    const ticket = runs.ticket?.open ? runs.ticket : this.open(cell, runs, true);
    ticket.step('ended');
  }

  /**
   * The document changed a cell whose controller reported steps it did not show yet. The cell is
   * no longer held once the document shows its last reported end and no run is under way.
   */
  private echoed(cell: vscode.NotebookCell, runs: CellRuns, change: vscode.NotebookDocumentCellChange): void {
    const reported = runs.reported!;
    if (reported.dropped) {
      const summary = change.executionSummary;
      // Another controller's run (the builtin one reports its own): the document tells it.
      if (summary && (summary.executionOrder !== undefined || summary.timing)) {
        this.caughtUpWith(cell);
        runs.reported = undefined;
        this.observe(cell, runs, summary, change.outputs?.length === 0);
      }
      return;
    }
    const shown = cell.executionSummary?.timing?.endTime;
    const last = reported.unshown.at(-1);
    if (shown === undefined || last === undefined) return;
    const before = reported.unshown.length;
    // Changes can arrive merged: an end shown also shows the ones before it.
    reported.unshown = reported.unshown.filter((end) => end > shown || end === last);
    if (reported.unshown.length < before) this.shown.fire(cell.notebook);
    if (last <= shown) {
      if (countShown(cell)) this.release(cell, last);
      // Should the .ipynb support not write the count, the end is enough after a while.
      else reported.countWait ??= setTimeout(() => this.release(cell, last), COUNT_WAIT_MS);
    }
  }

  /** The document shows the end at `endTime`, the cell's last reported one. */
  private release(cell: vscode.NotebookCell, endTime: number): void {
    const runs = this.cells.get(cell);
    if (runs?.reported?.unshown.at(-1) !== endTime) return;
    this.caughtUpWith(cell);
    if (!runs.ticket?.open) runs.reported = undefined;
  }

  private caughtUpWith(cell: vscode.NotebookCell): void {
    const reported = this.cells.get(cell)?.reported;
    if (reported) {
      clearTimeout(reported.countWait);
      reported.countWait = undefined;
      reported.unshown = [];
    }
    if (this.behind.get(cell.notebook)?.delete(cell)) this.shown.fire(cell.notebook);
  }

  /** A new ticket for the cell's next run; `unasked`: the document shows a run no one asked the bridge for. */
  private open(cell: vscode.NotebookCell, runs: CellRuns, unasked = false): Ticket {
    const ticket = new Ticket(this.mint(), this.cellId(cell));
    const seq = ++this.opened;
    runs.ticket = ticket;
    runs.seenLive = false;
    this.byId.set(ticket.runId, { ticket, cell, seq });
    if (unasked) {
      let list = this.unasked.get(cell.notebook);
      if (!list) this.unasked.set(cell.notebook, (list = []));
      list.push({ ticket, seq });
      if (list.length > KEEP_UNASKED) list.splice(0, list.length - KEEP_UNASKED);
    }
    // The oldest ended tickets go first (a Map iterates in insertion order).
    if (this.byId.size > KEEP_ENDED)
      for (const [id, entry] of this.byId) {
        if (this.byId.size <= KEEP_ENDED) break;
        if (!entry.ticket.open) this.byId.delete(id);
      }
    return ticket;
  }

  private runs(cell: vscode.NotebookCell): CellRuns {
    let runs = this.cells.get(cell);
    if (!runs) {
      runs = { ticket: undefined, seenLive: false, lastEnd: cell.executionSummary?.timing?.endTime, reported: undefined };
      this.cells.set(cell, runs);
    }
    return runs;
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

/** The change shows a run ending without success. */
function failedEnd(change: vscode.NotebookDocumentCellChange): boolean {
  return change.executionSummary?.timing !== undefined && change.executionSummary.success === false;
}

/** The cell's nbformat tags (.ipynb keeps them under the cell metadata's `metadata`). */
function tagsOf(cell: vscode.NotebookCell): unknown[] {
  const tags = (cell.metadata as { metadata?: { tags?: unknown } }).metadata?.tags;
  return Array.isArray(tags) ? tags : [];
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

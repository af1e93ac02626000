import { access, constants } from 'node:fs/promises';
import * as vscode from 'vscode';
import { KernelUnavailable, type KernelProvider } from '../kernels/kernelProvider';
import { MARIMO_SOURCE, marimoPythonLanguage } from '../kernels/marimoKernels';
import type {
  CellMetadata,
  CellSnapshot,
  IndexRange,
  NewCell,
  NotebookChange,
  NotebookEntry,
  OpenNotebooks,
} from '../core/model/cellService';
import { BridgeError } from '../core/bridgeError';
import type { EditStopwatch } from '../core/flow/editSpans';
import type { InterruptHow, KernelStatus } from '../core/model/kernelPort';
import type { Log } from '../core/log';
import type { RunTicket } from '../core/model/runTicket';
import { changeSteps } from '../core/cells/changeSteps';
import { rollbackPlan } from '../core/cells/rollbackPlan';
import { CellIds, keepsFileIds } from './cellIds';
import { FileStamps } from './fileStamps';
import { RunTickets } from './runTickets';
import { VersionStore } from './versionStore';
import type { Sessions } from './notebookRegistry';
import { errorMessage } from '../core/errorMessage';

/** Longest wait for the document to show the runs a controller reported ended, before writing from it. */
const CATCH_UP_MS = 10_000;
/**
 * How far the editor may fall behind the runs agents were answered about: a new run waits while
 * more ended runs than this are yet to show in it. The editor's renderer, not the kernel, sets
 * the pace of runs (SETUP.md, measured figures), so a tight loop of runs would otherwise leave it
 * many seconds behind.
 */
const MAX_UNSHOWN_RUNS = 30;

const CHANGED_MEANWHILE =
  'The notebook changed while the edit was being applied (someone is typing in it?); nothing was changed. Read the cells again and retry.';

/**
 * The open notebooks of this window, for the cell rules. Edits go through
 * `workspace.applyEdit` exactly as the person's own would (one WorkspaceEdit per request, so
 * one undo step); runs go to the kernel's provider where it runs cells itself (the builtin
 * kernel), else, like interrupts, through VS Code's notebook commands, so any kernel the person
 * selected does the work.
 */
export class EditorNotebooks implements OpenNotebooks, vscode.Disposable {
  private readonly ids: CellIds;
  private readonly tickets = new RunTickets(
    (cell) => this.ids.id(cell),
    (notebook) => this.kernels.some((provider) => provider.stopsAtFailure?.(notebook)),
  );
  private readonly stamps = new FileStamps();
  private readonly reports: vscode.Disposable[];
  /** Cell texts the bridge is writing now: the editor reports their change before the write resolves. */
  private readonly writing = new Set<vscode.TextDocument>();

  constructor(
    private readonly sessions: Sessions,
    private readonly kernels: readonly KernelProvider[],
    private readonly log: Log,
    /** Where cell versions are kept across window restarts (see VersionStore). */
    versionFile?: string,
  ) {
    this.ids = new CellIds(versionFile === undefined ? undefined : new VersionStore(versionFile));
    this.reports = kernels.flatMap((k) => (k.onDidReportRun ? [k.onDidReportRun((r) => this.tickets.report(r))] : []));
  }

  list(): NotebookEntry[] {
    return this.sessions.entries();
  }

  async kernel(uri: string): Promise<{ kind: string; status: KernelStatus } | { unavailable: string }> {
    const kernel = await this.sessions.resolveKernel(this.notebook(uri));
    return kernel instanceof KernelUnavailable ? { unavailable: kernel.detail } : { kind: kernel.kind, status: kernel.status() };
  }

  active() {
    const editor = vscode.window.activeNotebookEditor;
    if (!editor) return null;
    const range = (r: vscode.NotebookRange): IndexRange => ({ start: r.start, end: r.end });
    return {
      uri: editor.notebook.uri.toString(),
      selections: editor.selections.map(range),
      visibleRanges: editor.visibleRanges.map(range),
    };
  }

  cells(uri: string): CellSnapshot[] {
    return this.notebook(uri)
      .getCells()
      .map((cell) => ({
        id: this.ids.id(cell),
        kind: cell.kind === vscode.NotebookCellKind.Code ? 'code' : 'markup',
        language: cell.document.languageId,
        code: cell.document.getText(),
        version: this.ids.version(cell),
        metadata: agentMetadata(cell),
        execution: this.tickets.execution(cell),
        outputs: this.tickets.outputs(cell).map((o) => ({ items: o.items.map((i) => ({ mime: i.mime, data: i.data })) })),
      }));
  }

  /** The stable id of a cell of an open notebook. */
  cellId(cell: vscode.NotebookCell): string {
    return this.ids.id(cell);
  }

  /** Whether a change of this cell text is the bridge's own write under way (not the person typing). */
  isWriting(document: vscode.TextDocument): boolean {
    return this.writing.has(document);
  }

  /** Applies an edit that writes these cell texts, which are marked as the bridge's while it applies. */
  private async write(edit: vscode.WorkspaceEdit, texts: readonly vscode.TextDocument[]): Promise<boolean> {
    for (const document of texts) this.writing.add(document);
    try {
      return await vscode.workspace.applyEdit(edit);
    } finally {
      for (const document of texts) this.writing.delete(document);
    }
  }

  defaultLanguage(uri: string): string {
    const notebook = this.notebook(uri);
    if (notebook.notebookType === MARIMO_SOURCE.notebookType) return marimoPythonLanguage();
    // .ipynb keeps nbformat's metadata under `metadata`; other serializers may not have any.
    const meta = notebook.metadata as { metadata?: NbMeta } & NbMeta;
    const nb = meta.metadata ?? meta;
    return nb.language_info?.name ?? nb.kernelspec?.language ?? 'python';
  }

  newId(uri: string): string {
    return this.ids.newId(this.notebook(uri));
  }

  /**
   * Applies the change as one WorkspaceEdit (one undo step) when it is within STEP_CELLS cells,
   * else in steps of at most that many (changeSteps.ts), each one edit, so the extension host
   * answers between them. All or nothing either way: when a step cannot be applied (the person
   * changed the notebook's cells in between), the steps already applied are taken back, in one
   * edit, and the answer is the same 409 as for a single edit.
   */
  async apply(uri: string, change: NotebookChange, span?: EditStopwatch): Promise<void> {
    const notebook = this.notebook(uri);
    // Copies and metadata are written from the document's cells: with the runs' ends in them.
    if (change.metadata.length || change.splices.some((s) => s.cells.some((c) => c.copyOf !== undefined)))
      await this.caughtUp(notebook);
    const originals = notebook.getCells();
    const steps = changeSteps(change);
    // Between steps the person may type: a cell a later step rewrites must still read as it did.
    const read = steps.length > 1 ? new Map(originals.map((c) => [c.document, c.document.getText()])) : undefined;
    const applied: Applied = { made: new Set(), texts: [], metadata: [], read };
    span?.applying();
    const seen = span && vscode.workspace.onDidChangeNotebookDocument((e) => e.notebook === notebook && span.shown());
    for (const step of steps) {
      // An Error is made only on failure: capturing its stack took up to 120 ms on a loaded host.
      let thrown: { error: unknown } | undefined;
      const done = await this.applyStep(notebook, step, originals, applied).catch((error: unknown) => {
        thrown = { error };
        return false;
      });
      if (done) continue;
      seen?.dispose();
      if (step !== steps[0] && !notebook.isClosed) await this.rollBack(notebook, originals, change.expectIds, applied);
      throw thrown ? thrown.error : new BridgeError('stale', CHANGED_MEANWHILE);
    }
    seen?.dispose();
    span?.applied();
    if (notebook.cellCount !== change.resultIds.length) {
      this.log.warn(`cell edit of ${uri}: expected ${change.resultIds.length} cells, found ${notebook.cellCount}`);
    }
  }

  /** One step of a change; false when the notebook is not as the step expects or VS Code refused it. */
  private async applyStep(
    notebook: vscode.NotebookDocument,
    step: NotebookChange,
    originals: readonly vscode.NotebookCell[],
    applied: Applied,
  ): Promise<boolean> {
    const cells = notebook.getCells();
    if (cells.length !== step.expectIds.length || cells.some((c, i) => this.ids.id(c) !== step.expectIds[i])) return false;
    const typed = (document: vscode.TextDocument) => applied.read && document.getText() !== applied.read.get(document);
    if (step.texts.some((t) => typed(cells[t.index]!.document))) return false;

    // Structure first: text edits bump the notebook's version, which VS Code checks before
    // applying cell edits (it checks each cell text's own version before its text edit).
    const edit = new vscode.WorkspaceEdit();
    const structure = [
      ...step.splices.map((s) =>
        vscode.NotebookEdit.replaceCells(
          new vscode.NotebookRange(s.start, s.end),
          s.cells.map((c) => cellData(c, originals, notebook)),
        ),
      ),
      ...step.metadata.map((m) => vscode.NotebookEdit.updateCellMetadata(m.index, editorMetadata(cells[m.index]!, m.metadata))),
    ];
    if (structure.length) edit.set(notebook.uri, structure);
    for (const t of step.texts) {
      const document = cells[t.index]!.document;
      edit.replace(document.uri, fullRange(document), t.code);
    }
    const texts = step.texts.map((t) => ({
      document: cells[t.index]!.document,
      was: cells[t.index]!.document.getText(),
      wrote: t.code,
    }));
    const metadata = step.metadata.map((m) => ({ cell: cells[m.index]!, was: cells[m.index]!.metadata }));
    if (
      !(await this.write(
        edit,
        texts.map((t) => t.document),
      ))
    )
      return false;
    applied.texts.push(...texts);
    applied.metadata.push(...metadata);

    // Cells VS Code created for our copies take over the ids (and history) of their originals.
    let shift = 0;
    for (const s of step.splices) {
      s.cells.forEach((c, k) => {
        const index = s.start + shift + k;
        if (index >= notebook.cellCount) return;
        const cell = notebook.cellAt(index);
        applied.made.add(cell);
        this.ids.adopt(cell, c.id, c.version);
        if (c.copyOf !== undefined) this.tickets.adopt(cell, originals[c.copyOf]!);
      });
      shift += s.cells.length - (s.end - s.start);
    }
    return true;
  }

  /**
   * Takes back the steps applied of a change (rollbackPlan.ts), in one edit: the cells they made
   * go, the cells they removed come back with their ids, runs and outputs, and texts and metadata
   * they wrote go back to what they were (a text someone typed into since stays).
   */
  private async rollBack(
    notebook: vscode.NotebookDocument,
    originals: readonly vscode.NotebookCell[],
    originalIds: readonly string[],
    applied: Applied,
  ): Promise<void> {
    const now = notebook.getCells();
    const plan = rollbackPlan(now, originals, applied.made);
    const restored = plan.flatMap((r) => r.restore);
    const versions = restored.map((k) => this.ids.version(originals[k]!));
    const edit = new vscode.WorkspaceEdit();
    const present = new Set(now);
    edit.set(notebook.uri, [
      ...plan.map((r) =>
        vscode.NotebookEdit.replaceCells(
          new vscode.NotebookRange(r.start, r.end),
          r.restore.map((k) => copyOf(originals[k]!, notebook)),
        ),
      ),
      ...applied.metadata
        .filter((m) => present.has(m.cell))
        .map((m) => vscode.NotebookEdit.updateCellMetadata(now.indexOf(m.cell), m.was)),
    ]);
    const rewound = applied.texts.filter((t) => !t.document.isClosed && t.document.getText() === t.wrote);
    for (const t of rewound) edit.replace(t.document.uri, fullRange(t.document), t.was);
    const label = this.sessions.label(notebook);
    if (
      !(await this.write(
        edit,
        rewound.map((t) => t.document),
      ))
    ) {
      this.log.warn(`${label}: a batch failed midway and could not be taken back; its first steps stay applied`);
      throw new BridgeError(
        'stale',
        `The notebook changed while a large edit was being applied in steps, and the steps already applied could not be taken back: ${label} holds part of the edit. Read the cells, then fix them or ask the person to undo (Ctrl+Z takes back one step at a time).`,
      );
    }
    const back = notebook.getCells().filter((c) => !present.has(c));
    back.forEach((cell, j) => {
      const k = restored[j];
      if (k === undefined) return;
      this.ids.adopt(cell, originalIds[k]!, versions[j]!);
      this.tickets.adopt(cell, originals[k]!);
    });
    this.log.info(
      `${label}: a batch failed midway; the ${applied.made.size} cell(s) and ${applied.texts.length} text(s) its first steps wrote were taken back`,
    );
  }

  async execute(uri: string, ids: readonly string[], stopAfterFailure = false): Promise<RunTicket[]> {
    const notebook = this.notebook(uri);
    await this.caughtUp(notebook, MAX_UNSHOWN_RUNS);
    const cells = notebook.getCells();
    const indices = this.indicesOf(cells, ids);
    const chosen = indices.map((i) => cells[i]!);
    // A controller that runs cells itself opens their tickets as it queues them (synchronously),
    // and needs no editor: the notebook is not brought to the front (that costs the workbench a
    // layout, a tenth of a second on a busy machine).
    if (this.kernels.some((provider) => provider.runCells?.(notebook, chosen, stopAfterFailure)))
      return chosen.map((cell) => this.tickets.request(cell));
    await this.showEditor(notebook);
    // Where VS Code's command cannot stop after a failure, only the first is queued, and the caller queues the next.
    const all = !stopAfterFailure || this.kernels.some((provider) => provider.stopsAtFailure?.(notebook));
    const queued = all ? indices : indices.slice(0, 1);
    const tickets = queued.map((i) => this.tickets.request(cells[i]!));
    const ranges = queued.map((i) => ({ start: i, end: i + 1 }));
    // The command resolves only when the cells are done (for some kernels): don't wait for it.
    void vscode.commands
      .executeCommand('notebook.cell.execute', { ranges, document: notebook.uri })
      .then(undefined, (error: unknown) => {
        this.log.warn(`running cells of ${uri} failed: ${errorMessage(error)}`);
        for (const ticket of tickets) this.tickets.failed(ticket);
      });
    return tickets;
  }

  /** Where each of `ids` is among `cells` (-1: not there), through one map: a selection can name thousands. */
  private indicesOf(cells: readonly vscode.NotebookCell[], ids: readonly string[]): number[] {
    const at = new Map(cells.map((c, i) => [this.ids.id(c), i]));
    return ids.map((id) => at.get(id) ?? -1);
  }

  /** A run's ticket by its id, while the window remembers it. */
  ticket(runId: string): RunTicket | undefined {
    return this.tickets.ticket(runId);
  }

  startedAfter(runId: string): readonly RunTicket[] {
    return this.tickets.startedAfter(runId);
  }

  latestRun(uri: string, cellId: string): RunTicket | undefined {
    const cell = this.notebook(uri)
      .getCells()
      .find((c) => this.ids.id(c) === cellId);
    return cell && this.tickets.latest(cell);
  }

  async clearOutputs(uri: string, ids: readonly string[]): Promise<void> {
    const notebook = this.notebook(uri);
    await this.caughtUp(notebook);
    const cells = notebook.getCells();
    const indices = this.indicesOf(cells, ids);
    const busy = indices.filter((i) => this.tickets.execution(cells[i]!).status !== 'idle');
    if (busy.length)
      throw new BridgeError(
        'conflict',
        `Cannot clear the outputs of cell(s) ${busy.map((i) => this.ids.id(cells[i]!)).join(', ')}: they are queued or running. Wait for them, or POST /notebooks/interrupt first; nothing was cleared.`,
      );
    // The API has no edit of outputs: each cell is replaced by a copy without outputs or last
    // run (as "Clear Outputs" leaves it), which keeps its id, metadata and text history.
    const edit = new vscode.WorkspaceEdit();
    const copies = indices.map((i) => {
      const cell = cells[i]!;
      const data = new vscode.NotebookCellData(cell.kind, cell.document.getText(), cell.document.languageId);
      const { execution_count: _count, ...metadata } = cell.metadata as { execution_count?: unknown };
      data.metadata = notebook.notebookType === 'jupyter-notebook' ? { ...metadata, execution_count: null } : cell.metadata;
      return vscode.NotebookEdit.replaceCells(new vscode.NotebookRange(i, i + 1), [data]);
    });
    edit.set(notebook.uri, copies);
    const versions = indices.map((i) => this.ids.version(cells[i]!));
    if (!(await vscode.workspace.applyEdit(edit))) throw new BridgeError('stale', CHANGED_MEANWHILE);
    indices.forEach((i, k) => {
      this.ids.adopt(notebook.cellAt(i), ids[k]!, versions[k]!);
      this.tickets.adopt(notebook.cellAt(i), cells[i]!);
    });
  }

  /**
   * nbformat 4.5 for an .ipynb of an earlier minor version, as one edit (one undo step): the
   * notebook's format, and each cell's current id as its nbformat `id`, so the ids agents were
   * given are the ones the file keeps once saved.
   */
  async persistIds(uri: string): Promise<void> {
    const notebook = this.notebook(uri);
    const edit = new vscode.WorkspaceEdit();
    edit.set(notebook.uri, [
      vscode.NotebookEdit.updateNotebookMetadata({ ...notebook.metadata, nbformat: 4, nbformat_minor: 5 }),
      ...notebook
        .getCells()
        .map((cell) => vscode.NotebookEdit.updateCellMetadata(cell.index, { ...cell.metadata, id: this.ids.id(cell) })),
    ]);
    if (!(await vscode.workspace.applyEdit(edit))) throw new BridgeError('stale', CHANGED_MEANWHILE);
  }

  async save(uri: string): Promise<void> {
    const notebook = this.notebook(uri);
    const label = this.sessions.label(notebook);
    if (notebook.isUntitled)
      throw new BridgeError(
        'conflict',
        `${label} is untitled: it has no file yet. Ask the person to save it under a name (File > Save As); nothing was saved.`,
      );
    // Saved from the document: with the runs' ends (and the counts the .ipynb support adds) in it.
    await this.caughtUp(notebook);
    if (!notebook.isDirty) return;
    const changed = await this.stamps.changedOnDisk(notebook);
    if (changed) {
      this.log.warn(`${label}: not saved, its file changed on disk (${changed})`);
      throw new BridgeError(
        'stale',
        `${label} was not saved: its file changed on disk since the editor loaded it, and saving would overwrite those changes. Tell the person (VS Code offers to compare or overwrite when they save); the changes are still in the editor.`,
      );
    }
    let saved: boolean;
    try {
      saved = await notebook.save();
    } catch (error) {
      throw new BridgeError('conflict', `Saving ${label} failed: ${errorMessage(error)}`);
    }
    if (saved) return this.stamps.saved(notebook);
    // Met the editor's own save (auto-save): answered false, and the file written a moment later.
    if (await this.stamps.savedMeanwhile(notebook)) return;
    // Or ours was cancelled by the one it met, which wrote what the editor held before: once more.
    if (!(await this.stamps.changedOnDisk(notebook))) {
      if (await notebook.save()) return this.stamps.saved(notebook);
      if (await this.stamps.savedMeanwhile(notebook)) return;
    }
    const writable = await access(notebook.uri.fsPath, constants.W_OK).then(
      () => true,
      () => false,
    );
    throw new BridgeError(
      'conflict',
      writable
        ? `${label} was not saved: the file changed on disk since the editor loaded it (VS Code asks the person to compare or overwrite), or the save was cancelled. Tell the person; the changes are still in the editor.`
        : `${label} was not saved: the file is read-only. Tell the person (they can make it writable, or save it elsewhere); the changes are still in the editor.`,
    );
  }

  /** The kernel's own provider interrupts it; else VS Code's cancel command stops its cells. */
  async interrupt(uri: string): Promise<InterruptHow> {
    const notebook = this.notebook(uri);
    for (const provider of this.kernels) {
      const how = await provider.interrupt(notebook);
      if (how) return how;
    }
    await this.showEditor(notebook);
    await vscode.commands.executeCommand('notebook.cancelExecution', notebook.uri);
    return 'sigint';
  }

  async restart(uri: string): Promise<void> {
    const notebook = this.notebook(uri);
    for (const provider of this.kernels) if (await provider.restart(notebook)) return;
    throw new BridgeError(
      'conflict',
      `Restart through the bridge works for the "Agent Bridge Python" and Jupyter kernels; ${this.sessions.label(notebook)} uses another kernel ` +
        '(or none): restart it from the notebook toolbar. POST /notebooks/interrupt works for any kernel.',
    );
  }

  private async caughtUp(notebook: vscode.NotebookDocument, unshown = 0): Promise<void> {
    if (!(await this.tickets.caughtUp(notebook, unshown, CATCH_UP_MS)))
      this.log.warn(
        `${this.sessions.label(notebook)}: the editor had not shown the last cell runs after ${CATCH_UP_MS} ms; going on`,
      );
  }

  /**
   * VS Code's notebook commands act on the editor showing the notebook, or else on the active
   * one: make sure the notebook has an editor (shown without taking focus).
   */
  private async showEditor(notebook: vscode.NotebookDocument): Promise<void> {
    if (vscode.window.visibleNotebookEditors.some((e) => e.notebook === notebook)) return;
    await vscode.window.showNotebookDocument(notebook, { preserveFocus: true, preview: false });
  }

  private notebook(uri: string): vscode.NotebookDocument {
    const notebook = vscode.workspace.notebookDocuments.find((n) => n.uri.toString() === uri);
    if (!notebook) throw new BridgeError('not_found', `The notebook ${uri} was closed`);
    return notebook;
  }

  dispose(): void {
    for (const r of this.reports) r.dispose();
    this.ids.dispose();
    this.tickets.dispose();
    this.stamps.dispose();
  }
}

interface NbMeta {
  language_info?: { name?: string };
  kernelspec?: { language?: string };
}

function fullRange(document: vscode.TextDocument): vscode.Range {
  return new vscode.Range(new vscode.Position(0, 0), document.lineAt(Math.max(0, document.lineCount - 1)).range.end);
}

/** What the steps of a change applied so far did, to take it back. */
interface Applied {
  /** Cells the steps created. */
  made: Set<vscode.NotebookCell>;
  texts: { document: vscode.TextDocument; was: string; wrote: string }[];
  metadata: { cell: vscode.NotebookCell; was: Record<string, unknown> }[];
  /** For a change in steps: the texts of the cells as the first step found them. */
  read: Map<vscode.TextDocument, string> | undefined;
}

/** A copy of a cell, with its outputs, metadata and last run. */
export function copyOf(cell: vscode.NotebookCell, notebook: vscode.NotebookDocument): vscode.NotebookCellData {
  const kind = cell.kind === vscode.NotebookCellKind.Code ? 'code' : 'markup';
  return cellData(
    { id: '', kind, language: cell.document.languageId, code: cell.document.getText(), version: 0, copyOf: 0 },
    [cell],
    notebook,
  );
}

/**
 * A new cell, or a copy of an existing one that keeps its outputs, metadata and last run. In
 * notebooks whose format has cell ids (nbformat 4.5+), a new cell's id goes into the file.
 */
function cellData(c: NewCell, cells: readonly vscode.NotebookCell[], notebook: vscode.NotebookDocument): vscode.NotebookCellData {
  const data = new vscode.NotebookCellData(
    c.kind === 'code' ? vscode.NotebookCellKind.Code : vscode.NotebookCellKind.Markup,
    c.code,
    c.language,
  );
  const source = c.copyOf === undefined ? undefined : cells[c.copyOf];
  if (!source) {
    const own = c.metadata ?? {};
    if (notebook.notebookType !== 'jupyter-notebook') data.metadata = { ...own };
    else data.metadata = { ...(keepsFileIds(notebook) ? { id: c.id } : {}), metadata: { ...own } };
  } else {
    data.metadata = c.metadata ? editorMetadata(source, c.metadata) : { ...source.metadata };
    if (c.kind === 'code' && source.kind === vscode.NotebookCellKind.Code) {
      data.outputs = [...source.outputs];
      if (source.executionSummary) data.executionSummary = source.executionSummary;
    }
  }
  return data;
}

/**
 * A cell with this content (a side of an agent's change) in the notebook's own metadata
 * convention; given `like`, the same cell as it is now, with its editor metadata, outputs and
 * last run.
 */
export function cellDataLike(
  notebook: vscode.NotebookDocument,
  cell: Pick<NewCell, 'id' | 'kind' | 'language' | 'code' | 'metadata'>,
  like: vscode.NotebookCell | undefined,
): vscode.NotebookCellData {
  return cellData({ ...cell, version: 0, ...(like ? { copyOf: 0 } : {}) }, like ? [like] : [], notebook);
}

/** Keys VS Code's .ipynb support keeps in nbformat's cell metadata for itself. */
const EDITOR_KEYS = ['vscode'];

/**
 * The metadata agents read and write: for .ipynb, nbformat's cell `metadata` (tags, papermill
 * parameters, ...) without the editor's own keys; for other notebook types, the cell's metadata.
 */
function agentMetadata(cell: vscode.NotebookCell): CellMetadata {
  if (cell.notebook.notebookType !== 'jupyter-notebook') return cell.metadata;
  const inner = (cell.metadata as { metadata?: Record<string, unknown> }).metadata ?? {};
  return Object.fromEntries(Object.entries(inner).filter(([k]) => !EDITOR_KEYS.includes(k)));
}

/** The cell's editor metadata with the agent's part replaced (the editor's keys kept). */
function editorMetadata(cell: vscode.NotebookCell, metadata: CellMetadata): Record<string, unknown> {
  if (cell.notebook.notebookType !== 'jupyter-notebook') return { ...metadata };
  const current = cell.metadata as { metadata?: Record<string, unknown> };
  const kept = Object.fromEntries(Object.entries(current.metadata ?? {}).filter(([k]) => EDITOR_KEYS.includes(k)));
  return { ...current, metadata: { ...metadata, ...kept } };
}

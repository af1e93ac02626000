import { MAX_BATCH_OPS, planBatch, type PlannedCell } from './batch';
import { inSteps } from './changeSteps';
import type { CellLook, Journal } from './checkpoints';
import type {
  ActiveNotebook,
  BatchOp,
  CellRef,
  CellService,
  CellSnapshot,
  CellState,
  CellStatus,
  CellView,
  ExecutionState,
  ExecutionView,
  NotebookEntry,
  NotebookInfo,
  OnError,
  OpenNotebooks,
  RawOutput,
  RunEvent,
  RunHandle,
  RunSelection,
  CellRunResult,
  DryRun,
  CellChanged,
  RunWaitOptions,
  SavedNotebook,
  StaleRun,
  SeriesHandle,
  StrictFlag,
} from '../model/cellService';
import { cellGraph, staleDownstream, stalePlan, type CellDependencies, type GraphCell, type StaleCell } from '../model/cellGraph';
import { isPythonCell, isPythonLanguage } from '../model/cellLanguages';
import { checkWrittenCode, type CodeAnalyzer } from '../model/codeChecks';
import { editKind, type EditSpans } from '../flow/editSpans';
import { BridgeError } from '../bridgeError';
import type { InterruptHow, KernelStatus } from '../model/kernelPort';
import { KeyedQueue } from '../flow/keyedQueue';
import type { RunTicket } from '../model/runTicket';
import { errorNames, logicalItems, OutputFollower, shapeOutputs } from '../outputs/cellOutputs';
import { cellIndexer, notebookLabel, resolveCellIndex, resolveNotebook } from './refs';
import { CellSeries } from './series';
import { Presence } from '../agents/presence';
import type { PresenceAnswer } from '../model/presenceAnswer';
import { KERNEL_READER, ReadTracker, type Reader, type WriteGuard } from '../model/versions';
import type { RiskChecks, RunPiece } from './riskChecks';
import { riskField, type RiskReport } from '../model/riskScan';
import { cannotPersist, idsNote, persistIdsQuestion, persistRefused } from './cellIdPersistence';

export interface NotebookCellsOptions {
  /** Characters of text kept per output item (setting agentBridge.outputTextLimit). */
  outputTextLimit: () => number;
  /** Compiles and analyzes the Python an agent writes (none: written unchecked). */
  analyzer?: CodeAnalyzer;
  /** Hears every change applied (uri, cells before, cells after): the checkpoints. */
  onApplied?: (notebook: string, before: readonly CellSnapshot[], after: readonly CellSnapshot[]) => void;
  /**
   * Hears of a change about to be applied in steps (uri, cells before, the cells it plans) before
   * its first step, so a record of it outlives an editor stopped in between; its `end` is then
   * told the cells after it (or after its failure) instead of `onApplied`.
   */
  onApplying?: (notebook: string, before: readonly CellSnapshot[], planned: readonly CellLook[]) => Promise<Journal | undefined>;
  /** Times each write's parts, when the bench asks. */
  spans?: EditSpans;
  /** Where agents and the person are (the cells requests read, write and run are noted there). */
  presence?: Presence;
  /** Scans the code of every cell run before it starts, and rules on it (riskChecks.ts). */
  risk?: Pick<RiskChecks, 'vet' | 'scan'>;
  /** Puts a yes-or-no question to the person (none: every such question is answered no). */
  confirm?: (question: { message: string; yes: string }) => Promise<'yes' | 'no' | 'no-answer'>;
}

const single = () => '';
/** The notebook type of marimo's VS Code extension: marimo binds each name in one cell. */
const MARIMO_NOTEBOOK = 'marimo-notebook';

/**
 * The cell rules over whatever editor provides the notebooks: naming notebooks and cells,
 * read-before-write, batches planned whole then applied as one change, and runs that can be
 * waited for. Writes to one notebook are serialized so each plans against the cells it applies to.
 */
export class NotebookCells implements CellService {
  private readonly tracker = new ReadTracker();
  /** Whose reads and writes these are; `as` makes a view for another client over the same state. */
  private reader: Reader = KERNEL_READER;
  private readonly writes = new KeyedQueue();
  /** Notebooks the agents changed or ran since they were opened (what "save all" saves). */
  private readonly touched = new Set<string>();
  /** Where agents and the person are: noted as requests go (never waited on). */
  private readonly whereabouts: Presence;

  constructor(
    private readonly docs: OpenNotebooks,
    private readonly options: NotebookCellsOptions,
  ) {
    this.whereabouts = options.presence ?? new Presence();
  }

  /** This service as `reader` sees it: the same notebooks, queues and records, with reads and writes kept as theirs. */
  as(reader: Reader): CellService {
    const view = Object.create(this) as NotebookCells;
    view.reader = reader;
    return view;
  }

  async notebooks(): Promise<NotebookInfo[]> {
    const list = this.docs.list();
    const open = new Set(list.map((n) => n.uri));
    this.tracker.retainNotebooks(open);
    for (const uri of this.touched) if (!open.has(uri)) this.touched.delete(uri);
    return Promise.all(list.map(async (n) => withKernel(n, await this.docs.kernel(n.uri))));
  }

  async active(): Promise<ActiveNotebook> {
    const active = this.docs.active();
    const entry = active && this.docs.list().find((n) => n.uri === active.uri);
    if (!active || !entry) return { notebook: null, selections: [], selectedCells: [], visibleRanges: [] };
    const cells = this.docs.cells(entry.uri);
    const selectedCells = active.selections.flatMap((r) =>
      cells.slice(r.start, r.end).map((c, k) => ({ id: c.id, index: r.start + k })),
    );
    return {
      notebook: withKernel(entry, await this.docs.kernel(entry.uri)),
      selections: active.selections,
      selectedCells,
      visibleRanges: active.visibleRanges,
    };
  }

  async list(ref: string | undefined, { read = true } = {}): Promise<{ notebook: NotebookInfo; cells: CellView[] }> {
    const entry = this.notebook(ref);
    const kernel = await this.docs.kernel(entry.uri);
    const snapshots = this.docs.cells(entry.uri);
    const status = kernelStatus(kernel);
    const graph = await this.graph(entry, snapshots, status);
    const view = read ? this.show.bind(this) : this.view.bind(this);
    const cells = snapshots.map((c, i) => ({ ...view(entry, c, i, status), ...graph?.get(c.id) }));
    this.whereabouts.read(this.reader, entry.uri, null);
    return { notebook: withKernel(entry, kernel), cells };
  }

  /** A notebook's cells as they are, not shown to anyone (no read is recorded): what reverts plan against. */
  states(ref: string | undefined): { uri: string; cells: CellSnapshot[] } {
    const { uri } = this.notebook(ref);
    return { uri, cells: this.docs.cells(uri) };
  }

  async get(ref: string | undefined, cell: CellRef): Promise<CellView> {
    const notebook = this.notebook(ref);
    const status = kernelStatus(await this.docs.kernel(notebook.uri));
    const cells = this.docs.cells(notebook.uri);
    const index = resolveCellIndex(ids(cells), cell, notebookLabel(notebook));
    const graph = await this.graph(notebook, cells, status);
    this.whereabouts.read(this.reader, notebook.uri, cells[index]!.id);
    return { ...this.show(notebook, cells[index]!, index, status), ...graph?.get(cells[index]!.id) };
  }

  async presence(ref: string | undefined): Promise<PresenceAnswer> {
    const notebook = this.notebook(ref);
    return this.whereabouts.answer(notebook, this.docs.cells(notebook.uri), this.reader);
  }

  /**
   * The dependencies and staleness of a notebook's cells (cellGraph.ts), and the cells whose
   * outputs come from a run this window saw in an earlier kernel (before a restart or a death).
   */
  async dependencies(
    ref: string | undefined,
  ): Promise<{ graph: Map<string, CellDependencies> | undefined; earlierKernel: ReadonlySet<string> }> {
    const notebook = this.notebook(ref);
    const kernel = kernelStatus(await this.docs.kernel(notebook.uri));
    const cells = this.docs.cells(notebook.uri);
    const earlier = cells.filter((c) => earlierKernel(c) && !ranInKernel(c.execution, kernel));
    return { graph: await this.graph(notebook, cells, kernel), earlierKernel: new Set(earlier.map((c) => c.id)) };
  }

  async runStale(ref: string | undefined, from: CellRef | undefined, rebuild = false): Promise<StaleRun> {
    const notebook = this.notebook(ref);
    const { order, needs, detail } = await this.stalePlan(notebook, from, rebuild);
    const series = order.length
      ? await this.runMany(notebook.sessionId, { cells: order }, 'stop')
      : new CellSeries([], [], 'stop', () => Promise.reject(new Error('nothing to run')));
    return { series, needs, detail };
  }

  /** What a stale run would run (from `from` and what ran downstream of it, `rebuild`: with what they need), in notebook order. */
  private async stalePlan(notebook: NotebookEntry, from: CellRef | undefined, rebuild: boolean) {
    const cells = this.docs.cells(notebook.uri);
    const label = notebookLabel(notebook);
    const kernel = kernelStatus(await this.docs.kernel(notebook.uri));
    const graph = await this.graph(notebook, cells, kernel);
    if (!graph)
      throw new BridgeError(
        'conflict',
        `No dependency analysis for ${label}: it needs a Jupyter or marimo notebook and a Python to parse its cells`,
      );
    const start = from === undefined ? undefined : cells[resolveCellIndex(ids(cells), from, label)]!.id;
    return stalePlan(graphCells(cells, kernel), graph, { from: start, rebuild, label });
  }

  async dryRun(ref: string | undefined, run: DryRun): Promise<{ cells: string[]; risk: RiskReport }> {
    const notebook = this.notebook(ref);
    const cells = this.docs.cells(notebook.uri);
    const chosen =
      'cell' in run
        ? [cells[resolveCellIndex(ids(cells), run.cell, notebookLabel(notebook))]!.id]
        : 'stale' in run
          ? (await this.stalePlan(notebook, run.stale, run.rebuild ?? false)).order
          : this.select(notebook, run.selection);
    const risk = this.options.risk ? await this.options.risk.scan(notebook.uri, pieces(cells, chosen)) : NO_SCAN;
    return { cells: chosen, risk };
  }

  private async graph(
    notebook: NotebookEntry,
    cells: readonly CellSnapshot[],
    kernel: KernelStatus | undefined,
  ): Promise<Map<string, CellDependencies> | undefined> {
    const marimo = notebook.notebookType === MARIMO_NOTEBOOK;
    if ((notebook.notebookType !== 'jupyter-notebook' && !marimo) || !this.options.analyzer) return undefined;
    const python = cells.filter(isPythonCell);
    const analyses = await this.options.analyzer.analyze(
      notebook.uri,
      python.map((c) => ({ id: c.id, code: c.code })),
    );
    if (!analyses) return undefined;
    return cellGraph(graphCells(cells, kernel), new Map(analyses.map((a) => [a.id, a])), { boundAnywhere: marimo });
  }

  /** The stale cells among `changed` and downstream of them (undefined: no analysis of this notebook). */
  private async staleAfter(notebook: NotebookEntry, changed: readonly string[]): Promise<StaleCell[] | undefined> {
    const cells = this.docs.cells(notebook.uri);
    const graph = await this.graph(notebook, cells, kernelStatus(await this.docs.kernel(notebook.uri)));
    return graph && staleDownstream(cells, graph, changed);
  }

  async create(
    ref: string | undefined,
    { strict, ...cell }: Omit<Extract<BatchOp, { op: 'create' }>, 'op'> & StrictFlag,
  ): Promise<CellChanged> {
    const { cells, stale } = await this.apply(ref, [{ op: 'create', ...cell }], [], single, strict);
    return { cell: cells[0]!, ...(stale && { stale }) };
  }

  async edit(
    ref: string | undefined,
    cell: CellRef,
    { strict, ...change }: Omit<Extract<BatchOp, { op: 'edit' }>, 'op' | 'ref'> & StrictFlag,
  ): Promise<CellChanged> {
    const { cells, stale } = await this.apply(ref, [{ op: 'edit', ref: cell, ...change }], [], single, strict);
    return { cell: cells[0]!, ...(stale && { stale }) };
  }

  async remove(ref: string | undefined, cell: CellRef, guard: WriteGuard): Promise<{ deleted: string; cellCount: number }> {
    const { deleted, cellCount } = await this.apply(ref, [{ op: 'delete', ref: cell, ...guard }], [], single);
    return { deleted: deleted[0]!, cellCount };
  }

  async move(
    ref: string | undefined,
    cell: CellRef,
    to: Omit<Extract<BatchOp, { op: 'move' }>, 'op' | 'ref'>,
  ): Promise<CellChanged> {
    const { cells, stale } = await this.apply(ref, [{ op: 'move', ref: cell, ...to }], [], single);
    return { cell: cells[0]!, ...(stale && { stale }) };
  }

  batch(ref: string | undefined, ops: readonly BatchOp[], run: readonly CellRef[], options: StrictFlag = {}) {
    if (ops.length > MAX_BATCH_OPS) {
      throw new BridgeError(
        'too_large',
        `This batch has ${ops.length} operations; a batch takes at most ${MAX_BATCH_OPS}. ` +
          `Split it into batches of at most ${MAX_BATCH_OPS} operations (each is applied all or nothing).`,
        { maxOps: MAX_BATCH_OPS },
      );
    }
    return this.apply(ref, ops, run, (i) => `ops.${i}: `, options.strict);
  }

  async run(ref: string | undefined, cell: CellRef): Promise<RunHandle> {
    const notebook = this.notebook(ref);
    const cells = this.docs.cells(notebook.uri);
    const index = resolveCellIndex(ids(cells), cell, notebookLabel(notebook));
    checkCode(cells[index]!, '');
    await this.checkKernel(notebook);
    return (await this.start(notebook, [cells[index]!.id]))[0]!;
  }

  async follow(ref: string | undefined, cell: CellRef): Promise<RunHandle> {
    const notebook = this.notebook(ref);
    const cells = this.docs.cells(notebook.uri);
    const index = resolveCellIndex(ids(cells), cell, notebookLabel(notebook));
    const snapshot = cells[index]!;
    checkCode(snapshot, '');
    if (snapshot.execution.status === 'idle') {
      // Its last run, as the cell views tell it: none when it has not run in the current kernel.
      const view = this.show(notebook, snapshot, index, kernelStatus(await this.docs.kernel(notebook.uri)));
      const { status, success } = view.execution!;
      const ended = { done: true, success, status, cell: view };
      const runId = this.docs.latestRun(notebook.uri, snapshot.id)?.runId ?? '';
      return {
        cellId: snapshot.id,
        runId,
        wait: () => Promise.resolve(ended),
        staleAfter: (cellIds) => this.staleAfter(notebook, cellIds),
      };
    }
    const ticket = this.docs.latestRun(notebook.uri, snapshot.id);
    if (!ticket)
      throw new BridgeError('conflict', `${snapshot.id} shows a run this window did not start: wait for it in the editor`);
    return this.handle(notebook, ticket, snapshot.outputs);
  }

  async runMany(ref: string | undefined, selection: RunSelection, onError: OnError): Promise<SeriesHandle> {
    const notebook = this.notebook(ref);
    const ids = this.select(notebook, selection);
    await this.checkKernel(notebook);
    // All of a series is ruled on at once (one question for the person); each cell is checked again as it starts.
    await this.options.risk?.vet(notebook.uri, pieces(this.docs.cells(notebook.uri), ids));
    // All queued at once: with "stop", the kernel drops the rest after a failure, or (where it
    // cannot) only the first is queued and the series queues each next one.
    const first = await this.start(notebook, ids, onError === 'stop');
    return new CellSeries(
      ids,
      first,
      onError,
      async (id) => (await this.start(notebook, [id]))[0]!,
      (ran) => this.staleAfter(notebook, ran),
    );
  }

  async clearOutputs(ref: string | undefined, selection: RunSelection): Promise<{ cleared: string[] }> {
    const notebook = this.notebook(ref);
    return this.writes.run(notebook.uri, async () => {
      const ids = this.select(notebook, selection);
      this.touched.add(notebook.uri);
      await this.docs.clearOutputs(notebook.uri, ids);
      return { cleared: ids };
    });
  }

  async save(ref: string | undefined | 'all'): Promise<{ saved: SavedNotebook[] }> {
    if (ref !== 'all') {
      const notebook = this.notebook(ref);
      await this.writes.run(notebook.uri, () => this.docs.save(notebook.uri));
      this.touched.delete(notebook.uri);
      return { saved: [{ sessionId: notebook.sessionId, path: notebook.path, saved: true }] };
    }
    const touched = this.docs.list().filter((n) => this.touched.has(n.uri));
    const saved = await Promise.all(
      touched.map(async (n): Promise<SavedNotebook> => {
        try {
          await this.writes.run(n.uri, () => this.docs.save(n.uri));
          this.touched.delete(n.uri);
          return { sessionId: n.sessionId, path: n.path, saved: true };
        } catch (error) {
          if (!(error instanceof BridgeError)) throw error;
          return { sessionId: n.sessionId, path: n.path, saved: false, detail: error.detail };
        }
      }),
    );
    return { saved };
  }

  async persistIds(ref: string | undefined): Promise<{ notebook: NotebookInfo; upgraded: boolean }> {
    const entry = this.notebook(ref);
    if (entry.notebookType !== 'jupyter-notebook') throw cannotPersist(entry);
    if (!entry.idsPersist) {
      const answer = (await this.options.confirm?.(persistIdsQuestion(this.reader.label, entry))) ?? 'no';
      if (answer !== 'yes') throw persistRefused(entry, answer);
      await this.writes.run(entry.uri, () => this.docs.persistIds(entry.uri));
      this.touched.add(entry.uri);
    }
    const now = this.notebook(entry.uri);
    return { notebook: withKernel(now, await this.docs.kernel(now.uri)), upgraded: !entry.idsPersist };
  }

  interrupt(ref: string | undefined): Promise<InterruptHow> {
    return this.docs.interrupt(this.notebook(ref).uri);
  }

  async restart(ref: string | undefined): Promise<void> {
    await this.docs.restart(this.notebook(ref).uri);
  }

  async outputItem(
    ref: string | undefined,
    cell: CellRef,
    output: number,
    item: number,
  ): Promise<{ mime: string; data: Uint8Array }> {
    const notebook = this.notebook(ref);
    const cells = this.docs.cells(notebook.uri);
    const snapshot = cells[resolveCellIndex(ids(cells), cell, notebookLabel(notebook))]!;
    this.whereabouts.read(this.reader, notebook.uri, snapshot.id);
    const raw = snapshot.outputs[output] && logicalItems(snapshot.outputs[output])[item];
    if (!raw) {
      throw new BridgeError(
        'not_found',
        `Cell ${snapshot.id} has no output item ${output}/${item}: it has ${snapshot.outputs.length} output(s); their items are listed in the cell's "outputs"`,
      );
    }
    return raw;
  }

  // ------------------------------------------------------------------------------ internals

  private notebook(ref: string | undefined): NotebookEntry {
    return resolveNotebook(this.docs.list(), ref);
  }

  private async apply(
    ref: string | undefined,
    ops: readonly BatchOp[],
    run: readonly CellRef[],
    where: (i: number) => string,
    strict?: boolean,
  ) {
    const notebook = this.notebook(ref);
    const label = notebookLabel(notebook);
    const applied = await this.writes.run(notebook.uri, async () => {
      const span = this.options.spans?.start();
      const status = kernelStatus(await this.docs.kernel(notebook.uri));
      const cells = this.docs.cells(notebook.uri);
      // "python" means this notebook's Python, whatever id its editor gives it (marimo's "mo-python").
      const python = this.pythonLanguage(notebook.uri, cells);
      const own = ops.map((op) =>
        'language' in op && op.language && isPythonLanguage(op.language) ? { ...op, language: python } : op,
      );
      const plan = planBatch(cells, own, {
        notebook: label,
        defaultLanguage: this.mainLanguage(notebook.uri, cells),
        newId: () => this.docs.newId(notebook.uri),
        where,
        checkWrite: (cell: CellState, index: number, guard: WriteGuard) => {
          const refused = this.tracker.conflict(this.reader, notebook.uri, { ...cell, index }, guard);
          return refused === undefined
            ? undefined
            : {
                why: refused.why,
                extra: { changedBy: refused.changedBy, cell: this.view(notebook, cells[index]!, index, status) },
              };
        },
        personTyping: (cell) => this.whereabouts.personTyping(notebook.uri, cell.id),
      });
      // Runs are checked before anything changes, against the notebook the batch leaves.
      const inLayout = cellIndexer(
        plan.layout.map((c) => c.id),
        label,
      );
      const runIds = run.map((r, i) => {
        // A name stands for its created cell's id (a letter then digits: never read as an index).
        const planned = plan.layout[inLayout(typeof r === 'string' ? (plan.names.get(r) ?? r) : r)]!;
        checkCode(planned, `run.${i}: `);
        return planned.id;
      });
      if (runIds.length) {
        await this.checkKernel(notebook);
        // A run the person refuses refuses the batch: nothing is changed either.
        await this.options.risk?.vet(notebook.uri, pieces(plan.layout, runIds));
      }
      const before = new Map(cells.map((c) => [c.id, c.code]));
      span?.checking();
      const warnings = await checkWrittenCode(
        this.options.analyzer,
        notebook.uri,
        plan.layout.map((c) => ({ ...c, written: c.touched && before.get(c.id) !== c.code })),
        strict,
      );
      span?.checked();
      this.whereabouts.wrote(
        this.reader,
        notebook.uri,
        plan.layout.filter((c) => c.touched).map((c) => c.id),
      );

      let journal: Journal | undefined;
      if (!plan.empty) {
        if (inSteps(plan.change))
          journal = await this.options.onApplying?.(notebook.uri, cells, plannedCells(cells, plan.layout));
        try {
          await this.docs.apply(notebook.uri, plan.change, span);
        } catch (error) {
          journal?.end(this.docs.list().some((n) => n.uri === notebook.uri) ? this.docs.cells(notebook.uri) : cells);
          throw error;
        }
        this.touched.add(notebook.uri);
      }
      if (plan.overTyping.length) this.whereabouts.overTyping(this.reader, notebook.uri, plan.overTyping);
      this.tracker.forget(notebook.uri, plan.deleted);
      const after = this.docs.cells(notebook.uri);
      if (journal) journal.end(after);
      else if (!plan.empty) this.options.onApplied?.(notebook.uri, cells, after);
      // The host answers others between the snapshot and the views of up to 1,000 cells.
      await new Promise<void>((resolve) => setImmediate(resolve));
      const planned = new Map(plan.layout.map((c) => [c.id, c]));
      const touched: CellView[] = [];
      after.forEach((cell, index) => {
        const p = planned.get(cell.id);
        if (!p?.touched) return;
        // Only what the agent wrote counts as read: not text someone typed since.
        if (cell.code === p.code) this.tracker.wrote(this.reader, notebook.uri, cell.id, cell.version);
        const found = warnings.get(cell.id);
        touched.push({ ...this.view(notebook, cell, index, status), ...(found && { warnings: found }) });
      });
      span?.end(editKind(plan.change));
      const runs = runIds.length ? await this.start(notebook, runIds) : [];
      const names = plan.names.size ? { names: Object.fromEntries(plan.names) } : {};
      return { cells: touched, deleted: plan.deleted, cellCount: after.length, ...names, runs, changed: !plan.empty };
    });
    // Outside the notebook's write queue: the analysis of cells no check read yet may take a while.
    // A delete alone names none (what read from the deleted cell now reads from elsewhere, or fails).
    const { changed, ...result } = applied;
    const stale =
      changed && result.cells.length
        ? await this.staleAfter(
            notebook,
            result.cells.map((c) => c.id),
          )
        : undefined;
    return { ...result, ...(stale && { stale }) };
  }

  /** Cells run only where a kernel serves the notebook: else VS Code would ask the person to pick one. */
  private async checkKernel(notebook: NotebookEntry): Promise<void> {
    const kernel = await this.docs.kernel(notebook.uri);
    if ('unavailable' in kernel)
      throw new BridgeError('conflict', `Cannot run cells of ${notebookLabel(notebook)}: ${kernel.unavailable}`);
  }

  /** Ids of the code cells a selection names, in notebook order; markup named explicitly is a 400. */
  private select(notebook: NotebookEntry, selection: RunSelection): string[] {
    const cells = this.docs.cells(notebook.uri);
    const label = notebookLabel(notebook);
    let chosen: number[];
    if ('all' in selection) chosen = cells.map((_, i) => i);
    else if ('range' in selection) {
      const { start, end } = selection.range;
      if (start < 0 || end > cells.length || start >= end)
        throw new BridgeError(
          'bad_input',
          `range ${start}..${end} is not a range of ${label}: it has ${cells.length} cells; give 0 <= start < end <= ${cells.length} (end excluded)`,
        );
      chosen = cells.slice(start, end).map((_, k) => start + k);
    } else {
      // Each cell once at most: a longer list is refused before any of it is looked up.
      if (selection.cells.length > cells.length)
        throw new BridgeError(
          'bad_input',
          `The selection names ${selection.cells.length} cells and ${label} has ${cells.length} cells: name each cell once, or use "all"`,
          { cellCount: cells.length },
        );
      const indexOf = cellIndexer(ids(cells), label);
      const indices = selection.cells.map((r, i) => {
        const index = indexOf(r);
        checkCode(cells[index]!, `cells.${i}: `);
        return index;
      });
      chosen = [...new Set(indices)].sort((a, b) => a - b);
    }
    const code = chosen.filter((i) => cells[i]!.kind === 'code').map((i) => cells[i]!.id);
    if (!code.length) throw new BridgeError('bad_input', `No code cell in the selection: ${label} has ${cells.length} cells`);
    return code;
  }

  private async start(notebook: NotebookEntry, cellIds: readonly string[], stopAfterFailure = false): Promise<RunHandle[]> {
    const before = await this.vetted(notebook, cellIds);
    this.touched.add(notebook.uri);
    const tickets = await this.docs.execute(notebook.uri, cellIds, stopAfterFailure);
    this.whereabouts.ran(this.reader, notebook.uri, tickets);
    const outputs = new Map(before.cells.map((c) => [c.id, c.outputs]));
    return tickets.map((ticket) => {
      const risk = before.risk?.findings.filter((f) => f.cell === ticket.cellId);
      const own = risk?.length ? { ...before.risk!, findings: risk } : undefined;
      return this.handle(notebook, ticket, outputs.get(ticket.cellId) ?? [], own);
    });
  }

  /**
   * The cells as they are about to run, their code scanned and ruled on: code changed while the
   * person was asked is checked again, so what runs is what was allowed.
   */
  private async vetted(notebook: NotebookEntry, cellIds: readonly string[]) {
    let cells = this.docs.cells(notebook.uri);
    if (!this.options.risk) return { cells, risk: undefined };
    for (;;) {
      const code = pieces(cells, cellIds);
      const risk = await this.options.risk.vet(notebook.uri, code);
      cells = this.docs.cells(notebook.uri);
      const now = pieces(cells, cellIds);
      if (now.length === code.length && now.every((p, i) => p.code === code[i]!.code)) return { cells, risk };
    }
  }

  private handle(notebook: NotebookEntry, ticket: RunTicket, baseline: readonly RawOutput[], risk?: RiskReport): RunHandle {
    const id = ticket.cellId;
    return new CellRun(ticket, baseline, risk, {
      snapshot: () => {
        const now = this.docs.cells(notebook.uri);
        const index = now.findIndex((c) => c.id === id);
        return index < 0 ? undefined : { cell: now[index]!, index };
      },
      show: (cell, index) => this.show(notebook, cell, index),
      limit: () => this.options.outputTextLimit(),
      url: (o, i) => outputUrl(notebook, id, o, i),
      alsoRan: (timeoutMs, signal) => this.alsoRan(notebook, ticket, timeoutMs, signal),
      staleAfter: (cellIds) => this.staleAfter(notebook, cellIds),
    });
  }

  /** The id this notebook's editor gives Python cells: its Python cells', else its default's, else "python". */
  private pythonLanguage(uri: string, cells: readonly CellSnapshot[]): string {
    const fallback = this.docs.defaultLanguage(uri);
    return cells.find(isPythonCell)?.language ?? (isPythonLanguage(fallback) ? fallback : 'python');
  }

  /**
   * The runs of other cells the kernel started on its own after `ticket`'s run was queued
   * (OpenNotebooks.startedAfter: marimo re-runs a cell's dependents), waited for until they
   * end or `timeoutMs` passes; the latest per cell, in notebook order.
   */
  private async alsoRan(
    notebook: NotebookEntry,
    ticket: RunTicket,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<CellRunResult[]> {
    const deadline = Date.now() + timeoutMs;
    // A run may show others starting after it: wait until none is open (or the time is up).
    for (;;) {
      const open = this.docs.startedAfter(ticket.runId).filter((t) => t.phase !== 'ended');
      if (!open.length || !(await allEnded(open, deadline - Date.now(), signal))) break;
    }
    const latest = new Map<string, RunTicket>();
    for (const t of this.docs.startedAfter(ticket.runId)) latest.set(t.cellId, t);
    const cells = this.docs.cells(notebook.uri);
    const results: { index: number; result: CellRunResult }[] = [];
    for (const [cellId, run] of latest) {
      const index = cells.findIndex((c) => c.id === cellId);
      if (index < 0) continue;
      const done = run.phase === 'ended';
      const status: CellStatus = done ? cellStatus(cells[index]!) : run.phase === 'running' ? 'running' : 'queued';
      const cell = this.show(notebook, cells[index]!, index);
      results.push({ index, result: { done, success: done ? status === 'succeeded' : null, status, cell } });
    }
    return results.sort((a, b) => a.index - b.index).map((r) => r.result);
  }

  /** The language most code cells use; the notebook's own when it has no code cell yet. */
  private mainLanguage(uri: string, cells: readonly CellSnapshot[]): string {
    const counts = new Map<string, number>();
    for (const c of cells) if (c.kind === 'code') counts.set(c.language, (counts.get(c.language) ?? 0) + 1);
    let best: string | undefined;
    for (const [language, n] of counts) if (best === undefined || n > counts.get(best)!) best = language;
    return best ?? this.docs.defaultLanguage(uri);
  }

  /** `kernel`: the notebook's kernel, to tell its runs from earlier ones (undefined: a run this window saw is one). */
  private view(notebook: NotebookEntry, cell: CellSnapshot, index: number, kernel?: KernelStatus): CellView {
    const view = cellView(notebook, cell, index, this.options.outputTextLimit(), kernel);
    return this.whereabouts.personTyping(notebook.uri, cell.id) === undefined ? view : { ...view, personEditing: true };
  }

  /** A view the agent is shown: from now on, writes compare against this version. */
  private show(notebook: NotebookEntry, cell: CellSnapshot, index: number, kernel?: KernelStatus): CellView {
    this.tracker.saw(this.reader, notebook.uri, cell.id, cell.version);
    return this.view(notebook, cell, index, kernel);
  }
}

const ids = (cells: readonly { id: string }[]) => cells.map((c) => c.id);

/** What a dry run answers where no scan is wired (unit tests of other rules). */
const NO_SCAN: RiskReport = { level: null, findings: [] };

/** The code of the cells `chosen` (in that order), as the risk scan takes it. */
function pieces(cells: readonly { id: string; code: string; language: string }[], chosen: readonly string[]): RunPiece[] {
  const byId = new Map(cells.map((c) => [c.id, c]));
  return chosen.flatMap((id) => {
    const cell = byId.get(id);
    return cell ? [{ cell: id, code: cell.code, language: cell.language }] : [];
  });
}

/** The cells as a batch plans to leave them (metadata and outputs as they are; new cells have none). */
function plannedCells(cells: readonly CellSnapshot[], layout: readonly PlannedCell[]): CellLook[] {
  const byId = new Map(cells.map((c) => [c.id, c]));
  return layout.map(({ id, kind, language, code }) => ({
    id,
    kind,
    language,
    code,
    metadata: byId.get(id)?.metadata ?? {},
    outputs: byId.get(id)?.outputs ?? [],
  }));
}

function checkCode(cell: { id: string; kind: string }, where: string): void {
  if (cell.kind !== 'code') throw new BridgeError('bad_input', `${where}cell ${cell.id} is a markup cell; only code cells run`);
}

function outputUrl(notebook: NotebookEntry, id: string, output: number, item: number): string {
  return `/notebooks/cells/${encodeURIComponent(id)}/outputs/${output}/${item}?notebook=${encodeURIComponent(notebook.sessionId)}`;
}

export function cellView(
  notebook: NotebookEntry,
  cell: CellSnapshot,
  index: number,
  limit: number,
  kernel?: KernelStatus,
): CellView {
  const tags = cell.metadata['tags'];
  return {
    id: cell.id,
    index,
    kind: cell.kind,
    language: cell.language,
    code: cell.code,
    version: cell.version,
    metadata: cell.metadata,
    tags: Array.isArray(tags) ? tags.filter((t): t is string => typeof t === 'string') : [],
    execution: cell.kind === 'code' ? executionView(cell, kernel) : null,
    outputs: shapeOutputs(cell.outputs, { limit, url: (o, i) => outputUrl(notebook, cell.id, o, i) }),
  };
}

/** The notebook's kernel as the cell views need it: undefined when none serves it (the window's runs then count). */
const kernelStatus = (kernel: Awaited<ReturnType<OpenNotebooks['kernel']>>) => ('status' in kernel ? kernel.status : undefined);

function withKernel(entry: NotebookEntry, kernel: Awaited<ReturnType<OpenNotebooks['kernel']>>): NotebookInfo {
  const ids = idsNote(entry);
  const info = { ...entry, ...(ids && { idsNote: ids }) };
  if (!('kind' in kernel)) return { ...info, kernel: null, kernelUnavailable: kernel.unavailable, kernelState: null };
  const { state, note } = kernel.status;
  return { ...info, kernel: kernel.kind, kernelState: state, ...(note && { kernelStateNote: note }) };
}

/**
 * Whether the cell's last run is a run of the notebook's current kernel: one queued or running
 * now is; a count with no run this window saw is the saved file's; a run that started before the
 * kernel did (a restart since) was in an earlier kernel; a kernel not started or dead has run none.
 */
export function ranInKernel(execution: ExecutionState, kernel: KernelStatus | undefined): boolean {
  if (execution.status !== 'idle') return true;
  if (execution.startedAt === undefined) return false;
  if (!kernel) return true;
  if (kernel.state === 'not_started' || kernel.state === 'dead') return false;
  return kernel.startedAt === undefined || execution.startedAt >= kernel.startedAt;
}

/** Outputs of a run this window saw: from an earlier kernel when that run is not of the current one (ranInKernel). */
const earlierKernel = (cell: CellSnapshot) => cell.outputs.length > 0 && cell.execution.startedAt !== undefined;

/** The run state an answer shows: of the last run in the current kernel, else the count the editor shows, as saved. */
function executionView(cell: CellSnapshot, kernel: KernelStatus | undefined): ExecutionView {
  const { order, durationMs } = cell.execution;
  if (!ranInKernel(cell.execution, kernel))
    return {
      order: null,
      inKernel: false,
      ...(order !== null && { savedOrder: order }),
      ...(earlierKernel(cell) && { outputsFrom: 'earlier kernel' as const }),
      success: null,
      durationMs: null,
      status: 'idle',
    };
  const status = cellStatus(cell);
  return { order, inKernel: true, success: successOf(status), durationMs, status };
}

const OUTCOMES: ReadonlySet<CellStatus> = new Set(['succeeded', 'failed', 'interrupted', 'timed_out']);

/** A boolean once a run ended (false unless it succeeded), null before. */
const successOf = (status: CellStatus) => (OUTCOMES.has(status) ? status === 'succeeded' : null);

/**
 * One lifecycle for every cell: idle (no run ended yet), queued, running, then how the last
 * run ended. Editors report a cancelled run as an end without success; a kernel that raises
 * KeyboardInterrupt reports a failure, which is an interrupt all the same.
 */
export function cellStatus(cell: Pick<CellSnapshot, 'execution' | 'outputs'>): CellStatus {
  const ex = cell.execution;
  if (ex.status !== 'idle') return ex.status;
  if (ex.success === true) return 'succeeded';
  if (ex.success === false) return errorNames(cell.outputs).includes('KeyboardInterrupt') ? 'interrupted' : 'failed';
  return ex.ended ? 'interrupted' : 'idle';
}

interface RunDeps {
  snapshot(): { cell: CellSnapshot; index: number } | undefined;
  show(cell: CellSnapshot, index: number): CellView;
  limit(): number;
  url(output: number, item: number): string;
  /** The runs the kernel started on its own meanwhile, waited for until `timeoutMs`. */
  alsoRan(timeoutMs: number, signal: AbortSignal | undefined): Promise<CellRunResult[]>;
  staleAfter(cellIds: readonly string[]): Promise<StaleCell[] | undefined>;
}

/** Whether every ticket ended within `timeoutMs` (false also when `signal` aborts first). */
function allEnded(tickets: readonly RunTicket[], timeoutMs: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (timeoutMs <= 0 || signal?.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    const done = (ended: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', stop);
      resolve(ended);
    };
    const stop = () => done(false);
    const timer = setTimeout(stop, timeoutMs);
    signal?.addEventListener('abort', stop);
    void Promise.all(tickets.map((t) => t.ended)).then(() => done(true));
  });
}

/**
 * One run of a cell, as its ticket tells it: over when the ticket ends. Outputs are followed
 * only once the run has started, so the previous run's outputs are not reported as new.
 */
class CellRun implements RunHandle {
  /** Shared by the waits on this run: a wait after a timed-out one goes on from what that sent. */
  private readonly follower: OutputFollower;

  constructor(
    private readonly ticket: RunTicket,
    baseline: readonly RawOutput[],
    /** What the risk scan found in the cell's code. */
    readonly risk: RiskReport | undefined,
    private readonly deps: RunDeps,
  ) {
    this.follower = new OutputFollower(baseline);
  }

  get cellId(): string {
    return this.ticket.cellId;
  }

  get runId(): string {
    return this.ticket.runId;
  }

  /**
   * The run's end, then (when it ended) the runs the kernel started on its own meanwhile, under
   * one deadline, and the cells they left stale.
   */
  async wait(options: RunWaitOptions): Promise<CellRunResult> {
    const deadline = Date.now() + options.timeoutMs;
    const own = { ...(await this.waitOwn(options)), ...riskField(this.risk) };
    if (!own.done) return own;
    const alsoRan = await this.deps.alsoRan(deadline - Date.now(), options.signal);
    const stale = options.stale === false ? undefined : await this.staleAfter([this.cellId, ...alsoRan.map((r) => r.cell.id)]);
    return { ...own, ...(alsoRan.length && { alsoRan }), ...(stale && { stale }) };
  }

  staleAfter(cellIds: readonly string[]): Promise<StaleCell[] | undefined> {
    return this.deps.staleAfter(cellIds);
  }

  private waitOwn(options: {
    timeoutMs: number;
    onEvent?: (event: RunEvent) => void;
    signal?: AbortSignal;
  }): Promise<CellRunResult> {
    const { ticket, deps } = this;
    let settled = false;
    return new Promise<CellRunResult>((resolve, reject) => {
      const finish = (result: CellRunResult | Error) => {
        if (settled) return;
        settled = true;
        subscription.dispose();
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', stop);
        if (result instanceof Error) reject(result);
        else resolve(result);
      };
      const current = () => {
        const now = deps.snapshot();
        if (!now) finish(new BridgeError('conflict', `Cell ${this.cellId} was deleted before its run ended`));
        return now;
      };
      const follow = () => {
        if (settled || !options.onEvent || ticket.phase === 'queued') return;
        const now = current();
        if (now) for (const e of this.follower.next(now.cell.outputs, deps.limit(), deps.url)) options.onEvent(e);
      };
      // Timeout, or the client went away: stop waiting; the run goes on.
      const stop = () => {
        const now = settled ? undefined : current();
        if (now)
          finish({
            done: false,
            success: null,
            status: ticket.phase === 'running' ? 'running' : 'queued',
            cell: deps.show(now.cell, now.index),
          });
      };
      const timer = setTimeout(stop, options.timeoutMs);
      const subscription = ticket.onDidChange(follow);
      options.signal?.addEventListener('abort', stop);
      follow();
      void ticket.ended.then(() => {
        if (settled) return;
        follow();
        const now = current();
        if (!now) return;
        const status = cellStatus(now.cell);
        finish({ done: true, success: status === 'succeeded', status, cell: deps.show(now.cell, now.index) });
      });
    });
  }
}

/** The cells as the dependency graph sees them: runs of an earlier kernel do not count. */
function graphCells(cells: readonly CellSnapshot[], kernel: KernelStatus | undefined): GraphCell[] {
  return cells.map((c) => {
    const ran = ranInKernel(c.execution, kernel) && c.execution.ended && c.execution.endedAt !== undefined;
    return {
      id: c.id,
      python: isPythonCell(c),
      endedAt: ran ? c.execution.endedAt! : null,
      editedSinceRun: c.execution.ranCode !== undefined && c.execution.ranCode !== c.code,
      run: ran ? c.execution.dataflow : undefined,
    };
  });
}

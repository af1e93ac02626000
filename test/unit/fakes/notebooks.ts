import type { InterruptHow, KernelStatus } from '../../../src/core/model/kernelPort';
import type {
  CellKind,
  CellMetadata,
  CellSnapshot,
  ExecutionState,
  IndexRange,
  NotebookChange,
  NotebookEntry,
  NotebookInfo,
  OpenNotebooks,
  RawOutput,
} from '../../../src/core/model/cellService';
import { BridgeError } from '../../../src/core/bridgeError';
import { Ticket, type RunTicket } from '../../../src/core/model/runTicket';
import { ERROR_MIME, STDERR_MIME, STDOUT_MIME } from '../../../src/core/outputs/cellOutputs';
import { sleep } from '../../../src/core/sleep';

/** A scripted step of a fake cell run. */
export type FakeCellStep =
  | { stdout: string }
  | { stderr: string }
  | { display: { mime: string; data: string | Uint8Array } }
  | { error: { name: string; message: string; traceback: string } }
  | { waitMs: number };

interface FakeCell {
  id: string;
  kind: CellKind;
  language: string;
  code: string;
  version: number;
  metadata: CellMetadata;
  outputs: RawOutput[];
  execution: ExecutionState;
}

/** A notebook as a test opens it: the kernel's kind, or why there is none. */
export type FakeNotebookInfo = Omit<NotebookInfo, 'cellCount' | 'dirty' | 'kernelState' | 'kernelStateNote' | 'idsNote'>;

interface FakeNotebook {
  info: FakeNotebookInfo;
  /** Its kernel: started when the notebook was added, restarted by `restart`. */
  kernel: KernelStatus;
  cells: FakeCell[];
  dirty: boolean;
  language: string;
}

const enc = (s: string) => new TextEncoder().encode(s);
const idle: ExecutionState = { order: null, success: null, ended: false, durationMs: null, status: 'idle' };

/**
 * In-memory notebooks for the cell routes' contract tests (no VS Code): applies changes with
 * VS Code's semantics (the edits of one change use the indices from before it), and runs cells
 * by playing a script per code string. `type` simulates the person typing in a cell.
 */
export class FakeNotebooks implements OpenNotebooks {
  private readonly books: FakeNotebook[] = [];
  private nextId = 0;
  private order = 0;
  private runs = 0;
  /** End times of runs, growing by at least 1 ms a run (the dependency graph compares them). */
  private clock = 0;
  /** Each cell's latest run, and every run by id. */
  private readonly tickets = new Map<string, Ticket>();
  private readonly byRunId = new Map<string, Ticket>();
  /** Order in which runs were queued, by run id; and the runs the kernel queued on its own, with their notebook. */
  private readonly queuedAt = new Map<string, number>();
  private readonly unasked: { uri: string; ticket: Ticket }[] = [];
  activeEditor: { uri: string; selections: IndexRange[]; visibleRanges: IndexRange[] } | null = null;
  readonly calls: { method: string; uri: string; args?: unknown }[] = [];
  /** Makes the next apply fail the way VS Code's applyEdit does when the notebook moved on. */
  failNextApply = false;
  /** Makes saves of this uri fail with this detail (a read-only file, say). */
  readonly failSave = new Map<string, string>();
  /**
   * The kernel cancels the cells queued behind a failed run, which end unstarted (as Jupyter's
   * queue does): a series that stops at a failure is then queued at once.
   */
  stopsAtFailure = false;

  /**
   * `steps` play when a cell with that code runs; `rerun` names the code of cells the kernel runs
   * after it on its own, queued before the cell's run ends (as marimo's kernel re-runs dependents).
   */
  constructor(private readonly scripts: Record<string, { steps: FakeCellStep[]; success?: boolean; rerun?: string[] }> = {}) {}

  add(
    info: FakeNotebookInfo,
    cells: {
      kind?: CellKind;
      language?: string;
      code: string;
      outputs?: RawOutput[];
      metadata?: CellMetadata;
      /** The execution count saved in the file (no run of this window). */
      savedOrder?: number;
    }[],
    language = 'python',
  ): string[] {
    const book: FakeNotebook = {
      info,
      kernel: { state: 'idle', startedAt: Date.now() },
      dirty: false,
      language,
      cells: cells.map((c) => ({
        id: this.newId(info.uri),
        kind: c.kind ?? 'code',
        language: c.language ?? (c.kind === 'markup' ? 'markdown' : language),
        code: c.code,
        version: 1,
        metadata: c.metadata ?? {},
        outputs: c.outputs ?? [],
        execution: c.savedOrder === undefined ? idle : { ...idle, order: c.savedOrder },
      })),
    };
    this.books.push(book);
    return book.cells.map((c) => c.id);
  }

  // ------------------------------------------------------------------------- test controls

  /** The person replaces a cell's text in the editor. */
  type(uri: string, index: number, code: string): void {
    const cell = this.book(uri).cells[index]!;
    cell.code = code;
    cell.version++;
  }

  /** The notebook's kernel is now there. */
  kernelStatus(uri: string, status: KernelStatus): void {
    this.book(uri).kernel = status;
  }

  close(uri: string): void {
    this.books.splice(this.books.indexOf(this.book(uri)), 1);
  }

  codes(uri: string): string[] {
    return this.book(uri).cells.map((c) => c.code);
  }

  // ------------------------------------------------------------------------- OpenNotebooks

  list(): NotebookEntry[] {
    return this.books.map(({ info: { kernel: _, ...entry }, cells, dirty }) => ({ ...entry, cellCount: cells.length, dirty }));
  }

  async kernel(uri: string): Promise<{ kind: string; status: KernelStatus } | { unavailable: string }> {
    const book = this.book(uri);
    const kind = book.info.kernel;
    return kind ? { kind, status: book.kernel } : { unavailable: 'no kernel is selected' };
  }

  active() {
    return this.activeEditor;
  }

  cells(uri: string): CellSnapshot[] {
    return this.book(uri).cells.map((c) => ({ ...c, outputs: [...c.outputs] }));
  }

  defaultLanguage(uri: string): string {
    return this.book(uri).language;
  }

  newId(_uri: string): string {
    return `c${(this.nextId++).toString(36).padStart(3, '0')}`;
  }

  async apply(uri: string, change: NotebookChange): Promise<void> {
    this.calls.push({ method: 'apply', uri, args: change });
    const book = this.book(uri);
    if (this.failNextApply) {
      this.failNextApply = false;
      throw new BridgeError('stale', 'The notebook changed while the edit was being applied; nothing was changed');
    }
    if (book.cells.map((c) => c.id).join() !== change.expectIds.join()) throw new BridgeError('stale', 'cells moved on');
    const before = book.cells;
    const cells = [...before];
    for (const t of change.texts) {
      const cell = before[t.index]!;
      cell.code = t.code;
      cell.version++;
    }
    for (const m of change.metadata) before[m.index]!.metadata = m.metadata;
    // As VS Code does: the replacement with the highest end first, so indices stay valid.
    for (const s of [...change.splices].sort((a, b) => b.end - a.end)) {
      cells.splice(
        s.start,
        s.end - s.start,
        ...s.cells.map((n) => {
          const source = n.copyOf === undefined ? undefined : before[n.copyOf];
          const keep = source && n.kind === 'code';
          return {
            id: n.id,
            kind: n.kind,
            language: n.language,
            code: n.code,
            version: n.version,
            metadata: n.metadata ?? source?.metadata ?? {},
            outputs: keep ? source.outputs : [],
            execution: keep ? source.execution : idle,
          };
        }),
      );
    }
    book.cells = cells;
    book.dirty = true;
    // A run of a cell that went away ends its ticket, as the editor's removal does.
    for (const cell of before) if (!cells.some((c) => c.id === cell.id)) this.tickets.get(cell.id)?.drop();
    if (cells.map((c) => c.id).join() !== change.resultIds.join())
      throw new Error(`fake apply: got ${cells.map((c) => c.id)}, planned ${change.resultIds}`);
  }

  async execute(uri: string, ids: readonly string[], stopAfterFailure = false): Promise<RunTicket[]> {
    // As a kernel run through VS Code's command: unless it stops at a failure, only the first goes.
    const taken = stopAfterFailure && !this.stopsAtFailure ? ids.slice(0, 1) : ids;
    this.calls.push({ method: 'execute', uri, args: taken });
    const book = this.book(uri);
    const queued = taken.map((id) => book.cells.find((c) => c.id === id)!);
    // Like VS Code's Run, a cell queued or running already is not queued again: its run is the one.
    const fresh = queued.filter((cell) => !this.tickets.get(cell.id)?.open);
    for (const cell of fresh) this.queue(cell);
    void (async () => {
      for (const [k, cell] of fresh.entries()) {
        const reruns = (this.scripts[cell.code]?.rerun ?? []).flatMap((code) => book.cells.filter((c) => c.code === code));
        for (const rerun of reruns) this.unasked.push({ uri, ticket: this.queue(rerun) });
        await this.play(cell, this.tickets.get(cell.id)!);
        for (const rerun of reruns) await this.play(rerun, this.tickets.get(rerun.id)!);
        if (this.stopsAtFailure && cell.execution.success === false) {
          // Cancelled before their turn: they show as never run.
          for (const rest of fresh.slice(k + 1)) {
            rest.execution = { ...rest.execution, status: 'idle', ended: false };
            this.tickets.get(rest.id)!.step('ended');
          }
          return;
        }
      }
    })();
    return queued.map((cell) => this.tickets.get(cell.id)!);
  }

  ticket(runId: string): RunTicket | undefined {
    return this.byRunId.get(runId);
  }

  startedAfter(runId: string): readonly RunTicket[] {
    const ticket = this.byRunId.get(runId);
    const after = this.queuedAt.get(runId) ?? Infinity;
    const uri = this.books.find((b) => b.cells.some((c) => c.id === ticket?.cellId))?.info.uri;
    return this.unasked
      .filter((u) => u.uri === uri && u.ticket.cellId !== ticket?.cellId && this.queuedAt.get(u.ticket.runId)! > after)
      .map((u) => u.ticket);
  }

  latestRun(_uri: string, cellId: string): RunTicket | undefined {
    return this.tickets.get(cellId);
  }

  async clearOutputs(uri: string, ids: readonly string[]): Promise<void> {
    this.calls.push({ method: 'clearOutputs', uri, args: ids });
    for (const cell of this.book(uri).cells)
      if (ids.includes(cell.id)) {
        cell.outputs = [];
        cell.execution = idle;
      }
  }

  async persistIds(uri: string): Promise<void> {
    const book = this.book(uri);
    this.calls.push({ method: 'persistIds', uri });
    book.info = { ...book.info, idsPersist: true };
    book.dirty = true;
  }

  async save(uri: string): Promise<void> {
    const book = this.book(uri);
    const failure = this.failSave.get(uri);
    if (failure) throw new BridgeError('conflict', failure);
    this.calls.push({ method: 'save', uri });
    book.dirty = false;
  }

  async interrupt(uri: string): Promise<InterruptHow> {
    this.book(uri);
    this.calls.push({ method: 'interrupt', uri });
    return 'sigint';
  }

  async restart(uri: string): Promise<void> {
    const book = this.book(uri);
    if (book.info.kernel !== 'builtin')
      throw new BridgeError('conflict', `Restart works for the builtin kernel only; ${book.info.uri} uses ${book.info.kernel}`);
    this.calls.push({ method: 'restart', uri });
    book.kernel = { state: 'idle', startedAt: Date.now() };
  }

  // ------------------------------------------------------------------------------ internals

  private queue(cell: FakeCell): Ticket {
    cell.execution = { ...cell.execution, status: 'queued', order: null, success: null, durationMs: null };
    const ticket = new Ticket(`run_${++this.runs}`, cell.id);
    this.tickets.set(cell.id, ticket);
    this.byRunId.set(ticket.runId, ticket);
    this.queuedAt.set(ticket.runId, this.runs);
    return ticket;
  }

  private async play(cell: FakeCell, ticket: Ticket): Promise<void> {
    const started = Date.now();
    cell.outputs = [];
    cell.execution = { ...cell.execution, status: 'running', order: ++this.order, startedAt: started, ranCode: cell.code };
    ticket.step('running');
    const script = this.scripts[cell.code] ?? { steps: [] };
    for (const step of script.steps) {
      if ('waitMs' in step) await sleep(step.waitMs);
      else if ('stdout' in step || 'stderr' in step) {
        const mime = 'stdout' in step ? STDOUT_MIME : STDERR_MIME;
        const text = 'stdout' in step ? step.stdout : step.stderr;
        const last = cell.outputs[cell.outputs.length - 1];
        // Like the builtin kernel: chunks of one stream are items appended to one output.
        if (last && last.items[0]?.mime === mime)
          cell.outputs[cell.outputs.length - 1] = { items: [...last.items, { mime, data: enc(text) }] };
        else cell.outputs = [...cell.outputs, { items: [{ mime, data: enc(text) }] }];
      } else if ('display' in step) {
        const data = typeof step.display.data === 'string' ? enc(step.display.data) : step.display.data;
        cell.outputs = [...cell.outputs, { items: [{ mime: step.display.mime, data }] }];
      } else {
        const { name, message, traceback } = step.error;
        cell.outputs = [
          ...cell.outputs,
          { items: [{ mime: ERROR_MIME, data: enc(JSON.stringify({ name, message, stack: traceback })) }] },
        ];
      }
      ticket.step('running');
    }
    const success = script.success ?? !script.steps.some((s) => 'error' in s);
    this.clock = Math.max(this.clock + 1, Date.now());
    cell.execution = {
      ...cell.execution,
      status: 'idle',
      success,
      ended: true,
      endedAt: this.clock,
      durationMs: Date.now() - started,
    };
    ticket.step('ended');
  }

  private book(uri: string): FakeNotebook {
    const book = this.books.find((b) => b.info.uri === uri);
    if (!book) throw new BridgeError('not_found', `fake: no notebook ${uri}`);
    return book;
  }
}

/** The notebook most unit suites open: a saved .ipynb on the builtin kernel. */
export const NOTEBOOK_A: FakeNotebookInfo = {
  sessionId: 's_aaaaaa',
  uri: 'file:///work/a.ipynb',
  path: '/work/a.ipynb',
  notebookType: 'jupyter-notebook',
  kernel: 'builtin',
  idsPersist: true,
};
/** A PNG signature and two bytes: enough for a binary output item. */
export const PNG_BYTES = new Uint8Array([137, 80, 78, 71, 13, 10, 26, 10, 0, 255]);

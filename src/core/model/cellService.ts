/**
 * Cells as agents see them, and the two interfaces around the cell rules: `CellService` (what
 * the route handlers call) and `OpenNotebooks` (what the editor must provide; VS Code's
 * implementation is src/notebooks/editorNotebooks.ts, unit tests use an in-memory fake).
 */

import type { InterruptHow, KernelState, KernelStatus } from './kernelPort';
import type { RunOutcome } from '../outcome';
import type { RunTicket } from './runTicket';
import type { Reader, WriteGuard } from './versions';
import type { EditStopwatch } from '../flow/editSpans';
import type { PresenceAnswer } from './presenceAnswer';
import type { RiskReport } from './riskScan';
import type { CellDataflow, FactSource, RunDataflow, StaleCell } from './cellGraph';

export type CellKind = 'code' | 'markup';

/** A cell named by its stable id, or by its index (negative counts from the end). */
export type CellRef = string | number;

/** A half-open range of cell indices, as VS Code's NotebookRange. */
export interface IndexRange {
  readonly start: number;
  readonly end: number;
}

export interface NotebookInfo {
  /** marimo-style session id; also accepted wherever a notebook is named. */
  readonly sessionId: string;
  readonly uri: string;
  /** Absolute file path, or null for an untitled notebook. */
  readonly path: string | null;
  readonly notebookType: string;
  /** Kind of the kernel serving it through the bridge ("builtin", ...), or null. */
  readonly kernel: string | null;
  /** Why no kernel serves it (none selected, not started, access refused by the person); absent when one does. */
  readonly kernelUnavailable?: string;
  /** Where that kernel is (idle, busy, starting, restarting, dead, not_started, unknown); null when none serves it. */
  readonly kernelState: KernelState | null;
  /** Why `kernelState` is `unknown` (marimo's API reports every kernel as idle). */
  readonly kernelStateNote?: string;
  readonly cellCount: number;
  readonly dirty: boolean;
  /** Whether the file keeps the cells' ids (nbformat 4.5+): else this VS Code keeps them (found again after a restart by each cell's place and text). */
  readonly idsPersist: boolean;
  /** When they do not: why, and how to make them last (cellIdPersistence.ts). */
  readonly idsNote?: string;
}

/** A notebook as the editor lists it; its kernel is asked for separately (asking can be slow). */
export type NotebookEntry = Omit<NotebookInfo, 'kernel' | 'kernelUnavailable' | 'kernelState' | 'kernelStateNote' | 'idsNote'>;

/** Where a run is, as the editor reports it. */
export type ExecutionStatus = 'idle' | 'queued' | 'running';

/** A cell's run state: never run (idle), queued, running, then how its last run ended. */
export type CellStatus = ExecutionStatus | RunOutcome;

export interface ExecutionView {
  /** The execution count of its last run in the notebook's current kernel; null when it has not run in it. */
  readonly order: number | null;
  /**
   * Whether the cell has run in the notebook's current kernel (or is queued or running in it).
   * false: never since that kernel started (the count and outputs come from the saved file, or from
   * a run before a restart): `order`, `success` and `durationMs` are null, `status` is idle.
   */
  readonly inKernel: boolean;
  /** For a cell that has not run in the current kernel: the count the editor shows for it (saved in the file, or from an earlier kernel). */
  readonly savedOrder?: number;
  /** Set when the cell shows outputs of a run this window saw in an earlier kernel (before a restart or the kernel's death). */
  readonly outputsFrom?: 'earlier kernel';
  /** null only while the cell has no ended run in this kernel (never run, queued, running). */
  readonly success: boolean | null;
  readonly durationMs: number | null;
  readonly status: CellStatus;
}

/** One item of an output, typed: stdout/stderr/error, else its mime type. */
export interface OutputItemView {
  readonly type: string;
  /** Text of textual items, cut at the configured limit. */
  readonly text?: string;
  /** For `error` items. */
  readonly name?: string;
  readonly message?: string;
  readonly traceback?: string;
  /** Size of the raw item in bytes. */
  readonly bytes: number;
  readonly truncated?: true;
  /** Characters cut from the middle of a truncated item (head and tail are kept). */
  readonly omitted?: number;
  /** Where the raw bytes are served (binary and truncated items). */
  readonly url?: string;
}

export interface OutputView {
  readonly items: readonly OutputItemView[];
}

export interface CellView {
  readonly id: string;
  readonly index: number;
  readonly kind: CellKind;
  readonly language: string;
  readonly code: string;
  readonly version: number;
  /** The cell's own metadata (nbformat's cell `metadata` for .ipynb), without the editor's keys. */
  readonly metadata: CellMetadata;
  /** `metadata.tags`: what papermill, nbconvert and Quarto read. */
  readonly tags: readonly string[];
  /** null for markup cells. */
  readonly execution: ExecutionView | null;
  readonly outputs: readonly OutputView[];
  /** On reads of Python cells of Jupyter and marimo notebooks (cellGraph.ts): the cells it uses names from, those using its names, and whether its outputs are out of date. */
  readonly dependsOn?: readonly string[];
  readonly dependents?: readonly string[];
  readonly stale?: { readonly reason: string; readonly from: FactSource } | null;
  /** What it reads and writes, from its last run (`from: "run"`) or its code (`"code"`). */
  readonly dataflow?: CellDataflow;
  /** On a write's answer only: what the check of the written Python found (codeChecks.ts). */
  readonly warnings?: readonly string[];
  /** The person typed in it in the last 10 s: a write to it is refused unless forced (presence.ts). */
  readonly personEditing?: true;
}

/**
 * `strict`: true refuses a write whose Python uses a name no cell defines, or defines one another
 * cell does; false writes code that could not be analysed (too deeply nested), which is otherwise refused.
 */
export interface StrictFlag {
  readonly strict?: boolean | undefined;
}

export type CellMetadata = Readonly<Record<string, unknown>>;

export interface ActiveNotebook {
  readonly notebook: NotebookInfo | null;
  readonly selections: readonly IndexRange[];
  readonly selectedCells: readonly { id: string; index: number }[];
  readonly visibleRanges: readonly IndexRange[];
}

/** Where a new or moved cell goes: an index, or next to another cell; default: the end. */
export interface Position {
  readonly index?: number | undefined;
  readonly before?: CellRef | undefined;
  readonly after?: CellRef | undefined;
}

/** What an edit may set besides the text: the whole metadata, or only its tags. */
export interface MetadataChange {
  readonly metadata?: CellMetadata | undefined;
  readonly tags?: readonly string[] | undefined;
}

export type BatchOp =
  | ({
      op: 'create';
      /** A name later ops of the same batch (and its `run`) use as a ref to this new cell. */
      name?: string | undefined;
      code?: string | undefined;
      kind?: CellKind | undefined;
      language?: string | undefined;
    } & Position &
      MetadataChange)
  | ({
      op: 'edit';
      ref: CellRef;
      code?: string | undefined;
      kind?: CellKind | undefined;
      language?: string | undefined;
    } & WriteGuard &
      MetadataChange)
  | ({ op: 'delete'; ref: CellRef } & WriteGuard)
  | { op: 'move'; ref: CellRef; to?: number | undefined; before?: CellRef | undefined; after?: CellRef | undefined };

/** What an edit left stale (cellGraph.ts): absent where the notebook has no dependency analysis. */
export interface StaleCaused {
  readonly stale?: readonly StaleCell[];
}

/** One cell created, edited or moved, and the cells the change left stale. */
export interface CellChanged extends StaleCaused {
  readonly cell: CellView;
}

export interface BatchResult extends StaleCaused {
  /** Cells created, edited or moved by the batch, in notebook order. */
  readonly cells: readonly CellView[];
  readonly deleted: readonly string[];
  readonly cellCount: number;
  /** The ids of the cells created under a name, by name (only when some were named). */
  readonly names?: Readonly<Record<string, string>>;
}

export interface CellRunResult {
  /** False when the wait ended by timeout (the run goes on). */
  readonly done: boolean;
  /** A boolean once the run ended (false when it failed or was interrupted); null while it runs. */
  readonly success: boolean | null;
  /** How the run ended, or where it is when the wait stopped first. */
  readonly status: CellStatus;
  readonly cell: CellView;
  /**
   * Runs of other cells that the kernel started while this one ran, in notebook order: marimo
   * re-runs a cell's dependents (those that ran before in its kernel). Waited for under the same
   * deadline; one still queued or running has `done: false`.
   */
  readonly alsoRan?: readonly CellRunResult[];
  /** What the risk scan found in the cell's code (absent: nothing). */
  readonly risk?: RiskReport;
  /** Once it ended: the cells it (and `alsoRan`) left stale, cells that read what it changed (cellGraph.ts). */
  readonly stale?: readonly StaleCell[];
}

/** What a dry run would run: one cell, a selection, or the stale cells (from one, or all). */
export type DryRun =
  | { readonly cell: CellRef }
  | { readonly selection: RunSelection }
  | { readonly stale: CellRef | undefined; readonly rebuild?: boolean };

/** Which cells a run of many runs: a list of refs, a half-open index range, or all code cells. */
export type RunSelection = { readonly cells: readonly CellRef[] } | { readonly range: IndexRange } | { readonly all: true };

/** `stop`: a cell that does not succeed ends the series (later cells are not run); `continue`: all run. */
export type OnError = 'stop' | 'continue';

/** Incremental output of one cell of a series, or its end. */
export type SeriesEvent =
  { readonly cellId: string; readonly event: RunEvent } | { readonly cellId: string; readonly result: CellRunResult };

export interface SeriesResult {
  /** False when the wait ended by timeout (the series goes on). */
  readonly done: boolean;
  /** `succeeded` when every cell did; else the outcome of the first that did not, or `running`. */
  readonly status: CellStatus;
  /** One per cell whose run ended, in order. */
  readonly runs: readonly CellRunResult[];
  /** Cells queued or running when the wait stopped (the series goes on). */
  readonly pending: readonly string[];
  /** Cells not run: an earlier one did not succeed (onError "stop"), or their kernel dropped them (Jupyter after a failure). */
  readonly skipped: readonly string[];
  /** Why the series ended early when no cell failed (e.g. a cell was deleted). */
  readonly detail?: string;
  /** Once it ended: the cells its runs left stale. */
  readonly stale?: readonly StaleCell[];
}

/** A queued series of cell runs; `wait` may be called once. */
export interface SeriesHandle {
  readonly cellIds: readonly string[];
  wait(options: { timeoutMs: number; onEvent?: (event: SeriesEvent) => void; signal?: AbortSignal }): Promise<SeriesResult>;
}

export interface SavedNotebook {
  readonly sessionId: string;
  readonly path: string | null;
  readonly saved: boolean;
  /** Why it was not saved. */
  readonly detail?: string;
}

/** Incremental output of a run, for event streams. */
export type RunEvent =
  { readonly kind: 'stdout' | 'stderr'; readonly text: string } | { readonly kind: 'output'; readonly item: OutputItemView };

/** A queued cell run, read from its ticket; `wait` may be called again after a wait that timed out. */
export interface RunHandle {
  readonly cellId: string;
  /** The run's ticket (RunTicket.runId). */
  readonly runId: string;
  /** What the risk scan found in the cell's code before it started. */
  readonly risk?: RiskReport | undefined;
  /** `stale: false`: the result leaves out the cells the run left stale (a caller that asks once for many runs). */
  wait(options: RunWaitOptions): Promise<CellRunResult>;
  /** The stale cells among `cellIds` and those downstream of them, in the run's notebook now. */
  staleAfter?(cellIds: readonly string[]): Promise<readonly StaleCell[] | undefined>;
}

export interface RunWaitOptions {
  timeoutMs: number;
  onEvent?: (event: RunEvent) => void;
  signal?: AbortSignal;
  stale?: boolean;
}

/** A run of the stale cells: the series, and the cells it needs that have not run in this kernel. */
export interface StaleRun {
  readonly series: SeriesHandle;
  /** Cells the stale ones read from that have not run in this kernel: run by `rebuild`, else only named. */
  readonly needs: readonly StaleCell[];
  readonly detail: string;
}

/** The cell routes' view of the notebooks. Errors are BridgeErrors. `notebook` names a notebook by
 * session id, uri or path; undefined means "the only open notebook". */
export interface CellService {
  /** The service as one client sees it: read-before-write is kept per client (versions.ts). */
  as(reader: Reader): CellService;
  notebooks(): Promise<NotebookInfo[]>;
  active(): Promise<ActiveNotebook>;
  /** Where the person and the agents are in the notebook now, and what runs for whom (presence.ts). */
  presence(notebook: string | undefined): Promise<PresenceAnswer>;
  /** `read: false`: the answer does not count as a read of the cells (a brief list, which shows no code). */
  list(notebook: string | undefined, options?: { read?: boolean }): Promise<{ notebook: NotebookInfo; cells: CellView[] }>;
  get(notebook: string | undefined, ref: CellRef): Promise<CellView>;
  create(notebook: string | undefined, cell: Omit<Extract<BatchOp, { op: 'create' }>, 'op'> & StrictFlag): Promise<CellChanged>;
  edit(
    notebook: string | undefined,
    ref: CellRef,
    change: Omit<Extract<BatchOp, { op: 'edit' }>, 'op' | 'ref'> & StrictFlag,
  ): Promise<CellChanged>;
  remove(notebook: string | undefined, ref: CellRef, guard: WriteGuard): Promise<{ deleted: string; cellCount: number }>;
  move(
    notebook: string | undefined,
    ref: CellRef,
    to: Omit<Extract<BatchOp, { op: 'move' }>, 'op' | 'ref'>,
  ): Promise<CellChanged>;
  /** Validates every op, then applies them as one edit (all or nothing); then queues `run`. */
  batch(
    notebook: string | undefined,
    ops: readonly BatchOp[],
    run: readonly CellRef[],
    options?: StrictFlag,
  ): Promise<BatchResult & { runs: RunHandle[] }>;
  run(notebook: string | undefined, ref: CellRef): Promise<RunHandle>;
  /** The run a code cell has queued or running, to wait on again; with none, its last run at once. */
  follow(notebook: string | undefined, ref: CellRef): Promise<RunHandle>;
  /**
   * Runs every stale cell, or `from` and the cells downstream of it that ran before, in notebook
   * order; `rebuild`: first the cells they need that have not run in this kernel.
   */
  runStale(notebook: string | undefined, from: CellRef | undefined, rebuild?: boolean): Promise<StaleRun>;
  /** The cells a run would run and what the risk scan finds in them; runs nothing. */
  dryRun(notebook: string | undefined, run: DryRun): Promise<{ cells: string[]; risk: RiskReport }>;
  /** Runs several cells in notebook order (one at a time with onError "stop"). */
  runMany(notebook: string | undefined, selection: RunSelection, onError: OnError): Promise<SeriesHandle>;
  /** Clears the outputs (and last run) of the selected cells; markup cells have none. */
  clearOutputs(notebook: string | undefined, selection: RunSelection): Promise<{ cleared: string[] }>;
  /** Saves one notebook, or (notebook "all") every open notebook the agents changed or ran. */
  save(notebook: string | undefined | 'all'): Promise<{ saved: SavedNotebook[] }>;
  /** What stopping the running cell took: SIGINT, or (builtin kernel, SIGINT ignored for 2 s) a restart. */
  interrupt(notebook: string | undefined): Promise<InterruptHow>;
  restart(notebook: string | undefined): Promise<void>;
  /**
   * Upgrades an .ipynb older than nbformat 4.5 to 4.5, its cells' current ids written into it, once
   * the person agrees (cellIdPersistence.ts); a notebook that keeps its ids already is left as it is.
   */
  persistIds(notebook: string | undefined): Promise<{ notebook: NotebookInfo; upgraded: boolean }>;
  /** The raw bytes of one output item (`url` of an item view). */
  outputItem(
    notebook: string | undefined,
    ref: CellRef,
    output: number,
    item: number,
  ): Promise<{ mime: string; data: Uint8Array }>;
}

// ----------------------------------------------------------------------- the editor's side

export interface RawOutputItem {
  readonly mime: string;
  readonly data: Uint8Array;
}

export interface RawOutput {
  readonly items: readonly RawOutputItem[];
}

/** What the editor reports of a cell's executions. */
export interface ExecutionState {
  readonly order: number | null;
  readonly success: boolean | null;
  readonly durationMs: number | null;
  readonly status: ExecutionStatus;
  /** The last execution has an end time (with success undefined: it was cancelled). */
  readonly ended: boolean;
  /** When the last execution ended (ms since the epoch), where the editor says. */
  readonly endedAt?: number | undefined;
  /** The cell's text when its last run started, where this window saw it start. */
  readonly ranCode?: string | undefined;
  /** When the last execution started (ms since the epoch), where this window saw it; none for a count loaded from the file. */
  readonly startedAt?: number | undefined;
  /** What the last execution read and changed, where its kernel recorded it (the builtin kernel). */
  readonly dataflow?: RunDataflow | undefined;
}

/** What the batch planner needs to know of a cell as it is now. */
export interface CellState {
  readonly id: string;
  readonly kind: CellKind;
  readonly language: string;
  readonly code: string;
  readonly version: number;
  readonly metadata: CellMetadata;
}

export interface CellSnapshot extends CellState {
  readonly execution: ExecutionState;
  readonly outputs: readonly RawOutput[];
}

/** A cell the editor must create: new, or a copy of cell `copyOf` (outputs, metadata and
 * execution summary kept) that takes over its id. */
export interface NewCell {
  readonly id: string;
  readonly kind: CellKind;
  readonly language: string;
  readonly code: string;
  /** The version the cell starts at (its own history continues when it is a copy). */
  readonly version: number;
  /** The cell's metadata (for a copy: replaces the original's). */
  readonly metadata?: CellMetadata | undefined;
  readonly copyOf?: number | undefined;
}

/**
 * One atomic change of a notebook, in the indices of the cells as they were (`expectIds`):
 * whole-text replacements of cells that stay, and disjoint ranges replaced by new cells.
 */
export interface NotebookChange {
  readonly expectIds: readonly string[];
  readonly texts: readonly { readonly index: number; readonly code: string }[];
  /** New metadata of cells that stay in place. */
  readonly metadata: readonly { readonly index: number; readonly metadata: CellMetadata }[];
  readonly splices: readonly { readonly start: number; readonly end: number; readonly cells: readonly NewCell[] }[];
  /** Ids of the cells after the change, in order (to check and to place the new cells). */
  readonly resultIds: readonly string[];
}

/**
 * The open notebooks as the cell rules need them. `uri` is NotebookEntry.uri. Methods throw
 * BridgeError (e.g. 409 when an edit could not be applied, nothing changed).
 */
export interface OpenNotebooks {
  list(): NotebookEntry[];
  /** The kind of kernel that serves the notebook through the bridge and where it is, or why none does. */
  kernel(uri: string): Promise<{ kind: string; status: KernelStatus } | { unavailable: string }>;
  /** The notebook editor the person is using, or null; never changes focus. */
  active(): { uri: string; selections: IndexRange[]; visibleRanges: IndexRange[] } | null;
  cells(uri: string): CellSnapshot[];
  /** Language of new code cells when the notebook has none to copy (its metadata). */
  defaultLanguage(uri: string): string;
  /** Fresh id for a new cell of this notebook. */
  newId(uri: string): string;
  /** `span` times the write's parts (the bench's EditSpans). */
  apply(uri: string, change: NotebookChange, span?: EditStopwatch): Promise<void>;
  /**
   * Queues the cells for execution by the notebook's kernel; does not wait for them. Answers one
   * ticket per cell, in order (the run under way, for a cell already queued or running).
   * `stopAfterFailure`: the later cells must not run once one fails; where the kernel cannot
   * promise that, only the first cell is queued (one ticket), and the caller queues the next.
   */
  execute(uri: string, ids: readonly string[], stopAfterFailure?: boolean): Promise<RunTicket[]>;
  /** A run's ticket by its id, while the window remembers it. */
  ticket(runId: string): RunTicket | undefined;
  /**
   * Runs of other cells of the notebook that started after this run was queued without being
   * asked of the bridge: the kernel's own (marimo re-runs a cell's dependents), or the person's.
   */
  startedAfter(runId: string): readonly RunTicket[];
  /** The ticket of a cell's latest run in this window, if it ran. */
  latestRun(uri: string, cellId: string): RunTicket | undefined;
  /** Removes the outputs and the last run's summary of these cells (one edit). */
  clearOutputs(uri: string, ids: readonly string[]): Promise<void>;
  /** Writes the notebook to its file; throws BridgeError with the reason when it cannot. */
  save(uri: string): Promise<void>;
  /** Makes an .ipynb nbformat 4.5 with its cells' current ids in the file (one edit; saved with the notebook). */
  persistIds(uri: string): Promise<void>;
  interrupt(uri: string): Promise<InterruptHow>;
  restart(uri: string): Promise<void>;
}

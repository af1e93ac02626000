/**
 * Runs as an agent action. Scratchpad runs are capped by the person's run limit, stopped by "Stop
 * Agents", and their outcome and the head of their output noted on the action's Activity. The
 * kernel sees one extra abort signal; nothing is done per output chunk but a bounded append.
 */
import type { Activity } from '../agents/accessPolicy';
import type {
  BatchOp,
  CellRef,
  CellRunResult,
  CellService,
  OnError,
  RunEvent,
  RunHandle,
  RunSelection,
  SeriesHandle,
  StaleRun,
  StrictFlag,
} from '../model/cellService';
import type { ExecResult, Kernel, StreamEvent } from '../model/kernelPort';
import { runKind } from '../outcome';
import { FOREVER_MS } from '../cells/series';
import type { NotebookHost } from '../model/notebookHost';
import { sleep } from '../sleep';

/** The words a capped run's stderr and detail carry: where the limit is set. */
export const RUN_LIMIT_DETAIL = 'limit the person set (agentBridge.access.maxRunSeconds)';

/** The host whose kernels run under `activity` (null: a transport whose actions are recorded elsewhere). */
export function agentHost(host: NotebookHost, activity: Activity | null, maxRunMs: number): NotebookHost {
  return {
    sessions: () => host.sessions(),
    open: (path, options) => host.open(path, options),
    startKernel: (notebook, kernel) => host.startKernel(notebook, kernel),
    kernelFor: async (sessionId) => agentKernel(await host.kernelFor(sessionId), activity, maxRunMs),
  };
}

export function agentKernel(kernel: Kernel, activity: Activity | null, maxRunMs: number): Kernel {
  return {
    kind: kernel.kind,
    status: () => kernel.status(),
    ...(kernel.inspect && { inspect: kernel.inspect.bind(kernel) }),
    async executeScratchpad(code: string, onStream: (event: StreamEvent) => void, signal: AbortSignal): Promise<ExecResult> {
      // One controller fed by listeners, not AbortSignal.any, which is slow per run (SETUP.md, measured figures).
      const stop = new AbortController();
      const abort = () => stop.abort();
      if (signal.aborted) stop.abort();
      else signal.addEventListener('abort', abort, { once: true });
      let stopped = false;
      const unlisten = activity?.onStop(() => {
        stopped = true;
        stop.abort();
      });
      let capped = false;
      const timer =
        maxRunMs > 0
          ? setTimeout(() => {
              capped = true;
              stop.abort();
            }, maxRunMs)
          : undefined;
      const stream = activity
        ? (event: StreamEvent) => {
            activity.note(event.text);
            onStream(event);
          }
        : onStream;
      let result: ExecResult;
      try {
        result = await kernel.executeScratchpad(code, stream, stop.signal);
      } finally {
        clearTimeout(timer);
        signal.removeEventListener('abort', abort);
        unlisten?.();
      }
      if (capped) {
        const detail = `The run reached the ${maxRunMs / 1000} s ${RUN_LIMIT_DETAIL} and was interrupted`;
        onStream({ name: 'stderr', text: `${detail}\n` });
        activity?.settle('timed_out', detail);
        return { ...result, success: false, status: 'timed_out' };
      }
      if (activity && stopped) {
        const detail = 'The person stopped every agent run (Agent Bridge: Stop Agents)';
        onStream({ name: 'stderr', text: `${detail}\n` });
        activity.settle('interrupted', detail);
        return { ...result, success: false, status: 'interrupted' };
      }
      activity?.note(result.output.data);
      activity?.settle(runKind(result.status, result.restarted));
      return result;
    },
  };
}

const SETTLE_POLL_MS = 100;
/** How long an interrupted cell run may take to end (the kernel's SIGINT grace, then a restart). */
const SETTLE_MS = 10_000;

/**
 * The cell service as an agent's action sees it: every run it starts (alone, after a batch, or a
 * run of many) is capped by the person's limit. Past it the notebook's kernel is interrupted, and the run ends
 * failed, its action timed out. A handle's own `wait` is taken by the cap, so the waits the
 * transports ask for are served from it.
 */
export function cappedCells(cells: CellService, activity: Activity | null, maxRunMs: number): CellService {
  return maxRunMs <= 0 ? cells : new CappedCells(cells, activity, maxRunMs);
}

class CappedCells implements CellService {
  constructor(
    private readonly cells: CellService,
    private readonly activity: Activity | null,
    private readonly maxRunMs: number,
  ) {}

  notebooks = () => this.cells.notebooks();
  active = () => this.cells.active();
  presence: CellService['presence'] = (notebook) => this.cells.presence(notebook);
  list: CellService['list'] = (notebook, options) => this.cells.list(notebook, options);
  get: CellService['get'] = (notebook, ref) => this.cells.get(notebook, ref);
  create: CellService['create'] = (notebook, cell) => this.cells.create(notebook, cell);
  edit: CellService['edit'] = (notebook, ref, change) => this.cells.edit(notebook, ref, change);
  remove: CellService['remove'] = (notebook, ref, guard) => this.cells.remove(notebook, ref, guard);
  move: CellService['move'] = (notebook, ref, to) => this.cells.move(notebook, ref, to);
  clearOutputs: CellService['clearOutputs'] = (notebook, selection) => this.cells.clearOutputs(notebook, selection);
  save: CellService['save'] = (notebook) => this.cells.save(notebook);
  persistIds: CellService['persistIds'] = (notebook) => this.cells.persistIds(notebook);
  interrupt: CellService['interrupt'] = (notebook) => this.cells.interrupt(notebook);
  restart: CellService['restart'] = (notebook) => this.cells.restart(notebook);
  dryRun: CellService['dryRun'] = (notebook, run) => this.cells.dryRun(notebook, run);
  as: CellService['as'] = (reader) => cappedCells(this.cells.as(reader), this.activity, this.maxRunMs);
  // A run waited on again was capped by the action that started it.
  follow: CellService['follow'] = (notebook, ref) => this.cells.follow(notebook, ref);
  outputItem: CellService['outputItem'] = (notebook, ref, output, item) => this.cells.outputItem(notebook, ref, output, item);

  async run(notebook: string | undefined, ref: CellRef): Promise<RunHandle> {
    return this.cap(notebook, await this.cells.run(notebook, ref));
  }

  async batch(notebook: string | undefined, ops: readonly BatchOp[], run: readonly CellRef[], options?: StrictFlag) {
    const applied = await this.cells.batch(notebook, ops, run, options);
    return { ...applied, runs: applied.runs.map((h) => this.cap(notebook, h)) };
  }

  // A run of many is capped as a whole: past the limit the kernel is interrupted, which ends the
  // running cell (and the series, or with onError "continue" the cells queued after it).
  async runMany(notebook: string | undefined, selection: RunSelection, onError: OnError): Promise<SeriesHandle> {
    return this.capSeries(notebook, await this.cells.runMany(notebook, selection, onError));
  }

  async runStale(notebook: string | undefined, from: CellRef | undefined, rebuild?: boolean): Promise<StaleRun> {
    const run = await this.cells.runStale(notebook, from, rebuild);
    return { ...run, series: this.capSeries(notebook, run.series) };
  }

  private capSeries(notebook: string | undefined, series: SeriesHandle): SeriesHandle {
    const detail = `The cells run reached the ${this.maxRunMs / 1000} s ${RUN_LIMIT_DETAIL} and was interrupted`;
    let capped = false;
    const timer = setTimeout(() => {
      capped = true;
      this.activity?.settle('timed_out', detail);
      void this.cells.interrupt(notebook).catch(() => undefined);
    }, this.maxRunMs);
    void series.wait({ timeoutMs: FOREVER_MS }).finally(() => clearTimeout(timer));
    return {
      cellIds: series.cellIds,
      wait: async (options) => {
        const result = await series.wait(options);
        return capped && result.status === 'interrupted' ? { ...result, status: 'timed_out', detail } : result;
      },
    };
  }

  private cap(notebook: string | undefined, handle: RunHandle): RunHandle {
    const { cells, activity, maxRunMs } = this;
    let forward: ((event: RunEvent) => void) | undefined;
    const whole = handle
      .wait({ timeoutMs: maxRunMs, onEvent: (e) => forward?.(e) })
      .then(async (result): Promise<CellRunResult> => {
        if (result.done) return result;
        const detail = `The cell run reached the ${maxRunMs / 1000} s ${RUN_LIMIT_DETAIL} and was interrupted`;
        activity?.settle('timed_out', detail);
        forward?.({ kind: 'stderr', text: `${detail}\n` });
        await cells.interrupt(notebook).catch(() => undefined);
        for (const end = Date.now() + SETTLE_MS; Date.now() < end; await sleep(SETTLE_POLL_MS)) {
          const cell = await cells.get(notebook, handle.cellId);
          const status = cell.execution?.status;
          if (status !== 'queued' && status !== 'running') return { done: true, success: false, status: 'timed_out', cell };
        }
        return { ...result, cell: await cells.get(notebook, handle.cellId) };
      });
    return {
      cellId: handle.cellId,
      runId: handle.runId,
      risk: handle.risk,
      wait: async ({ timeoutMs, onEvent, signal }) => {
        forward = onEvent;
        let timer: NodeJS.Timeout | undefined;
        const stopped = new Promise<null>((resolve) => {
          timer = setTimeout(() => resolve(null), timeoutMs);
          signal?.addEventListener('abort', () => resolve(null), { once: true });
        });
        const result = await Promise.race([whole, stopped]).finally(() => clearTimeout(timer));
        if (result) return result;
        const cell = await cells.get(notebook, handle.cellId);
        return { done: false, success: null, status: cell.execution?.status ?? 'running', cell };
      },
      ...(handle.staleAfter && { staleAfter: handle.staleAfter.bind(handle) }),
    };
  }
}

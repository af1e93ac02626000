import type {
  CellRunResult,
  CellStatus,
  OnError,
  RunHandle,
  SeriesEvent,
  SeriesHandle,
  SeriesResult,
} from '../model/cellService';
import type { StaleCell } from '../model/cellGraph';
import { BridgeError } from '../bridgeError';

/** Longest wait setTimeout allows: for waits that end with the run (or their caller's abort). */
export const FOREVER_MS = 2_147_483_647;

/**
 * Several cell runs, followed in notebook order whoever waits. With onError "continue" every
 * cell is queued at once (the kernel runs them back to back); with "stop" too where the kernel
 * drops the rest after a failure (the builtin kernel), else each is queued when the one before
 * it succeeded; either way a failure leaves the rest unrun. A cell whose run ended without
 * running (its kernel dropped it) counts as skipped. The series goes on when a wait times out or
 * its client leaves, like a single run.
 */
export class CellSeries implements SeriesHandle {
  private readonly runs: CellRunResult[] = [];
  private readonly listeners = new Set<(event: SeriesEvent) => void>();
  private skipped: readonly string[] = [];
  private stopped: string | undefined;
  private stale: readonly StaleCell[] | undefined;
  private readonly finished: Promise<void>;

  /**
   * `first`: the handles already queued (the first cell, or all of them with "continue");
   * `staleAfter`: the stale cells among those that ran and downstream of them, once all ended.
   */
  constructor(
    readonly cellIds: readonly string[],
    first: readonly RunHandle[],
    onError: OnError,
    start: (id: string) => Promise<RunHandle>,
    staleAfter?: (ran: readonly string[]) => Promise<readonly StaleCell[] | undefined>,
  ) {
    this.finished = this.drive(first, onError, start).then(async () => {
      if (staleAfter && this.runs.length) this.stale = await staleAfter(this.runs.map((r) => r.cell.id)).catch(() => undefined);
    });
  }

  private async drive(first: readonly RunHandle[], onError: OnError, start: (id: string) => Promise<RunHandle>) {
    // Follow the first run only after the caller had its turn to wait: a run's events are
    // diffs of the cell's state since it was queued, so the waiter gets them all, none lost.
    await new Promise((resolve) => setImmediate(resolve));
    for (const [i, id] of this.cellIds.entries()) {
      let result: CellRunResult;
      try {
        const handle = first[i] ?? (await start(id));
        result = await handle.wait({
          timeoutMs: FOREVER_MS,
          onEvent: (event) => this.emit({ cellId: id, event }),
          stale: false,
        });
      } catch (error) {
        // The cell was deleted, or could no longer be queued: the series ends here.
        this.stopped = error instanceof BridgeError ? error.detail : String(error);
        this.skipped = [...this.skipped, ...this.cellIds.slice(i + (first[i] ? 1 : 0))];
        return;
      }
      if (result.done && result.status === 'idle') {
        this.skipped = [...this.skipped, id];
        continue;
      }
      this.runs.push(result);
      this.emit({ cellId: id, result });
      if (onError === 'stop' && result.status !== 'succeeded') {
        this.skipped = [...this.skipped, ...this.cellIds.slice(i + 1)];
        return;
      }
    }
  }

  private emit(event: SeriesEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  async wait(options: {
    timeoutMs: number;
    onEvent?: (event: SeriesEvent) => void;
    signal?: AbortSignal;
  }): Promise<SeriesResult> {
    const listener = options.onEvent;
    if (listener) this.listeners.add(listener);
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const done = await Promise.race([
      this.finished.then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), options.timeoutMs);
        onAbort = () => resolve(false);
        options.signal?.addEventListener('abort', onAbort);
      }),
    ]);
    clearTimeout(timer);
    if (onAbort) options.signal?.removeEventListener('abort', onAbort);
    if (listener) this.listeners.delete(listener);
    return this.result(done);
  }

  private result(done: boolean): SeriesResult {
    const runs = [...this.runs];
    const ran = new Set(runs.map((r) => r.cell.id));
    const skipped = new Set(this.skipped);
    const pending = done ? [] : this.cellIds.filter((id) => !ran.has(id) && !skipped.has(id));
    const failed = runs.find((r) => r.status !== 'succeeded');
    const status: CellStatus = failed?.status ?? (pending.length ? 'running' : this.stopped ? 'failed' : 'succeeded');
    return {
      done,
      status,
      runs,
      pending,
      skipped: [...this.skipped],
      ...(this.stopped ? { detail: `The series stopped: ${this.stopped}` } : {}),
      ...(done && this.stale ? { stale: this.stale } : {}),
    };
  }
}

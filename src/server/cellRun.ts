import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CellStatus, CellView, RunHandle, SeriesHandle } from '../core/model/cellService';
import { timeoutDetail, waitedKind, waitRuns, type RunOptions } from '../core/runs/cellRuns';
import { BridgeError } from '../core/bridgeError';
import { answerAt, cellAt } from '../core/outputs/outputDetail';
import { ERROR_MIME, STDERR_MIME, STDOUT_MIME } from '../core/outputs/cellOutputs';
import { Reply } from './route';
import { DEFAULT_LIMITS, openEventStream, type EventStream } from './sse';
import { errorMessage } from '../core/errorMessage';

export const wantsEventStream = (req: IncomingMessage) => (req.headers.accept ?? '').includes('text/event-stream');

/**
 * Answers a cell run: 202 when not waiting, the result when it ends, 504 with the cell's state
 * when the wait times out (the run goes on). With `Accept: text/event-stream` the outputs are
 * streamed as they arrive (`stdout`/`stderr` {data}, `output` {item}) and the stream ends with
 * `done` {success, status, cell, alsoRan?} or `timeout` {detail, cell}. `alsoRan`: the runs of
 * other cells the kernel started on its own meanwhile (marimo re-runs dependents).
 */
export const respondRun = (handle: RunHandle, options: RunOptions, req: IncomingMessage, res: ServerResponse) =>
  respondWait(
    handle,
    {
      queued: [handle.cellId],
      send: (stream, e) => (e.kind === 'output' ? stream.send('output', e.item) : stream.send(e.kind, { data: e.text })),
      ended: (r) =>
        answerAt(
          {
            success: r.success,
            status: r.status,
            cell: r.cell,
            ...(r.alsoRan ? { alsoRan: r.alsoRan } : {}),
            ...(r.stale ? { stale: r.stale } : {}),
          },
          options.outputs,
        ),
      timedOut: (r) => ({ detail: timeoutDetail(options.timeoutMs, [handle.cellId]), cell: cellAt(r.cell, options.outputs) }),
    },
    options,
    req,
    res,
  );

/**
 * Answers a run of many cells like respondRun: 202 `{queued}`, or with wait `{done, status,
 * runs, pending, skipped, stale?}` in notebook order (504 with the same body when the wait times out).
 * The event stream reports per cell: `stdout`/`stderr` {cell, data}, `output` {cell, item},
 * `cell` {cell id's result} as each ends, then `done` or `timeout` with the whole result.
 * `about`: fields every answer carries first (run-stale's `detail` and `needs`).
 */
export const respondSeries = (
  series: SeriesHandle,
  options: RunOptions,
  req: IncomingMessage,
  res: ServerResponse,
  about: object = {},
) =>
  respondWait(
    series,
    {
      about,
      queued: series.cellIds,
      send: (stream, e) => {
        if ('result' in e) stream.send('cell', answerAt(e.result, options.outputs));
        else if (e.event.kind === 'output') stream.send('output', { cell: e.cellId, item: e.event.item });
        else stream.send(e.event.kind, { cell: e.cellId, data: e.event.text });
      },
      ended: (r) => ({ ...about, ...answerAt(r, options.outputs) }),
      timedOut: (r) => ({ ...about, detail: timeoutDetail(options.timeoutMs, r.pending), ...answerAt(r, options.outputs) }),
    },
    options,
    req,
    res,
  );

/** How one kind of wait is answered: what was queued, its stream events, and its two ends. */
interface WaitReplies<E, R> {
  /** Fields the 202 answer carries besides `queued`. */
  about?: object;
  queued: readonly string[];
  send(stream: EventStream, event: E): void;
  ended(result: R): object;
  timedOut(result: R): object;
}

/**
 * Serves a wait: 202 `{queued}` when not waiting, else its end (504 when the wait ran out), or
 * with `Accept: text/event-stream` its events as they come. A client that goes away or stalls
 * stops the wait only (the cells' runs go on in the notebook); a failure ends the stream with `error`.
 */
async function respondWait<E, R extends { done: boolean; status: CellStatus }>(
  waitable: { wait(options: { timeoutMs: number; onEvent?: (event: E) => void; signal?: AbortSignal }): Promise<R> },
  replies: WaitReplies<E, R>,
  options: RunOptions,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<unknown> {
  if (wantsEventStream(req)) {
    const gone = new AbortController();
    const stream = openEventStream(res, { ...DEFAULT_LIMITS, onStall: () => gone.abort() });
    res.on('close', () => gone.abort());
    try {
      const result = await waitable.wait({
        timeoutMs: options.timeoutMs,
        signal: gone.signal,
        onEvent: (e) => replies.send(stream, e),
      });
      const body = result.done ? replies.ended(result) : replies.timedOut(result);
      stream.end(result.done ? 'done' : 'timeout', body);
      // Already sent: the Reply only tells the activity record how the wait ended.
      return Reply.of(gone.signal.aborted && !result.done ? 'interrupted' : waitedKind(result), body);
    } catch (error) {
      const detail = errorMessage(error);
      stream.end('error', { detail });
      return Reply.of(error instanceof BridgeError ? error.kind : 'internal', { detail });
    }
  }
  if (!options.wait) return new Reply(202, { ...replies.about, queued: replies.queued });
  const result = await waitable.wait({ timeoutMs: options.timeoutMs });
  return Reply.of(waitedKind(result), result.done ? replies.ended(result) : replies.timedOut(result));
}

/** A batch's runs waited for: 504 (the edits applied, the runs going on) when the wait ran out. */
export async function respondRuns<T extends { cells?: readonly CellView[] }>(
  applied: T,
  handles: readonly RunHandle[],
  options: RunOptions,
): Promise<unknown> {
  const { body, kind } = await waitRuns(applied, handles, options);
  return Reply.of(kind, body);
}

/** `:output/:item` segments of an output URL. */
export function outputIndex(value: string | undefined, name: string): number {
  if (value === undefined || !/^\d+$/.test(value))
    throw new BridgeError('not_found', `No output ${name} '${value}': it must be a whole number`);
  return Number(value);
}

/** Content-Type for a raw output item: streams as text, errors as JSON, others as their mime. */
export function rawContentType(mime: string): string {
  if (mime === STDOUT_MIME || mime === STDERR_MIME) return 'text/plain; charset=utf-8';
  if (mime === ERROR_MIME) return 'application/json; charset=utf-8';
  if (mime.startsWith('text/') && !mime.includes('charset')) return `${mime}; charset=utf-8`;
  return mime;
}

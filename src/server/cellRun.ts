import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CellView, RunHandle, SeriesHandle } from '../core/cells';
import { timeoutDetail, waitRuns, type RunOptions } from '../core/cellRuns';
import { BridgeError } from '../core/errors';
import { ERROR_MIME, STDERR_MIME, STDOUT_MIME } from '../core/cellOutputs';
import { Reply } from './route';
import { DEFAULT_LIMITS, openEventStream, type EventStream } from './sse';

export const wantsEventStream = (req: IncomingMessage) => (req.headers.accept ?? '').includes('text/event-stream');

/**
 * Answers a cell run: 202 when not waiting, the result when it ends, 504 with the cell's state
 * when the wait times out (the run goes on). With `Accept: text/event-stream` the outputs are
 * streamed as they arrive (`stdout`/`stderr` {data}, `output` {item}) and the stream ends with
 * `done` {success, cell} or `timeout` {detail, cell}. A client that goes away stops the wait only.
 */
export async function respondRun(
  handle: RunHandle,
  options: RunOptions,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<unknown> {
  if (wantsEventStream(req)) {
    return streamWait(res, async (stream, signal) => {
      const result = await handle.wait({
        timeoutMs: options.timeoutMs,
        signal,
        onEvent: (e) => (e.kind === 'output' ? stream.send('output', e.item) : stream.send(e.kind, { data: e.text })),
      });
      if (result.done) stream.end('done', { success: result.success, status: result.status, cell: result.cell });
      else stream.end('timeout', { detail: timeoutDetail(options.timeoutMs, [handle.cellId]), cell: result.cell });
    });
  }
  if (!options.wait) return new Reply(202, { queued: [handle.cellId] });
  const result = await handle.wait({ timeoutMs: options.timeoutMs });
  if (!result.done) return new Reply(504, { detail: timeoutDetail(options.timeoutMs, [handle.cellId]), cell: result.cell });
  return { success: result.success, status: result.status, cell: result.cell };
}

/**
 * Answers a run of many cells like respondRun: 202 `{queued}`, or with wait `{done, status,
 * runs, skipped}` in notebook order (504 with the same body when the wait times out). The
 * event stream reports per cell: `stdout`/`stderr` {cell, data}, `output` {cell, item}, `cell`
 * {cell id's result} as each ends, then `done` or `timeout` with the whole result.
 */
export async function respondSeries(
  series: SeriesHandle,
  options: RunOptions,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<unknown> {
  if (wantsEventStream(req)) {
    return streamWait(res, async (stream, signal) => {
      const result = await series.wait({
        timeoutMs: options.timeoutMs,
        signal,
        onEvent: (e) => {
          if ('result' in e) stream.send('cell', { ...e.result });
          else if (e.event.kind === 'output') stream.send('output', { cell: e.cellId, item: e.event.item });
          else stream.send(e.event.kind, { cell: e.cellId, data: e.event.text });
        },
      });
      if (result.done) stream.end('done', result);
      else stream.end('timeout', { detail: timeoutDetail(options.timeoutMs, result.pending), ...result });
    });
  }
  if (!options.wait) return new Reply(202, { queued: series.cellIds });
  const result = await series.wait({ timeoutMs: options.timeoutMs });
  if (!result.done) return new Reply(504, { detail: timeoutDetail(options.timeoutMs, result.pending), ...result });
  return result;
}

/**
 * Serves a wait as an event stream. A client that goes away or stalls stops the wait only (the
 * cells' runs go on in the notebook); a failure ends the stream with `error`.
 */
async function streamWait(
  res: ServerResponse,
  serve: (stream: EventStream, signal: AbortSignal) => Promise<void>,
): Promise<undefined> {
  const gone = new AbortController();
  const stream = openEventStream(res, { ...DEFAULT_LIMITS, onStall: () => gone.abort() });
  res.on('close', () => gone.abort());
  try {
    await serve(stream, gone.signal);
  } catch (error) {
    stream.end('error', { detail: error instanceof Error ? error.message : String(error) });
  }
  return undefined;
}

/** A batch's runs waited for: 504 (the edits applied, the runs going on) when the wait ran out. */
export async function respondRuns<T extends { cells?: readonly CellView[] }>(
  applied: T,
  handles: readonly RunHandle[],
  options: RunOptions,
): Promise<unknown> {
  const { body, timedOut } = await waitRuns(applied, handles, options);
  return timedOut ? new Reply(504, body) : body;
}

/** `:output/:item` segments of an output URL. */
export function outputIndex(value: string | undefined, name: string): number {
  if (value === undefined || !/^\d+$/.test(value))
    throw new BridgeError(404, `No output ${name} '${value}': it must be a whole number`);
  return Number(value);
}

/** Content-Type for a raw output item: streams as text, errors as JSON, others as their mime. */
export function rawContentType(mime: string): string {
  if (mime === STDOUT_MIME || mime === STDERR_MIME) return 'text/plain; charset=utf-8';
  if (mime === ERROR_MIME) return 'application/json; charset=utf-8';
  if (mime.startsWith('text/') && !mime.includes('charset')) return `${mime}; charset=utf-8`;
  return mime;
}

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RunHandle } from '../core/cells';
import { timeoutDetail, waitRuns, type RunOptions } from '../core/cellRuns';
import { BridgeError } from '../core/errors';
import { ERROR_MIME, STDERR_MIME, STDOUT_MIME } from '../core/outputs';
import { Reply } from './route';
import { DEFAULT_LIMITS, openEventStream } from './sse';

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
    const gone = new AbortController();
    // A stalled reader stops its wait, as a gone one does; the cell's run goes on in the notebook.
    const stream = openEventStream(res, { ...DEFAULT_LIMITS, onStall: () => gone.abort() });
    res.on('close', () => gone.abort());
    try {
      const result = await handle.wait({
        timeoutMs: options.timeoutMs,
        signal: gone.signal,
        onEvent: (e) => (e.kind === 'output' ? stream.send('output', e.item) : stream.send(e.kind, { data: e.text })),
      });
      if (result.done) stream.end('done', { success: result.success, cell: result.cell });
      else stream.end('timeout', { detail: timeoutDetail(options.timeoutMs, [handle.cellId]), cell: result.cell });
    } catch (error) {
      stream.end('error', { detail: error instanceof Error ? error.message : String(error) });
    }
    return undefined;
  }
  if (!options.wait) return new Reply(202, { queued: [handle.cellId] });
  const result = await handle.wait({ timeoutMs: options.timeoutMs });
  if (!result.done) return new Reply(504, { detail: timeoutDetail(options.timeoutMs, [handle.cellId]), cell: result.cell });
  return { success: result.success, cell: result.cell };
}

/** A batch's runs waited for: 504 (the edits applied, the runs going on) when the wait ran out. */
export async function respondRuns<T extends object>(
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

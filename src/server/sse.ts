import type { ServerResponse } from 'node:http';

/**
 * marimo's event-stream framing, which execute-code.sh parses line by line: exactly
 * `event: <name>\ndata: <one-line JSON>\n\n`, no comments, ids or retries.
 * JSON.stringify escapes every line break inside strings, so data is always one line.
 */
export function frameEvent(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

export interface EventStream {
  send(name: string, data: unknown): void;
  /** Ends the stream, with its last event written in the same packet when there is one. */
  end(name?: string, data?: unknown): void;
  /** True once the client went away (or the stream was ended). */
  readonly closed: boolean;
}

/** How long a run may stay silent before its 200 goes out on its own. */
export const HEADERS_ALONE_AFTER_MS = 10;
/** Past this many characters gathered, they go out at once: a big print is not held in memory twice. */
export const SEND_AT_CHARS = 64 * 1024;

/**
 * Starts a 200 event stream on `res`. Writes are gathered per event-loop turn: the events one
 * turn produces leave in one write when the turn ends (or once they pass SEND_AT_CHARS), and
 * the headers leave with the first of them, so a quick run's 200, print and `done` reach the
 * client as one packet. On a small VM every write that wakes another process costs tens of
 * microseconds (npm run bench, section 1). A turn lasts microseconds, so events still go out as
 * soon as they exist; a silent run (or one waiting its turn) gets its 200 after
 * HEADERS_ALONE_AFTER_MS.
 */
export function openEventStream(res: ServerResponse): EventStream {
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache',
    'X-Accel-Buffering': 'no',
  });
  const open = () => !res.writableEnded && !res.destroyed;
  let pending = '';
  let flushing: NodeJS.Immediate | undefined;
  let headersAlone: NodeJS.Timeout | undefined = setTimeout(() => {
    // Cleared by the first write, so nothing has gone out yet.
    headersAlone = undefined;
    if (open()) res.flushHeaders();
  }, HEADERS_ALONE_AFTER_MS);
  const stopTimers = () => {
    clearImmediate(flushing);
    clearTimeout(headersAlone);
    flushing = headersAlone = undefined;
  };
  const flush = () => {
    stopTimers();
    if (open()) res.write(pending);
    pending = '';
  };
  return {
    send(name, data) {
      if (!open()) return;
      pending += frameEvent(name, data);
      if (pending.length >= SEND_AT_CHARS) flush();
      else flushing ??= setImmediate(flush);
    },
    end(name, data) {
      stopTimers();
      if (open()) res.end(name === undefined ? pending : pending + frameEvent(name, data));
      pending = '';
    },
    get closed() {
      return !open();
    },
  };
}

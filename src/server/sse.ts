import type { Response } from 'express';

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
  end(): void;
  /** True once the client went away (or the stream was ended). */
  readonly closed: boolean;
}

/** Starts a 200 event stream on `res`; each event is written (and so flushed) at once. */
export function openEventStream(res: Response): EventStream {
  res.status(200).set({
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  res.socket?.setNoDelay(true);
  return {
    send(name, data) {
      if (!res.writableEnded && !res.destroyed) res.write(frameEvent(name, data));
    },
    end() {
      if (!res.writableEnded) res.end();
    },
    get closed() {
      return res.writableEnded || res.destroyed;
    },
  };
}

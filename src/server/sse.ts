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

/**
 * Starts a 200 event stream on `res`. The headers go out at once, so a client sees the run was
 * accepted before it produces anything; each event is written (and so sent) as it comes.
 */
export function openEventStream(res: ServerResponse): EventStream {
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  const open = () => !res.writableEnded && !res.destroyed;
  return {
    send(name, data) {
      if (open()) res.write(frameEvent(name, data));
    },
    end(name, data) {
      if (open()) res.end(name === undefined ? undefined : frameEvent(name, data));
    },
    get closed() {
      return !open();
    },
  };
}

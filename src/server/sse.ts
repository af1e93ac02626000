import type { ServerResponse } from 'node:http';

/**
 * marimo's event-stream framing, which execute-code.sh parses line by line: exactly
 * `event: <name>\ndata: <one-line JSON>\n\n`, no ids or retries.
 * JSON.stringify escapes every line break inside strings, so data is always one line.
 */
export function frameEvent(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * How long a stream may stay silent before it says the run is alive: an SSE comment,
 * `: running 5 s` (the seconds since the stream opened). Clients skip comments (the SSE spec;
 * execute-code.sh keeps lines it does not know aside and shows them only when no `done` came).
 */
export const HEARTBEAT_MS = 5000;
export const heartbeat = (seconds: number) => `: running ${seconds} s\n\n`;

/**
 * The most characters of printed text one event carries. marimo-pair's execute-code.sh reads the
 * stream a line at a time in bash, whose cost grows much faster than a line's length (SETUP.md,
 * measured figures): many short events read far faster than one long line.
 */
export const MAX_EVENT_CHARS = 16 * 1024;

/** `text` in pieces of at most `max` characters, each ending at a line end where the text has one. */
export function splitAtLines(text: string, max = MAX_EVENT_CHARS): string[] {
  const pieces: string[] = [];
  let start = 0;
  while (text.length - start > max) {
    const lineEnd = text.lastIndexOf('\n', start + max - 1);
    let end = lineEnd >= start ? lineEnd + 1 : start + max;
    // Never split a surrogate pair (an emoji) across two events.
    if (end === start + max && /[\ud800-\udbff]/.test(text[end - 1]!)) end--;
    pieces.push(text.slice(start, end));
    start = end;
  }
  pieces.push(text.slice(start));
  return pieces;
}

export interface EventStream {
  send(name: string, data: unknown): void;
  /** Sends printed text as `{data}` events of at most MAX_EVENT_CHARS characters each. */
  sendText(name: string, text: string): void;
  /** Ends the stream, with its last event written in the same packet when there is one. */
  end(name?: string, data?: unknown): void;
  /** True once the client went away (or the stream was ended). */
  readonly closed: boolean;
}

export interface StreamLimits {
  /** Most characters held for a client that reads slower than the run writes; past it, events are dropped. */
  holdChars: number;
  /** How long the client may read nothing at all while events wait, before `onStall`. */
  stallMs: number;
  /** Called once when the client stalled past `stallMs`: the caller interrupts the run. */
  onStall?: () => void;
  /** Silence after which a heartbeat comment goes out (default HEARTBEAT_MS). */
  heartbeatMs?: number;
}

/** How long a run may stay silent before its 200 goes out on its own. */
export const HEADERS_ALONE_AFTER_MS = 10;
/** Past this many characters gathered, they go out at once: a big print is not held in memory twice. */
export const SEND_AT_CHARS = 64 * 1024;
export const DEFAULT_LIMITS: StreamLimits = { holdChars: 4 * 1024 * 1024, stallMs: 30_000 };

/** The stderr line that stands where output was dropped for a slow client. */
export const droppedNote = (events: number, chars: number) =>
  `\n[agent-bridge: ${events} output events (${chars} characters) dropped here: the client read slower than the run wrote]\n`;

export const stalledNote = (ms: number) =>
  `\n[agent-bridge: the client read nothing for ${ms / 1000} s while output waited: the run was interrupted]\n`;

/**
 * Starts a 200 event stream on `res`. Writes are gathered per event-loop turn: the events one
 * turn produces leave in one write when the turn ends (or once they pass SEND_AT_CHARS), and
 * the headers leave with the first of them, so a quick run's 200, print and `done` reach the
 * client as one packet. On a small VM every write that wakes another process costs tens of
 * microseconds (npm run bench, section 1). A turn lasts microseconds, so events still go out as
 * soon as they exist; a silent run (or one waiting its turn) gets its 200 after
 * HEADERS_ALONE_AFTER_MS.
 *
 * Backpressure: once the socket refuses more (`write()` returned false), events wait for its
 * `drain`, up to `holdChars`; past that they are dropped and counted, and a stderr note says
 * where and how much. Memory stays bounded whatever the run prints. A client that reads nothing
 * for `stallMs` while events wait gets `onStall` (its run interrupted). The final event is
 * never dropped.
 */
export function openEventStream(res: ServerResponse, limits: StreamLimits = DEFAULT_LIMITS): EventStream {
  res.writeHead(200, {
    'Content-Type': 'text/event-stream; charset=utf-8',
    'Cache-Control': 'no-cache',
    'X-Accel-Buffering': 'no',
  });
  const open = () => !res.writableEnded && !res.destroyed;
  let pending = '';
  let blocked = false;
  let dropped = { events: 0, chars: 0 };
  let flushing: NodeJS.Immediate | undefined;
  let stalled: NodeJS.Timeout | undefined;
  let headersAlone: NodeJS.Timeout | undefined = setTimeout(() => {
    // Cleared by the first write, so nothing has gone out yet.
    headersAlone = undefined;
    if (open()) res.flushHeaders();
  }, HEADERS_ALONE_AFTER_MS);
  const opened = Date.now();
  // Re-armed by every write: it fires only after a silence. A client that reads nothing gets none.
  const alive: NodeJS.Timeout = setTimeout(() => {
    if (open() && !blocked && !pending) res.write(heartbeat(Math.round((Date.now() - opened) / 1000)));
    alive.refresh();
  }, limits.heartbeatMs ?? HEARTBEAT_MS);
  alive.unref();
  const stopTimers = () => {
    clearImmediate(flushing);
    clearTimeout(headersAlone);
    clearTimeout(stalled);
    clearTimeout(alive);
    flushing = headersAlone = stalled = undefined;
  };
  res.once('close', stopTimers);
  /** What waits, with the note for anything dropped since the last write at its place. */
  const take = () => {
    const text = dropped.events ? pending + frameEvent('stderr', { data: droppedNote(dropped.events, dropped.chars) }) : pending;
    pending = '';
    dropped = { events: 0, chars: 0 };
    return text;
  };
  const flush = () => {
    clearImmediate(flushing);
    clearTimeout(headersAlone);
    flushing = headersAlone = undefined;
    if (blocked || !open()) return;
    alive.refresh();
    if (res.write(take())) return;
    blocked = true;
    stalled = setTimeout(() => {
      // One short line past the hold limit, so the client learns why when it reads again.
      pending += frameEvent('stderr', { data: stalledNote(limits.stallMs) });
      limits.onStall?.();
    }, limits.stallMs);
    res.once('drain', () => {
      clearTimeout(stalled);
      blocked = false;
      if (pending || dropped.events) flush();
    });
  };
  const send = (name: string, data: unknown) => {
    if (!open()) return;
    const event = frameEvent(name, data);
    if (blocked && pending.length + event.length > limits.holdChars) {
      dropped.events++;
      dropped.chars += event.length;
      return;
    }
    pending += event;
    if (pending.length >= SEND_AT_CHARS) flush();
    else flushing ??= setImmediate(flush);
  };
  return {
    send,
    sendText(name, text) {
      for (const piece of splitAtLines(text)) send(name, { data: piece });
    },
    end(name, data) {
      stopTimers();
      if (!open()) return;
      const rest = take();
      res.end(name === undefined ? rest : rest + frameEvent(name, data));
    },
    get closed() {
      return !open();
    },
  };
}

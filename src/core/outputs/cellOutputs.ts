import type { OutputItemView, OutputView, RawOutput, RawOutputItem } from '../model/cellService';

/** VS Code's mime types for console streams and errors (also what .ipynb outputs load as). */
export const STDOUT_MIME = 'application/vnd.code.notebook.stdout';
export const STDERR_MIME = 'application/vnd.code.notebook.stderr';
export const ERROR_MIME = 'application/vnd.code.notebook.error';

const STREAM_TYPES: Record<string, 'stdout' | 'stderr'> = { [STDOUT_MIME]: 'stdout', [STDERR_MIME]: 'stderr' };

const decoder = new TextDecoder('utf-8');
// eslint-disable-next-line no-control-regex -- ESC is exactly what this matches
const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;

/** Terminal colour codes (Jupyter tracebacks are full of them) mean nothing to an agent. */
export const stripAnsi = (text: string) => text.replace(ANSI, '');

export function isTextMime(mime: string): boolean {
  return (
    mime.startsWith('text/') ||
    mime in STREAM_TYPES ||
    mime === ERROR_MIME ||
    mime === 'application/json' ||
    mime === 'application/javascript' ||
    mime === 'application/xml' ||
    /\+(json|xml)$/.test(mime)
  );
}

/**
 * The items of an output as agents address them: kernels append a stream chunk by chunk, each
 * chunk an item, so consecutive items of the same stream are joined into one.
 */
export function logicalItems(output: RawOutput): RawOutputItem[] {
  const items: RawOutputItem[] = [];
  for (const item of output.items) {
    const last = items[items.length - 1];
    if (last && item.mime in STREAM_TYPES && last.mime === item.mime) {
      const joined = new Uint8Array(last.data.length + item.data.length);
      joined.set(last.data);
      joined.set(item.data, last.data.length);
      items[items.length - 1] = { mime: item.mime, data: joined };
    } else items.push(item);
  }
  return items;
}

/** The `name` of every error item of these outputs (e.g. "KeyboardInterrupt"). */
export function errorNames(outputs: readonly RawOutput[]): string[] {
  const names: string[] = [];
  for (const output of outputs)
    for (const item of output.items) {
      if (item.mime !== ERROR_MIME) continue;
      try {
        const parsed = JSON.parse(decoder.decode(item.data)) as { name?: unknown };
        if (typeof parsed.name === 'string') names.push(parsed.name);
      } catch {
        // Not JSON: an error item without a name.
      }
    }
  return names;
}

export interface ShapeOptions {
  /** Characters of text kept per item. */
  limit: number;
  /** URL that serves item `item` of output `output` raw. */
  url: (output: number, item: number) => string;
}

/** Typed, capped views of a cell's outputs; binary and cut items point at their raw URL. */
export function shapeOutputs(outputs: readonly RawOutput[], options: ShapeOptions): OutputView[] {
  return outputs.map((output, o) => ({
    items: logicalItems(output).map((item, i) => shapeItem(item, options.limit, () => options.url(o, i))),
  }));
}

export function shapeItem(item: RawOutputItem, limit: number, url: () => string): OutputItemView {
  const bytes = item.data.length;
  if (!isTextMime(item.mime)) return { type: item.mime, bytes, url: url() };
  const text = decoder.decode(item.data);
  if (item.mime === ERROR_MIME) return shapeError(text, bytes, limit, url);
  const type = STREAM_TYPES[item.mime] ?? item.mime;
  const clean = type === item.mime ? text : stripAnsi(text);
  if (clean.length <= limit) return { type, text: clean, bytes };
  const where = url();
  return { type, ...headAndTail(clean, limit, where), bytes, truncated: true, url: where };
}

/**
 * `text` cut to `limit` characters, keeping its head and its tail (where errors and final
 * results are), with a line in the middle that says how much was cut and where the whole is.
 */
export function headAndTail(text: string, limit: number, url: string): { text: string; omitted: number } {
  const head = Math.floor(limit / 2);
  const tail = limit - head;
  const omitted = text.length - limit;
  return {
    text: `${text.slice(0, head)}\n[... ${omitted} characters cut here; the whole item: GET ${url} ...]\n${text.slice(text.length - tail)}`,
    omitted,
  };
}

function shapeError(json: string, bytes: number, limit: number, url: () => string): OutputItemView {
  let error: { name?: unknown; message?: unknown; stack?: unknown } = {};
  try {
    error = JSON.parse(json) as typeof error;
  } catch {
    error = { message: json };
  }
  const str = (v: unknown) => (typeof v === 'string' ? stripAnsi(v) : '');
  const name = str(error.name);
  const message = str(error.message);
  const traceback = str(error.stack);
  const base = { type: 'error', name, bytes };
  if (message.length + traceback.length <= limit) return { ...base, message, traceback };
  const where = url();
  const shortMessage = message.length > limit / 2 ? headAndTail(message, Math.floor(limit / 2), where) : undefined;
  const rest = limit - (shortMessage ? Math.floor(limit / 2) : message.length);
  const shortTrace = traceback.length > rest ? headAndTail(traceback, rest, where) : undefined;
  return {
    ...base,
    message: shortMessage?.text ?? message,
    traceback: shortTrace?.text ?? traceback,
    truncated: true,
    omitted: (shortMessage?.omitted ?? 0) + (shortTrace?.omitted ?? 0),
    url: where,
  };
}

/**
 * Turns successive snapshots of a running cell's outputs into events: stream text as it grows,
 * other items once each. Items already present when the run was queued are not reported again.
 */
export class OutputFollower {
  private sent = new Map<string, { mime: string; text: string }>();

  constructor(baseline: readonly RawOutput[]) {
    this.sent = this.index(baseline);
  }

  /** Forget the baseline: the run has started and replaced the outputs. */
  reset(): void {
    this.sent.clear();
  }

  next(
    outputs: readonly RawOutput[],
    limit: number,
    url: (output: number, item: number) => string,
  ): ({ kind: 'stdout' | 'stderr'; text: string } | { kind: 'output'; item: OutputItemView })[] {
    const events: ({ kind: 'stdout' | 'stderr'; text: string } | { kind: 'output'; item: OutputItemView })[] = [];
    const now = this.index(outputs);
    for (const key of this.sent.keys()) if (!now.has(key)) this.sent.delete(key);
    for (const [key, item] of now) {
      const before = this.sent.get(key);
      const fresh = !before || before.mime !== item.mime || !item.text.startsWith(before.text);
      const stream = STREAM_TYPES[item.mime];
      if (stream) {
        const delta = fresh ? item.text : item.text.slice(before!.text.length);
        if (delta) events.push({ kind: stream, text: delta });
      } else if (fresh || item.text !== before!.text) {
        const [o, i] = key.split(':').map(Number) as [number, number];
        events.push({ kind: 'output', item: shapeItem(item.raw, limit, () => url(o, i)) });
      }
      this.sent.set(key, { mime: item.mime, text: item.text });
    }
    return events;
  }

  private index(outputs: readonly RawOutput[]): Map<string, { mime: string; text: string; raw: RawOutputItem }> {
    const map = new Map<string, { mime: string; text: string; raw: RawOutputItem }>();
    outputs.forEach((output, o) =>
      logicalItems(output).forEach((raw, i) => {
        // Binary items are compared by size and a sample; text by content.
        const text = isTextMime(raw.mime)
          ? stripAnsi(decoder.decode(raw.data))
          : `${raw.data.length}:${raw.data.slice(0, 64).join(',')}`;
        map.set(`${o}:${i}`, { mime: raw.mime, text, raw });
      }),
    );
    return map;
  }
}

import type { MimeBundle, StreamEvent } from '../model/kernelPort';
import { isTextMime, stripAnsi } from './cellOutputs';

/** One output as the marimo and Jupyter extensions' `executeCode` yield it. */
export interface ApiOutput {
  items: readonly { mime: string; data: Uint8Array }[];
  metadata?: Record<string, unknown> | undefined;
}

/** VS Code's stream and error mimes, read at run time from the API rather than hard-coded. */
export interface StreamMimes {
  stdout: string;
  stderr: string;
  error: string;
}

export interface InterpretedOutput {
  /** Console text; `block`: an error's, which stands on lines of its own (ConsoleLines). */
  streams: (StreamEvent & { block?: true })[];
  failed: boolean;
  /** A rich value (the last one of a run becomes `done.output`). */
  value?: MimeBundle;
  /** Display data that is not the run's value (`display(HTML(...))`, a figure). */
  display?: MimeBundle;
}

const MARIMO_UI_MIME = 'application/vnd.marimo.ui+json';
const decoder = new TextDecoder();

/** Tags of HTML markup only: Python's own `<module>` or `<cell 3>` in a traceback must survive. */
const HTML_TAG =
  /<\/?(a|abbr|b|br|code|div|em|h[1-6]|i|li|ol|p|pre|small|span|strong|table|tbody|td|th|thead|tr|u|ul)(\s[^>]*)?\/?>/gi;

/** Plain text for a terminal: no ANSI colour codes, no HTML markup. */
export function plainText(text: string): string {
  return stripAnsi(text)
    .replace(HTML_TAG, '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&');
}

/**
 * A marimo traceback as marimo's extension hands it over: its HTML already made text, but each
 * file frame a link (`File <a href="path:3">path:3</a>`, the text escaped), given back Python's
 * form (`File "path", line 3`); the rest is the kernel's own text (a message may hold `<b>`).
 */
export function unlinked(text: string): string {
  return stripAnsi(text)
    .replace(
      /File <a\s[^>]*>([^<]*):(\d+)<\/a>/g,
      (_all, file: string, line: string) => `File "${plainText(file)}", line ${line}`,
    )
    .replace(/<a\s[^>]*>([^<]*)<\/a>/gi, (_all, inner: string) => plainText(inner));
}

/**
 * Maps one API output onto the scratchpad stream: console items become stdout/stderr events,
 * error items their traceback on stderr (colour codes removed, nothing else: a source line may
 * hold tag-like text) and failure, marimo's `marimo-error` channel failure; anything else is a
 * rich value. With `valueMime`, only a bundle carrying that marker is the value (the marker is
 * dropped) and other bundles are displays. `linksInErrors`: the kernel's tracebacks link their
 * frames with HTML anchors (marimo's extension), unwrapped to their text.
 */
export function interpretOutput(
  output: ApiOutput,
  mimes: StreamMimes,
  { valueMime, linksInErrors = false }: { valueMime?: string | undefined; linksInErrors?: boolean } = {},
): InterpretedOutput {
  const result: InterpretedOutput = { streams: [], failed: output.metadata?.['channel'] === 'marimo-error' };
  const value: MimeBundle = {};
  for (const item of output.items) {
    if (item.mime === mimes.stdout || item.mime === mimes.stderr) {
      const name = item.mime === mimes.stdout && !result.failed ? 'stdout' : 'stderr';
      result.streams.push({ name, text: decoder.decode(item.data) });
    } else if (item.mime === mimes.error) {
      result.failed = true;
      const text = errorText(decoder.decode(item.data));
      result.streams.push({ name: 'stderr', text: linksInErrors ? unlinked(text) : stripAnsi(text), block: true });
    } else if (result.failed) {
      result.streams.push({ name: 'stderr', text: plainText(decoder.decode(item.data)), block: true });
    } else if (item.mime === MARIMO_UI_MIME) {
      Object.assign(value, marimoValue(decoder.decode(item.data)));
    } else if (!isTextMime(item.mime)) {
      value[item.mime] = Buffer.from(item.data).toString('base64');
    } else {
      value[item.mime] = decoder.decode(item.data);
    }
  }
  if (valueMime !== undefined && Object.keys(value).length) {
    if (valueMime in value) {
      delete value[valueMime];
      result.value = value;
    } else result.display = value;
  } else if (Object.keys(value).length) result.value = value;
  return result;
}

/** Rich first: a display's image or markup is what it shows; text/plain is only its fallback repr. */
const DISPLAY_PREFERENCE = [
  'image/png',
  'image/jpeg',
  'image/svg+xml',
  'text/html',
  'text/markdown',
  'application/json',
  'text/plain',
];

/** The mime a display is reduced to for `done.output`. */
export function reduceDisplay(bundle: MimeBundle): { mimetype: string; data: string } | undefined {
  const mimetype = DISPLAY_PREFERENCE.find((m) => typeof bundle[m] === 'string') ?? Object.keys(bundle)[0];
  return mimetype === undefined ? undefined : { mimetype, data: bundle[mimetype]! };
}

function errorText(json: string): string {
  try {
    const e = JSON.parse(json) as { name?: unknown; message?: unknown; stack?: unknown };
    if (typeof e.stack === 'string' && e.stack.trim()) return e.stack;
    return `${String(e.name ?? 'Error')}: ${String(e.message ?? '')}`;
  } catch {
    return json;
  }
}

/** marimo wraps a cell's value for its own renderer: `{cellId, state: {output: {mimetype, data}}}`. */
function marimoValue(json: string): MimeBundle {
  try {
    const output = (JSON.parse(json) as { state?: { output?: { mimetype?: unknown; data?: unknown } } }).state?.output;
    if (output && typeof output.mimetype === 'string' && typeof output.data === 'string' && output.data) {
      return { [output.mimetype]: output.data };
    }
  } catch {
    // not marimo's shape after all: no value
  }
  return {};
}

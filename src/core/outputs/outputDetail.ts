import type { CellRunResult, CellView, OutputItemView } from '../model/cellService';

/**
 * How much of each output an answer carries: `none`, `summary` (each item's type and size, the
 * first lines of text, an error's name, message and last frame) or `full` (the capped text).
 * An agent's context is its scarcest resource: lists and runs answer with summaries by default,
 * and the whole of an item stays one request away (the cell with `outputs: "full"`, or its url).
 */
export type OutputDetail = 'none' | 'summary' | 'full';

/** Lines, and characters, of an item's text a summary keeps: its head and its tail, half each. */
export const SUMMARY_LINES = 15;
export const SUMMARY_CHARS = 2000;

/**
 * One output item in a summary: no mime when the type says it, text cut at the middle. Where an
 * output has text/plain beside text/html (a DataFrame), the plain text carries the summary and
 * the HTML only its size; an HTML-only item is summarized as its text, markup, styles and scripts
 * left out.
 */
export interface OutputItemSummary {
  readonly type: string;
  readonly bytes: number;
  readonly text?: string;
  /** Lines of the whole text, when the summary cut some. */
  readonly lines?: number;
  /** Rows and columns of the table an output shows (a pandas or polars DataFrame). */
  readonly shape?: readonly [number, number];
  readonly name?: string;
  readonly message?: string;
  /** The traceback's last frame: where the error was raised. */
  readonly lastFrame?: string;
  readonly url?: string;
}

export type CellAnswer = Omit<CellView, 'outputs'> & {
  readonly outputs?: readonly { readonly items: readonly (OutputItemView | OutputItemSummary)[] }[];
};

export function cellAt(view: CellView, detail: OutputDetail): CellAnswer {
  if (detail === 'full') return view;
  const { outputs, ...rest } = view;
  if (detail === 'none') return rest;
  return { ...rest, outputs: outputs.map((o) => ({ items: summarizeOutput(o.items) })) };
}

/** An answer's cells (`cell`, `cells`, each run's `cell`, and the runs in `alsoRan`) at the asked detail. */
export function answerAt<T extends object>(body: T, detail: OutputDetail): T {
  if (detail === 'full') return body;
  const fields = body as {
    cell?: CellView;
    cells?: readonly CellView[];
    runs?: readonly CellRunResult[];
    alsoRan?: readonly CellRunResult[];
  };
  return {
    ...body,
    ...(fields.cell ? { cell: cellAt(fields.cell, detail) } : {}),
    ...(fields.cells ? { cells: fields.cells.map((c) => cellAt(c, detail)) } : {}),
    ...(fields.runs ? { runs: fields.runs.map((r) => answerAt(r, detail)) } : {}),
    ...(fields.alsoRan ? { alsoRan: fields.alsoRan.map((r) => answerAt(r, detail)) } : {}),
  };
}

/** An output's items summarized: the plain text speaks for its HTML sibling (and says the table's shape). */
function summarizeOutput(items: readonly OutputItemView[]): OutputItemSummary[] {
  const html = items.find((i) => i.type === 'text/html' && i.text !== undefined);
  const plain = items.find((i) => i.type === 'text/plain' && i.text !== undefined);
  const shape = tableShape(html) ?? tableShape(plain);
  const speaks = plain ?? html;
  return items.map((item) => {
    if (item === html && plain) return { type: item.type, bytes: item.bytes, ...(item.url ? { url: item.url } : {}) };
    const summary = summarize(item);
    return item === speaks && shape ? { ...summary, shape } : summary;
  });
}

function summarize(item: OutputItemView): OutputItemSummary {
  const url = item.url ? { url: item.url } : {};
  if (item.type === 'error') {
    const frame = lastFrame(item.traceback ?? '');
    return {
      type: 'error',
      bytes: item.bytes,
      name: item.name ?? '',
      message: cutMiddle(item.message ?? '').text,
      ...(frame ? { lastFrame: frame } : {}),
      ...url,
    };
  }
  if (item.text === undefined) return { type: item.type, bytes: item.bytes, ...url };
  const { text, lines } = cutMiddle(item.type === 'text/html' ? htmlText(item.text) : item.text);
  return { type: item.type, bytes: item.bytes, text, ...(lines ? { lines } : {}), ...url };
}

/**
 * `text` kept to SUMMARY_LINES lines and SUMMARY_CHARS characters: its head and its tail (where a
 * DataFrame says its size and a log how it ended), with a line in the middle saying what was cut;
 * `lines` counts the whole when some were cut.
 */
export function cutMiddle(text: string): { text: string; lines?: number } {
  const all = text.split('\n');
  if (text.endsWith('\n')) all.pop();
  const half = SUMMARY_CHARS / 2;
  if (all.length <= SUMMARY_LINES) {
    if (text.length <= SUMMARY_CHARS) return { text };
    const cut = text.length - SUMMARY_CHARS;
    return { text: `${text.slice(0, half)}\n[... ${cut} characters cut ...]\n${text.slice(-half)}`, lines: all.length };
  }
  const side = Math.floor((SUMMARY_LINES - 1) / 2);
  const head = all.slice(0, side).join('\n');
  const tail = all.slice(-side).join('\n');
  return {
    text: [
      head.length > half ? `${head.slice(0, half)}…` : head,
      `[... ${all.length - 2 * side} lines cut ...]`,
      tail.length > half ? `…${tail.slice(-half)}` : tail,
    ].join('\n'),
    lines: all.length,
  };
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', times: '×' };

/** The text an HTML output shows: no styles, scripts or comments; a line per row or block, cells apart. */
export function htmlText(html: string): string {
  return (
    html
      .replace(/<(style|script)\b[\s\S]*?<\/\1\s*>/gi, '')
      .replace(/<!--[\s\S]*?-->/g, '')
      // Line breaks in the source are spaces, but in a <pre>.
      .replace(/(<pre\b[^>]*>[\s\S]*?<\/pre\s*>)|\s+/gi, (_space, pre?: string) => pre ?? ' ')
      .replace(/<\/(td|th)\s*>/gi, ' ')
      .replace(/<(br|\/tr|\/p|\/pre|\/div|\/li|\/h[1-6]|\/caption)\b[^>]*>/gi, '\n')
      .replace(/<[^>]*>/g, '')
      .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (all, name: string) => {
        if (name[0] !== '#') return ENTITIES[name.toLowerCase()] ?? all;
        const code = name[1] === 'x' || name[1] === 'X' ? parseInt(name.slice(2), 16) : Number(name.slice(1));
        return Number.isSafeInteger(code) && code <= 0x10ffff ? String.fromCodePoint(code) : all;
      })
      .split('\n')
      .map((line) => line.replace(/[ \t]+/g, ' ').trim())
      .filter(Boolean)
      .join('\n')
  );
}

/**
 * Rows and columns of the DataFrame an output shows: pandas says them under a cut table
 * (`5000 rows × 3 columns`; `[5000 rows x 3 columns]` in its text), polars above its own
 * (`shape: (5, 3)`); a whole pandas table is counted (its body's rows, the first row's cells).
 */
export function tableShape(item: OutputItemView | undefined): [number, number] | undefined {
  const text = item?.text;
  if (!text) return undefined;
  const said = /\[?(\d+) rows [×x] (\d+) columns\]?|shape: \((\d+), (\d+)\)/.exec(text);
  if (said) return [Number(said[1] ?? said[3]), Number(said[2] ?? said[4])];
  if (item.type !== 'text/html' || item.truncated || !/class="dataframe/.test(text)) return undefined;
  const body = /<tbody>([\s\S]*?)<\/tbody>/.exec(text)?.[1];
  const rows = body?.split(/<tr\b/).slice(1) ?? [];
  if (!rows.length) return undefined;
  return [rows.length, rows[0]!.split(/<td\b/).length - 1];
}

/**
 * The last frame of a Python traceback (IPython's `Cell In[3], line 2` / `File "x.py", line 9`
 * blocks, or the standard library's `File ...` lines): from its header to the error line.
 */
function lastFrame(traceback: string): string {
  const lines = traceback.split('\n').filter((l) => l.trim() && !/^-{10,}/.test(l.trim()));
  let start = -1;
  for (const [i, line] of lines.entries()) if (/^\s*(File |Cell In\[|Input In \[)/.test(line)) start = i;
  if (start < 0) return '';
  const frame = lines.slice(start);
  // The error line itself ("ValueError: x") is the item's name and message already.
  if (frame.length > 1 && /^[A-Za-z_][\w.]*(: |$)/.test(frame[frame.length - 1]!)) frame.pop();
  return frame.slice(0, 8).join('\n');
}

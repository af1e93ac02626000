import type { CellRunResult, CellView, OutputItemView } from './cellService';

/**
 * How much of each output an answer carries: `none`, `summary` (each item's type and size, the
 * first lines of text, an error's name, message and last frame) or `full` (the capped text).
 * An agent's context is its scarcest resource: lists and runs answer with summaries by default,
 * and the whole of an item stays one request away (the cell with `outputs: "full"`, or its url).
 */
export type OutputDetail = 'none' | 'summary' | 'full';

/** Lines, and characters, of an item's text a summary keeps. */
export const SUMMARY_LINES = 5;
export const SUMMARY_CHARS = 400;

/** One output item in a summary: no mime when the type says it, text cut to its first lines. */
export interface OutputItemSummary {
  readonly type: string;
  readonly bytes: number;
  readonly text?: string;
  /** Lines of the whole text, when the summary kept fewer. */
  readonly lines?: number;
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
  return { ...rest, outputs: outputs.map((o) => ({ items: o.items.map(summarize) })) };
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

function summarize(item: OutputItemView): OutputItemSummary {
  const url = item.url ? { url: item.url } : {};
  if (item.type === 'error') {
    const frame = lastFrame(item.traceback ?? '');
    return {
      type: 'error',
      bytes: item.bytes,
      name: item.name ?? '',
      message: firstLines(item.message ?? '').text,
      ...(frame ? { lastFrame: frame } : {}),
      ...url,
    };
  }
  if (item.text === undefined) return { type: item.type, bytes: item.bytes, ...url };
  const { text, lines } = firstLines(item.text);
  return { type: item.type, bytes: item.bytes, text, ...(lines ? { lines } : {}), ...url };
}

/** The first lines of `text`; `lines` counts the whole when some were left out. */
function firstLines(text: string): { text: string; lines?: number } {
  const all = text.split('\n');
  if (text.endsWith('\n')) all.pop();
  const kept = all.slice(0, SUMMARY_LINES).join('\n');
  if (all.length <= SUMMARY_LINES && kept.length <= SUMMARY_CHARS) return { text };
  return { text: kept.length > SUMMARY_CHARS ? `${kept.slice(0, SUMMARY_CHARS)}…` : kept, lines: all.length };
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

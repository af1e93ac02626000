import { z } from 'zod';

/**
 * Request schemas of the cell routes, shared by every transport (HTTP bodies, MCP tool inputs,
 * code mode): strict, so a misspelt key is a 400, not a silent no-op.
 */

const notebook = z.string().min(1, 'name a notebook by session id, path or uri').optional();
/** A cell: its id, or its index (negative counts from the end). Shared with the MCP tools. */
export const ref = z.union([z.string().min(1), z.number().int()], { error: 'a cell id or index' });
export const kind = z.enum(['code', 'markup']);
const strict = z
  .boolean()
  .optional()
  .describe('true: refuse undefined or twice-defined names; false: allow code too nested to check.');
const language = z.string().min(1);
const code = z.string({ error: '"code" must be the whole new text of the cell ("" empties it)' });
/** nbformat's cell metadata (for .ipynb): replaces the whole of it. */
const metadata = z.record(z.string(), z.unknown());
const tags = z.array(z.string().min(1));
const metadataChange = { metadata: metadata.optional(), tags: tags.optional() };
const guard = {
  version: z.number().int().min(0).optional(),
  force: z.boolean().optional(),
};
const position = {
  index: z.number().int().min(0).optional(),
  before: ref.optional(),
  after: ref.optional(),
};
const moveTarget = { to: z.number().int().min(0).optional(), before: ref.optional(), after: ref.optional() };
/** How much of each output an answer carries (see core/outputs/outputDetail.ts); true and false are full and none. */
export const outputs = z
  .union([z.enum(['none', 'summary', 'full']), z.boolean()])
  .transform((v) => (v === true ? 'full' : v === false ? 'none' : v));
const outputsQuery = z
  .enum(['none', 'summary', 'full', 'true', 'false'], { error: 'outputs is one of none, summary, full' })
  .transform((v) => (v === 'true' ? 'full' : v === 'false' ? 'none' : v));

const wait = {
  wait: z.boolean().optional(),
  timeoutMs: z.number().int().min(0).max(3_600_000).optional(),
  outputs: outputs.optional(),
};

const flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/** On execute and the run routes: answer the risk scan of the code, run nothing. */
export const dryRun = z.boolean().optional();
const count = z
  .string()
  .regex(/^\d+$/, 'must be a whole number')
  .transform((v) => Number(v));

export const notebookQuery = z.strictObject({ notebook });
/** A read of cells: which notebook, and how much of the outputs. */
export const cellsQuery = z.strictObject({ notebook, outputs: outputsQuery.optional() });
/** How a list shows its cells: whole ("cells", the default) or "brief" (id, index, kind, status, stale, first line). */
export const view = z.enum(['cells', 'brief'], { error: 'view is "cells" or "brief"' });
const briefAlone = {
  error: 'view=brief shows no outputs: leave out "outputs"',
} as const;
const noOutputsWhenBrief = (q: { view?: string | undefined; outputs?: unknown }) =>
  !(q.view === 'brief' && q.outputs !== undefined);
/** A list of cells: as cellsQuery, or brief. */
export const listQuery = z
  .strictObject({ notebook, outputs: outputsQuery.optional(), view: view.optional() })
  .refine(noOutputsWhenBrief, briefAlone);
/** The same for MCP list_cells. */
export const listArgs = z
  .strictObject({ notebook, outputs: outputs.optional(), view: view.optional() })
  .refine(noOutputsWhenBrief, briefAlone);
export const deleteQuery = z.strictObject({ notebook, version: count.optional(), force: flag.optional() });
/** For clients that POST without a body (`curl -X POST …/run?wait=true`); the body wins. */
export const runQuery = z.strictObject({
  notebook,
  dryRun: flag.optional(),
  wait: flag.optional(),
  timeoutMs: count.optional(),
  outputs: outputsQuery.optional(),
});
export const notebookBody = z.strictObject({ notebook });
/** An agent's undo: of the change it names (an id from GET /notebooks/changes), else of its newest. */
export const undoBody = z.strictObject({
  notebook,
  checkpoint: z.number().int().min(1).optional().describe('The id of your change to undo (list_changes); omitted: your newest.'),
});

export const createBody = z.strictObject({
  notebook,
  strict,
  code: z.string().optional(),
  kind: kind.optional(),
  language: language.optional(),
  ...position,
  ...metadataChange,
});
export const editBody = z.strictObject({
  notebook,
  strict,
  code: code.optional(),
  kind: kind.optional(),
  language: language.optional(),
  ...metadataChange,
  ...guard,
});
export const moveBody = z.strictObject({ notebook, ...moveTarget });
export const runBody = z.strictObject({ notebook, dryRun, ...wait });
/** Waiting again on a cell's run: how long, and how much of its outputs. */
export const followBody = z.strictObject({ notebook, timeoutMs: wait.timeoutMs, outputs: wait.outputs });

const op = z.discriminatedUnion('op', [
  z.strictObject({
    op: z.literal('create'),
    name: z
      .string()
      .regex(/^[A-Za-z_][\w-]{0,63}$/, 'a name is a letter or _ then letters, digits, _ or - (at most 64)')
      .optional(),
    code: z.string().optional(),
    kind: kind.optional(),
    language: language.optional(),
    ...position,
    ...metadataChange,
  }),
  z.strictObject({
    op: z.literal('edit'),
    ref,
    code: code.optional(),
    kind: kind.optional(),
    language: language.optional(),
    ...metadataChange,
    ...guard,
  }),
  z.strictObject({ op: z.literal('delete'), ref, ...guard }),
  z.strictObject({ op: z.literal('move'), ref, ...moveTarget }),
]);

/**
 * Most cells one selection may name: zod refuses a longer list before reading its items, so a
 * body of hundreds of thousands of refs costs nothing; larger notebooks are run by range or all.
 */
export const MAX_SELECTION = 10_000;
const refList = (more: string) => z.array(ref).max(MAX_SELECTION, `at most ${MAX_SELECTION} cells: ${more}`);

export const editsBody = z.strictObject({
  notebook,
  ops: z.array(op).min(1, 'give at least one operation'),
  /** Cells to run once the edits are applied: ids, or indices in the edited notebook. */
  run: refList('run more with POST /notebooks/run and "range" or "all"').optional(),
  strict,
  ...wait,
});

/** Which cells: a list of refs, a half-open index range, or all; exactly one of them. */
const selection = {
  cells: refList('select more with "range" or "all"').min(1, 'give at least one cell').optional(),
  range: z
    .strictObject({ start: z.number().int().min(0), end: z.number().int().min(0) })
    .describe('Cell indices start (included) to end (excluded).')
    .optional(),
  all: z.literal(true).optional(),
};
const oneSelection = (s: { cells?: unknown; range?: unknown; all?: unknown }) =>
  [s.cells, s.range, s.all].filter((v) => v !== undefined).length === 1;
const SELECTION = { error: 'give exactly one of "cells" (ids or indices), "range" ({start, end}) or "all": true' };

/** A selection as the cell service takes it (the schema made sure exactly one is given). */
export function toSelection(s: {
  cells?: (string | number)[] | undefined;
  range?: { start: number; end: number } | undefined;
}): { cells: (string | number)[] } | { range: { start: number; end: number } } | { all: true } {
  if (s.cells) return { cells: s.cells };
  if (s.range) return { range: s.range };
  return { all: true };
}

export const runManyBody = z
  .strictObject({
    notebook,
    ...selection,
    onError: z.enum(['stop', 'continue']).optional(),
    dryRun,
    ...wait,
  })
  .refine(oneSelection, SELECTION);

export const runStaleBody = z.strictObject({
  notebook,
  cell: ref.optional(),
  dryRun,
  rebuild: z.boolean().optional(),
  ...wait,
});

export const clearBody = z.strictObject({ notebook, ...selection }).refine(oneSelection, SELECTION);

export const saveBody = z
  .strictObject({
    notebook,
    all: z.literal(true).optional(),
  })
  .refine((b) => !(b.all && b.notebook), { error: 'give "notebook" or "all": true, not both' });

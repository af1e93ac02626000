import { z } from 'zod';

/** Request schemas of the cell routes: strict, so a misspelt key is a 400, not a silent no-op. */

const notebook = z.string().min(1, 'name a notebook by session id, path or uri').optional();
/** A cell: its id, or its index (negative counts from the end). Shared with the MCP tools. */
export const ref = z
  .union([z.string().min(1), z.number().int()], { error: 'a cell id or index' })
  .describe('A cell id, or an index (negative counts from the end).');
const kind = z.enum(['code', 'markup']);
const language = z.string().min(1);
const code = z.string({ error: '"code" is required: the whole new text of the cell ("" empties it)' });
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
const wait = {
  wait: z.boolean().optional(),
  timeoutMs: z.number().int().min(0).max(3_600_000).optional(),
};

const flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
const count = z
  .string()
  .regex(/^\d+$/, 'must be a whole number')
  .transform((v) => Number(v));

export const notebookQuery = z.strictObject({ notebook });
export const deleteQuery = z.strictObject({ notebook, version: count.optional(), force: flag.optional() });
/** For clients that POST without a body (`curl -X POST …/run?wait=true`); the body wins. */
export const runQuery = z.strictObject({ notebook, wait: flag.optional(), timeoutMs: count.optional() });
export const notebookBody = z.strictObject({ notebook });

export const createBody = z.strictObject({
  notebook,
  code: z.string().optional(),
  kind: kind.optional(),
  language: language.optional(),
  ...position,
});
export const editBody = z.strictObject({ notebook, code, kind: kind.optional(), language: language.optional(), ...guard });
export const moveBody = z.strictObject({ notebook, ...moveTarget });
export const runBody = z.strictObject({ notebook, ...wait });

const op = z.discriminatedUnion('op', [
  z.strictObject({
    op: z.literal('create'),
    code: z.string().optional(),
    kind: kind.optional(),
    language: language.optional(),
    ...position,
  }),
  z.strictObject({ op: z.literal('edit'), ref, code, kind: kind.optional(), language: language.optional(), ...guard }),
  z.strictObject({ op: z.literal('delete'), ref, ...guard }),
  z.strictObject({ op: z.literal('move'), ref, ...moveTarget }),
]);

export const editsBody = z.strictObject({
  notebook,
  ops: z.array(op).min(1, 'give at least one operation'),
  /** Cells to run once the edits are applied: ids, or indices in the edited notebook. */
  run: z.array(ref).optional(),
  ...wait,
});

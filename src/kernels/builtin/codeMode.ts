/**
 * The host side of code mode (the `agent_bridge` Python module of the builtin kernel): answers
 * the module's `cells.*` host calls for one notebook through the same CellService as the REST
 * routes, so every rule (read-before-write, batch validation, one WorkspaceEdit per batch, run
 * checks) is the routes' own. No `vscode` import: unit tests drive it with the in-memory fake.
 *
 * Calls (params → answer; refused requests answer {ok: false, status, detail, ...extra}, the
 * BridgeError the REST route would have answered):
 *   cells.list   {}                       → {ok, cells: CellView[]}      (counts as read)
 *   cells.get    {ref}                    → {ok, cell: CellView}         (counts as read)
 *   cells.count  {}                       → {ok, count}
 *   cells.layout {}                       → {ok, cells: [{id, kind, language}]}  (not a read)
 *   cells.flush  {ops, run, force}        → {ok, created: {key: id}, ops: [{id}], runs: [...]}
 *
 * `cells.flush` takes the block's operations as the agent queued them: refs are ids, indices
 * (the notebook before the block) or the provisional keys `create` ops carry. It replays them
 * on the notebook's layout and turns the outcome into one batch the planner accepts (refs to
 * existing cells only), applies it, then runs the queued cells in order, streaming their
 * console output into the calling run, and answers once they have all ended.
 */
import { z } from 'zod';
import type {
  BatchOp,
  CellKind,
  CellRef,
  CellRunResult,
  CellService,
  CellStatus,
  OpenNotebooks,
  RunEvent,
  RunHandle,
} from '../../core/cells';
import { OpError } from '../../core/batch';
import { BridgeError } from '../../core/errors';
import { notebookLabel, parseCellRef, resolveCellIndex, resolveNotebook } from '../../core/refs';
import type { CallContext, CallHandler } from './kernelProcess';

export interface CodeModeDeps {
  readonly cells: CellService;
  /** The editor's notebooks, for reading the layout without counting it as a read of the code. */
  readonly docs: Pick<OpenNotebooks, 'list' | 'cells'>;
}

/** Longest wait for a run (setTimeout's limit); runs end, or the calling run is aborted. */
const RUN_WAIT_MS = 2_147_483_647;

const ref = z.union([z.string().min(1), z.number().int()], { error: 'a cell id or index' });
const kind = z.enum(['code', 'markup']);
const blockOp = z.discriminatedUnion('op', [
  z.strictObject({
    op: z.literal('create'),
    key: z.string().min(1),
    code: z.string(),
    kind: kind.optional(),
    language: z.string().min(1).optional(),
    before: ref.optional(),
    after: ref.optional(),
  }),
  z.strictObject({ op: z.literal('edit'), ref, code: z.string() }),
  z.strictObject({ op: z.literal('delete'), ref }),
  z.strictObject({ op: z.literal('move'), ref, before: ref.optional(), after: ref.optional() }),
]);
const flushParams = z.strictObject({
  ops: z.array(blockOp),
  run: z.array(ref).default([]),
  force: z.boolean().default(false),
});
const getParams = z.strictObject({ ref });
const noParams = z.union([z.strictObject({}), z.null(), z.undefined()]);

export type BlockOp = z.infer<typeof blockOp>;

/** A cell as the planner of a block needs it. */
export interface LayoutCell {
  readonly id: string;
  readonly kind: CellKind;
  readonly language: string;
}

export interface BlockPlan {
  /** One batch for CellService.batch, refs to existing cells only. */
  readonly batch: BatchOp[];
  /** For each batch op, the block call it comes from (to name it in messages). */
  readonly origins: string[];
  /** For each block op, the cell it concerns: an existing id, a provisional key, or null. */
  readonly targets: (string | null)[];
  /** Provisional keys of the created cells that survive the block, in notebook order. */
  readonly createdInOrder: string[];
  /** Cells to run after the batch, in order: existing ids or provisional keys. */
  readonly runs: string[];
}

interface Entry {
  readonly id: string;
  readonly provisional: boolean;
  moved: boolean;
}

const bad = (where: string, detail: string) => new BridgeError(400, `${where}: ${detail}`);

function callName(op: BlockOp): string {
  const fn = { create: 'create_cell', edit: 'edit_cell', delete: 'delete_cell', move: 'move_cell' }[op.op];
  return op.op === 'create' ? `ctx.${fn}() (${op.key})` : `ctx.${fn}(${JSON.stringify(op.ref)})`;
}

/**
 * Replays a block on the notebook's layout and expresses the outcome as one batch: deletes and
 * edits by id (the last edit of a cell wins; edits of cells the block creates go into their
 * create), moves of existing cells in final order, each after the existing cell before it, and
 * created cells as runs inserted (in reverse) after the existing cell they follow. Refs name
 * cells as the notebook is now; positions are resolved as the preceding calls left it.
 */
export function planBlock(
  layout: readonly LayoutCell[],
  ops: readonly BlockOp[],
  run: readonly CellRef[],
  options: { force: boolean; notebook: string },
): BlockPlan {
  const layoutIds = layout.map((c) => c.id);
  const byId = new Map(layout.map((c) => [c.id, c]));
  const entries: Entry[] = layout.map((c) => ({ id: c.id, provisional: false, moved: false }));
  const creates = new Map<string, { code: string; kind: CellKind; language: string | undefined; alive: boolean }>();
  const edits = new Map<string, { code: string; origin: string }>();
  const deletes = new Map<string, string>();
  const targets: (string | null)[] = [];

  const resolve = (r: CellRef, where: string, field = ''): string => {
    const at = field ? `${where} ${field}` : where;
    const parsed = parseCellRef(r);
    let id: string;
    if ('index' in parsed || byId.has(parsed.id)) {
      try {
        id = layoutIds[resolveCellIndex(layoutIds, r, options.notebook)]!;
      } catch (error) {
        if (error instanceof BridgeError) throw new BridgeError(error.status, `${at}: ${error.detail}`, error.extra);
        throw error;
      }
    } else if (creates.has(parsed.id)) {
      id = parsed.id;
    } else {
      throw new BridgeError(
        404,
        `${at}: no cell '${parsed.id}' in ${options.notebook}` +
          (parsed.id.startsWith('new-')
            ? ' (ids create_cell returns exist once their block is applied; a block that raised created nothing)'
            : ''),
      );
    }
    if (!entries.some((e) => e.id === id)) throw bad(at, `cell ${id} is deleted earlier in this block`);
    return id;
  };
  const position = (p: { before?: CellRef | undefined; after?: CellRef | undefined }, where: string): number => {
    if (p.before !== undefined && p.after !== undefined) throw bad(where, 'give before= or after=, not both');
    if (p.before !== undefined) {
      const id = resolve(p.before, where, 'before=');
      return entries.findIndex((e) => e.id === id);
    }
    if (p.after !== undefined) {
      const id = resolve(p.after, where, 'after=');
      return entries.findIndex((e) => e.id === id) + 1;
    }
    return entries.length;
  };

  for (const op of ops) {
    const where = callName(op);
    switch (op.op) {
      case 'create': {
        if (creates.has(op.key) || byId.has(op.key)) throw bad(where, `the id ${op.key} is already taken`);
        const at = position(op, where);
        const kind = op.kind ?? 'code';
        creates.set(op.key, { code: op.code, kind, language: op.language, alive: true });
        entries.splice(at, 0, { id: op.key, provisional: true, moved: false });
        targets.push(op.key);
        break;
      }
      case 'edit': {
        const id = resolve(op.ref, where);
        const created = creates.get(id);
        if (created) created.code = op.code;
        else edits.set(id, { code: op.code, origin: where });
        targets.push(id);
        break;
      }
      case 'delete': {
        const id = resolve(op.ref, where);
        entries.splice(
          entries.findIndex((e) => e.id === id),
          1,
        );
        const created = creates.get(id);
        if (created) created.alive = false;
        else {
          deletes.set(id, where);
          edits.delete(id);
        }
        targets.push(id);
        break;
      }
      case 'move': {
        if (op.before === undefined && op.after === undefined) throw bad(where, 'give before= or after=');
        const id = resolve(op.ref, where);
        const anchor = op.before ?? op.after;
        if (anchor !== undefined && resolve(anchor, where, op.before !== undefined ? 'before=' : 'after=') === id)
          throw bad(where, 'a cell cannot move next to itself');
        const [entry] = entries.splice(
          entries.findIndex((e) => e.id === id),
          1,
        );
        entries.splice(position(op, where), 0, entry!);
        if (!entry!.provisional) entry!.moved = true;
        targets.push(id);
        break;
      }
    }
  }

  const runs: string[] = [];
  run.forEach((r) => {
    const where = `ctx.run_cell(${JSON.stringify(r)})`;
    const id = resolve(r, where);
    const kindOf = creates.get(id)?.kind ?? byId.get(id)?.kind;
    if (kindOf !== 'code') throw bad(where, `cell ${id} is a markup cell; only code cells run`);
    if (!runs.includes(id)) runs.push(id);
  });

  const guard = options.force ? { force: true } : {};
  const batch: BatchOp[] = [];
  const origins: string[] = [];
  for (const [id, origin] of deletes) {
    batch.push({ op: 'delete', ref: id, ...guard });
    origins.push(origin);
  }
  for (const [id, edit] of edits) {
    batch.push({ op: 'edit', ref: id, code: edit.code, ...guard });
    origins.push(edit.origin);
  }
  let previous: string | undefined;
  for (const entry of entries) {
    if (entry.provisional) continue;
    if (entry.moved) {
      batch.push({ op: 'move', ref: entry.id, ...(previous === undefined ? { to: 0 } : { after: previous }) });
      origins.push(`ctx.move_cell(${JSON.stringify(entry.id)})`);
    }
    previous = entry.id;
  }
  let anchor: string | undefined;
  let pending: string[] = [];
  const place = () => {
    for (const key of pending.reverse()) {
      const c = creates.get(key)!;
      batch.push({
        op: 'create',
        code: c.code,
        kind: c.kind,
        ...(c.language !== undefined ? { language: c.language } : {}),
        ...(anchor === undefined ? { index: 0 } : { after: anchor }),
      });
      origins.push(`ctx.create_cell() (${key})`);
    }
    pending = [];
  };
  for (const entry of entries) {
    if (entry.provisional) pending.push(entry.id);
    else {
      place();
      anchor = entry.id;
    }
  }
  place();

  return {
    batch,
    origins,
    targets,
    createdInOrder: entries.filter((e) => e.provisional).map((e) => e.id),
    runs,
  };
}

/** Answers the code-mode calls of the kernel of one notebook (`notebook`: its uri or session id). */
export function codeModeHandler(deps: CodeModeDeps, notebook: string): CallHandler {
  return async (method, params, ctx) => {
    try {
      return await dispatch(deps, notebook, method, params, ctx);
    } catch (error) {
      if (error instanceof BridgeError) return { ok: false, status: error.status, detail: error.detail, ...error.extra };
      throw error;
    }
  };
}

async function dispatch(
  deps: CodeModeDeps,
  notebook: string,
  method: string,
  params: unknown,
  ctx: CallContext,
): Promise<unknown> {
  switch (method) {
    case 'cells.list':
      parse(noParams, params, method);
      return { ok: true, cells: (await deps.cells.list(notebook)).cells };
    case 'cells.get':
      return { ok: true, cell: await deps.cells.get(notebook, parse(getParams, params, method).ref) };
    case 'cells.count':
      parse(noParams, params, method);
      return { ok: true, count: layoutOf(deps, notebook).cells.length };
    case 'cells.layout':
      parse(noParams, params, method);
      return { ok: true, cells: layoutOf(deps, notebook).cells };
    case 'cells.flush':
      return flush(deps, notebook, parse(flushParams, params, method), ctx);
    default:
      throw new Error(
        `Unknown host call "${method}" (code mode answers cells.list, cells.get, cells.count, cells.layout, cells.flush)`,
      );
  }
}

function parse<T>(schema: z.ZodType<T>, params: unknown, method: string): T {
  const result = schema.safeParse(params);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const at = issue?.path.length ? `${issue.path.join('.')}: ` : '';
  throw new BridgeError(400, `${method}: ${at}${issue?.message ?? 'invalid parameters'}`);
}

function layoutOf(deps: CodeModeDeps, notebook: string): { label: string; cells: LayoutCell[] } {
  const entry = resolveNotebook(deps.docs.list(), notebook);
  return {
    label: notebookLabel(entry),
    cells: deps.docs.cells(entry.uri).map((c) => ({ id: c.id, kind: c.kind, language: c.language })),
  };
}

interface RunReport {
  id: string;
  done: boolean;
  success: boolean | null;
  status?: CellStatus;
  error?: { name: string; message: string };
  detail?: string;
}

async function flush(
  deps: CodeModeDeps,
  notebook: string,
  params: z.infer<typeof flushParams>,
  ctx: CallContext,
): Promise<unknown> {
  const layout = layoutOf(deps, notebook);
  const plan = planBlock(layout.cells, params.ops, params.run, { force: params.force, notebook: layout.label });

  let result: Awaited<ReturnType<CellService['batch']>> | undefined;
  if (plan.batch.length) {
    try {
      result = await deps.cells.batch(notebook, plan.batch, []);
    } catch (error) {
      // The planner names ops by their place in the batch; name the block call instead.
      const origin = error instanceof OpError ? plan.origins[error.op] : undefined;
      if (error instanceof OpError && origin) throw new BridgeError(error.status, `${origin}: ${error.reason}`, error.extra);
      throw error;
    }
  }

  // Created cells are those the batch touched that were not there before, in notebook order,
  // which is the order the block left its provisional cells in.
  const before = new Set(layout.cells.map((c) => c.id));
  const fresh = (result?.cells ?? []).filter((c) => !before.has(c.id)).map((c) => c.id);
  const created: Record<string, string> = {};
  if (fresh.length === plan.createdInOrder.length) plan.createdInOrder.forEach((key, i) => (created[key] = fresh[i]!));
  const real = (id: string | null) => (id === null ? null : before.has(id) ? id : (created[id] ?? null));

  const runs = await runAll(
    deps,
    notebook,
    plan.runs.map((id) => ({ id: real(id) ?? id })),
    ctx,
  );
  return {
    ok: true,
    created,
    ops: plan.targets.map((t) => ({ id: real(t) })),
    runs,
    cellCount: result?.cellCount ?? layout.cells.length,
  };
}

/** Queues every run at once (an interrupt then cancels the rest, as in Jupyter), then waits for each in order. */
async function runAll(
  deps: CodeModeDeps,
  notebook: string,
  cells: readonly { id: string }[],
  ctx: CallContext,
): Promise<RunReport[]> {
  const started: (RunReport | { id: string; handle: RunHandle })[] = [];
  for (const { id } of cells) {
    try {
      started.push({ id, handle: await deps.cells.run(notebook, id) });
    } catch (error) {
      const detail = error instanceof BridgeError ? error.detail : String(error);
      started.push({ id, done: false, success: false, detail: `not run: ${detail}` });
    }
  }
  const onEvent = (e: RunEvent) => {
    if (e.kind !== 'output') ctx.emit({ kind: 'stream', name: e.kind, text: e.text });
    else if (e.item.type === 'error') {
      const text = e.item.traceback || `${e.item.name ?? 'Error'}: ${e.item.message ?? ''}`;
      ctx.emit({ kind: 'stream', name: 'stderr', text: text.endsWith('\n') ? text : `${text}\n` });
    }
  };
  const reports: RunReport[] = [];
  for (const run of started) {
    if (!('handle' in run)) {
      reports.push(run);
      continue;
    }
    const wait = await run.handle.wait({ timeoutMs: RUN_WAIT_MS, onEvent, signal: ctx.signal });
    reports.push(report(run.id, wait));
  }
  if (ctx.signal.aborted) await deps.cells.interrupt(notebook).catch(() => undefined);
  return reports;
}

function report(id: string, { done, success, status, cell }: CellRunResult): RunReport {
  const error = cell.outputs.flatMap((o) => o.items).find((i) => i.type === 'error');
  return {
    id,
    done,
    success,
    status,
    ...(error ? { error: { name: error.name ?? 'Error', message: error.message ?? '' } } : {}),
    ...(done ? {} : { detail: 'the run was not awaited to its end (interrupted)' }),
  };
}

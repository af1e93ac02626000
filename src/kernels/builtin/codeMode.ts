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
 * (the notebook before the block) or the provisional keys `create` ops carry. core/cells/blockPlan.ts
 * replays them on the notebook's layout and turns the outcome into one batch the planner
 * accepts (refs to existing cells only); this applies it, then runs the queued cells in order,
 * streaming their console output into the calling run, and answers once they have all ended.
 */
import { z } from 'zod';
import type { CellRunResult, CellService, CellStatus, OpenNotebooks, RunEvent, RunHandle } from '../../core/model/cellService';
import { OpError } from '../../core/cells/batch';
import { blockOp, planBlock, type LayoutCell } from '../../core/cells/blockPlan';
import { ref } from '../../core/cells/cellSchemas';
import { FOREVER_MS } from '../../core/cells/series';
import { BridgeError } from '../../core/bridgeError';
import { alsoRuns, type AccessKind } from '../../core/agents/accessPolicy';
import { errorBody } from '../../core/outcome';
import { notebookLabel, resolveNotebook } from '../../core/cells/refs';
import { refuseLoneSurrogates } from '../../core/text/wellFormedText';
import type { CallContext, CallHandler } from './kernelProcess';

export interface CodeModeDeps {
  readonly cells: CellService;
  /** The editor's notebooks, for reading the layout without counting it as a read of the code. */
  readonly docs: Pick<OpenNotebooks, 'list' | 'cells'>;
}

const flushParams = z.strictObject({
  ops: z.array(blockOp),
  run: z.array(ref).default([]),
  force: z.boolean().default(false),
});
const getParams = z.strictObject({ ref });
const noParams = z.union([z.strictObject({}), z.null(), z.undefined()]);

/** What a code-mode call is, as the access policy sees it: a flush edits (and runs, when it runs cells); the rest read. */
export function codeModeKind(method: string, params: unknown): { kind: AccessKind; also: AccessKind[] } {
  if (method !== 'cells.flush') return { kind: 'read', also: [] };
  return { kind: 'edit', also: alsoRuns((params as { run?: unknown } | null)?.run) ? ['run'] : [] };
}

/** Answers the code-mode calls of the kernel of one notebook (`notebook`: its uri or session id). */
export function codeModeHandler(deps: CodeModeDeps, notebook: string): CallHandler {
  return async (method, params, ctx) => {
    try {
      return await dispatch(deps, notebook, method, params, ctx);
    } catch (error) {
      if (error instanceof BridgeError) return { ok: false, ...errorBody(error) };
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
  refuseLoneSurrogates(params, `${method}'s parameters`);
  const result = schema.safeParse(params);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const at = issue?.path.length ? `${issue.path.join('.')}: ` : '';
  throw new BridgeError('bad_input', `${method}: ${at}${issue?.message ?? 'invalid parameters'}`);
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
      if (error instanceof OpError && origin) throw new BridgeError(error.kind, `${origin}: ${error.reason}`, error.extra);
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
    const wait = await run.handle.wait({ timeoutMs: FOREVER_MS, onEvent, signal: ctx.signal });
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

import { z } from 'zod';
import type { CellService, RunHandle, SeriesHandle } from '../core/model/cellService';
import { BridgeError } from '../core/bridgeError';
import { isTextMime, shapeItem } from '../core/outputs/cellOutputs';
import { SCRATCHPAD_OUTPUT_CAP } from '../core/outputs/outputCap';
import { DEFAULT_RUN_TIMEOUT_MS, timeoutDetail, waitedKind, waitRuns } from '../core/runs/cellRuns';
import {
  clearBody,
  createBody,
  editBody,
  editsBody,
  followBody,
  listArgs,
  moveBody,
  notebookBody,
  outputs,
  ref,
  runBody,
  runManyBody,
  runStaleBody,
  saveBody,
  toSelection,
} from '../core/cells/cellSchemas';
import { answerAt, type CellAnswer, type OutputDetail } from '../core/outputs/outputDetail';
import { listAnswer } from '../core/outputs/cellBrief';
import type { BridgeServices } from '../core/services';
import { notebookVariables } from '../core/runs/variables';
import { startKernelBody } from '../core/runs/kernelSchemas';
import type { OutcomeKind } from '../core/outcome';
import { found, Found, tool, type ImageContent, type ToolAnswer, type ToolRow } from './toolRows';

/**
 * The cell routes as MCP tools: the same request schemas and the same CellService calls as the
 * REST handlers, so read-before-write, batches and output caps are the service's, not ours, and
 * the answers are the same size. Differences are of transport only: runs wait by default (a tool
 * call has no 202), and an image output comes back as MCP image content when asked
 * (`images: true`) or read alone (get_output); otherwise the JSON carries its url and size.
 * Descriptions are short (tools/list is read at the start of every session); the long text is
 * the skill's reference/mcp.md.
 */

const withRef = { ref };
const deleteArgs = editBody.pick({ notebook: true, version: true, force: true }).extend(withRef);
const withOutputs = { outputs: outputs.optional() };
const withImages = { images: z.boolean().optional().describe('Also send image outputs as image content.') };
const waitArgs = { wait: z.boolean().optional().describe('Default true.') };

export function cellTools(ctx: BridgeServices): ToolRow[] {
  const cells = ctx.cells;
  const readOnly = { readOnlyHint: true };
  /** A run of many cells answered: queued at once (wait: false), or its per-cell results. */
  const seriesAnswer = async (
    body: { notebook?: string | undefined; wait?: boolean | undefined; timeoutMs?: number | undefined },
    series: SeriesHandle,
    outputs: OutputDetail | undefined,
    about: object = {},
  ) => {
    if (body.wait === false) return { ...about, queued: series.cellIds };
    const timeoutMs = body.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;
    const result = await series.wait({ timeoutMs });
    // A wait that runs out is a result to read (the series goes on), not a failure.
    const detail = result.done ? {} : { detail: timeoutDetail(timeoutMs, result.pending) };
    return found(answerAt({ ...about, ...detail, ...result }, outputs ?? 'summary'), waitedKind(result));
  };
  /** An answer with these cells' images as image content too, when asked. */
  const shown = async (
    notebook: string | undefined,
    body: object,
    views: readonly CellAnswer[],
    { images: asked, kind }: { images?: boolean | undefined; kind?: OutcomeKind },
  ) => found(body, kind, asked ? await images(cells, notebook, views) : []);
  /** One run waited for; a wait that runs out is a result to read (the run goes on), not a failure. */
  const waited = async (
    notebook: string | undefined,
    handle: RunHandle,
    args: { timeoutMs?: number | undefined; outputs?: OutputDetail | undefined; images?: boolean | undefined },
  ) => {
    const options = { wait: true, timeoutMs: args.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS, outputs: 'full' as const };
    const { body, kind } = await waitRuns({}, [handle], options);
    const run = { ...body.runs![0]!, ...(body.stale && { stale: body.stale }) };
    // A run with no `cells` beside it carries its cell (cellRuns.ts).
    const views = [run, ...(run.alsoRan ?? [])].flatMap((r) => (r.cell ? [r.cell] : []));
    const answer = answerAt(body.detail ? { detail: body.detail, ...run } : run, args.outputs ?? 'summary');
    return shown(notebook, answer, views, { images: args.images, kind });
  };
  return [
    tool({
      name: 'list_notebooks',
      access: 'read',
      description: 'Open notebooks: session id, path, kernel and its state, cell count, idsPersist.',
      annotations: readOnly,
      handle: () => answer(async () => ({ notebooks: await cells.notebooks() })),
    }),
    tool({
      name: 'get_active_notebook',
      access: 'read',
      description: 'The notebook the person is looking at; their selected and visible cells.',
      annotations: readOnly,
      handle: () => answer(() => cells.active()),
    }),
    tool({
      name: 'list_cells',
      access: 'read',
      description: 'Every cell with output summaries; view "brief": id, kind, status, stale, first line.',
      inputSchema: listArgs,
      annotations: readOnly,
      handle: ({ notebook, ...shown }) => answer(() => listAnswer(cells, notebook, shown)),
    }),
    tool({
      name: 'get_cell',
      access: 'read',
      description: 'One cell with its outputs (default "full"; images by url unless "images").',
      inputSchema: notebookBody.extend(withRef).extend(withOutputs).extend(withImages),
      annotations: readOnly,
      handle: ({ notebook, ref, outputs, images }) =>
        answer(async () => {
          const cell = await cells.get(notebook, ref);
          return shown(notebook, answerAt({ cell }, outputs ?? 'full'), [cell], { images });
        }),
    }),
    tool({
      name: 'get_output',
      access: 'read',
      description: 'An output item by its url: an image as image content, text (head and tail past 40,000 characters).',
      inputSchema: z.strictObject({ url: z.string().min(1) }),
      annotations: readOnly,
      handle: ({ url }) => answer(() => outputAnswer(cells, url)),
    }),
    tool({
      name: 'create_cell',
      access: 'edit',
      description: 'Insert a cell at "index" or "before"/"after" a cell (default: the end).',
      inputSchema: createBody,
      handle: ({ notebook, ...cell }) => answer(() => cells.create(notebook, cell)),
    }),
    tool({
      name: 'edit_cell',
      access: 'edit',
      description: "Replace a cell's whole text (or kind, language, tags, metadata); read-before-write.",
      inputSchema: editBody.extend(withRef),
      handle: ({ notebook, ref, ...change }) => answer(() => cells.edit(notebook, ref, change)),
    }),
    tool({
      name: 'delete_cell',
      access: 'edit',
      description: 'Delete a cell; read-before-write.',
      inputSchema: deleteArgs,
      annotations: { destructiveHint: true },
      handle: ({ notebook, ref, ...guard }) => answer(() => cells.remove(notebook, ref, guard)),
    }),
    tool({
      name: 'move_cell',
      access: 'edit',
      description: 'Move a cell "to" an index or "before"/"after" a cell.',
      inputSchema: moveBody.extend(withRef),
      handle: ({ notebook, ref, ...to }) => answer(() => cells.move(notebook, ref, to)),
    }),
    tool({
      name: 'run_cell',
      access: 'run',
      description:
        `Run a code cell and wait (timeoutMs, default ${DEFAULT_RUN_TIMEOUT_MS}; the run goes on past it): success, ` +
        'the cell, and alsoRan (cells marimo re-ran).',
      inputSchema: runBody.omit({ wait: true }).extend(withRef).extend(withImages),
      handle: ({ notebook, ref, ...args }) => answer(async () => waited(notebook, await cells.run(notebook, ref), args)),
    }),
    tool({
      name: 'wait_cell',
      access: 'read',
      description: "Wait again for a cell's queued or running run, without running it again; answers like run_cell.",
      inputSchema: followBody.extend(withRef).extend(withImages),
      annotations: readOnly,
      handle: ({ notebook, ref, ...args }) => answer(async () => waited(notebook, await cells.follow(notebook, ref), args)),
    }),
    tool({
      name: 'edit_cells',
      access: 'edit',
      description:
        'Create/edit/delete/move ops as one all-or-nothing edit (one undo step), then run "run" and wait. Refs name ' +
        'cells as before the batch; a create\'s "name" is a ref for later ops. Read-before-write.',
      inputSchema: editsBody.extend(waitArgs),
      handle: ({ notebook, ops, run, wait, timeoutMs, outputs, strict }) =>
        answer(async () => {
          const { runs, ...applied } = await cells.batch(notebook, ops, run ?? [], { strict });
          const options = { wait: wait ?? true, timeoutMs: timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS, outputs: outputs ?? 'summary' };
          const { body, kind } = await waitRuns(applied, runs, options);
          return found(body, kind);
        }),
    }),
    tool({
      name: 'run_cells',
      access: 'run',
      description:
        'Run "cells", a "range" {start, end excluded} or "all" in order and wait; onError "stop" (default) skips the ' +
        'cells after a failure, "continue" runs them all.',
      inputSchema: runManyBody,
      handle: (body) =>
        answer(async () =>
          seriesAnswer(body, await cells.runMany(body.notebook, toSelection(body), body.onError ?? 'stop'), body.outputs),
        ),
    }),
    tool({
      name: 'run_stale',
      access: 'run',
      description:
        'Run the stale cells in order (or "cell" and the cells downstream of it); "rebuild": also the cells they read that have not run in this kernel. Stops at a failure.',
      inputSchema: runStaleBody,
      handle: (body) =>
        answer(async () => {
          const { series, ...about } = await cells.runStale(body.notebook, body.cell, body.rebuild);
          return seriesAnswer(body, series, body.outputs, about);
        }),
    }),
    tool({
      name: 'list_variables',
      access: 'read',
      description: "The kernel's variables without running a cell: name, type, shape or length, size, short repr.",
      inputSchema: notebookBody,
      annotations: readOnly,
      handle: ({ notebook }) => answer(() => notebookVariables(ctx, notebook)),
    }),
    tool({
      name: 'inspect_variable',
      access: 'read',
      description: "One kernel variable in detail (a longer repr; a DataFrame's columns and dtypes).",
      inputSchema: notebookBody.extend({ name: z.string().min(1) }),
      annotations: readOnly,
      handle: ({ notebook, name }) => answer(() => notebookVariables(ctx, notebook, name)),
    }),
    tool({
      name: 'clear_outputs',
      access: 'edit',
      description: 'Clear the outputs of "cells", a "range" or "all".',
      inputSchema: clearBody,
      annotations: { destructiveHint: true },
      handle: (body) => answer(() => cells.clearOutputs(body.notebook, toSelection(body))),
    }),
    tool({
      name: 'save_notebook',
      access: 'save',
      description: 'Save a notebook, or "all" the notebooks agents changed or ran; a failure says why.',
      inputSchema: saveBody,
      handle: (body) => answer(() => cells.save(body.all ? 'all' : body.notebook)),
    }),
    tool({
      name: 'persist_cell_ids',
      access: 'edit',
      description: 'Ask the person to upgrade an nbformat < 4.5 notebook so its cell ids last (idsPersist).',
      inputSchema: notebookBody,
      handle: ({ notebook }) => answer(() => cells.persistIds(notebook)),
    }),
    tool({
      name: 'interrupt',
      access: 'run',
      description: "Interrupt what the notebook's kernel runs.",
      inputSchema: notebookBody,
      handle: ({ notebook }) =>
        answer(async () => {
          return { interrupted: true, how: await cells.interrupt(notebook) };
        }),
    }),
    tool({
      name: 'restart_kernel',
      access: 'run',
      description: "Restart the notebook's kernel (builtin, Jupyter): every variable is lost.",
      inputSchema: notebookBody,
      annotations: { destructiveHint: true },
      handle: ({ notebook }) =>
        answer(async () => {
          await cells.restart(notebook);
          return { restarted: true };
        }),
    }),
    tool({
      name: 'start_kernel',
      access: 'run',
      description: 'Select and start a kernel for a notebook with none running, as the kernel picker would.',
      inputSchema: startKernelBody,
      handle: ({ notebook, kernel }) => answer(() => ctx.host.startKernel(notebook, kernel)),
    }),
  ];
}

/**
 * Runs a tool body: its value is the answer, as one JSON text (these tools declare no output
 * schema, so no structuredContent: clients that have both give a model one or the other, so
 * the facts travel once, in the part every client reads). A BridgeError is the answer's outcome:
 * a tool error carrying the same detail and extra fields as the REST body (e.g. the current cell
 * of a read-before-write refusal), so the agent can recover without another call.
 */
export async function answer(run: () => Promise<object>): Promise<ToolAnswer> {
  try {
    const value = await run();
    return value instanceof Found ? value : found(value);
  } catch (error) {
    if (!(error instanceof BridgeError)) throw error;
    return { outcome: error };
  }
}

/**
 * The image outputs of these cells, read raw through the same service as the output-item route.
 * Best effort: the outputs may have changed since the view was taken, and the operation itself
 * has succeeded, so an image that cannot be read is left to its url.
 */
async function images(cells: CellService, notebook: string | undefined, views: readonly CellAnswer[]): Promise<ImageContent[]> {
  const found: ImageContent[] = [];
  for (const view of views) {
    for (const [o, output] of (view.outputs ?? []).entries()) {
      for (const [i, item] of output.items.entries()) {
        // A rich item's type is its mime type.
        if (!item.type.startsWith('image/') || isTextMime(item.type)) continue;
        try {
          const raw = await cells.outputItem(notebook, view.id, o, i);
          if (raw.mime === item.type)
            found.push({ type: 'image', data: Buffer.from(raw.data).toString('base64'), mimeType: raw.mime });
        } catch (error) {
          if (!(error instanceof BridgeError)) throw error;
        }
      }
    }
  }
  return found;
}

/**
 * `get_output`: the output item a url of a cell's outputs names (`/notebooks/cells/<id>/outputs/
 * <o>/<i>?notebook=<id>`), as MCP carries it: an image as image content beside its type and size,
 * text as its view (head and tail past SCRATCHPAD_OUTPUT_CAP characters).
 */
async function outputAnswer(cells: CellService, url: string): Promise<Found> {
  const parsed = new URL(url, 'http://127.0.0.1');
  const m = /^\/notebooks\/cells\/([^/]+)\/outputs\/(\d+)\/(\d+)$/.exec(parsed.pathname);
  if (!m)
    throw new BridgeError(
      'bad_input',
      `"${url}" is not an output url: give one from a cell's outputs (/notebooks/cells/<id>/outputs/<output>/<item>?notebook=<id>)`,
    );
  const notebook = parsed.searchParams.get('notebook') ?? undefined;
  const raw = await cells.outputItem(notebook, decodeURIComponent(m[1]!), Number(m[2]), Number(m[3]));
  if (isTextMime(raw.mime)) return found({ item: shapeItem(raw, SCRATCHPAD_OUTPUT_CAP, () => url) });
  const image = raw.mime.startsWith('image/')
    ? [{ type: 'image' as const, data: Buffer.from(raw.data).toString('base64'), mimeType: raw.mime }]
    : [];
  return found({ item: { type: raw.mime, bytes: raw.data.byteLength } }, 'ok', image);
}

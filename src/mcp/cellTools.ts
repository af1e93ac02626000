import { z } from 'zod';
import type { CellService, RunHandle, SeriesHandle } from '../core/cellService';
import { BridgeError } from '../core/bridgeError';
import { isTextMime } from '../core/cellOutputs';
import { DEFAULT_RUN_TIMEOUT_MS, timeoutDetail, waitedKind, waitRuns } from '../core/cellRuns';
import {
  clearBody,
  createBody,
  editBody,
  editsBody,
  followBody,
  moveBody,
  notebookBody,
  outputs,
  ref,
  runBody,
  runManyBody,
  runStaleBody,
  saveBody,
  toSelection,
} from '../core/cellSchemas';
import { answerAt, type CellAnswer, type OutputDetail } from '../core/outputDetail';
import type { BridgeServices } from '../core/services';
import { notebookVariables } from '../core/variables';
import { startKernelBody } from '../core/kernelSchemas';
import type { OutcomeKind } from '../core/outcome';
import { found, Found, tool, type ImageContent, type ToolAnswer, type ToolRow } from './toolRows';

/**
 * The cell routes as MCP tools: the same request schemas and the same CellService calls as the
 * REST handlers, so read-before-write, batches and output caps are the service's, not ours.
 * Differences are of transport only: runs wait by default (a tool call has no 202), and image
 * outputs come back once as MCP image content (the JSON keeps their url and size).
 */

const withRef = { ref };
const deleteArgs = editBody.pick({ notebook: true, version: true, force: true }).extend(withRef);
const withOutputs = { outputs: outputs.optional() };
const waitArgs = { wait: z.boolean().optional().describe('Wait for the runs to end (default true).') };

const NOTEBOOK = '"notebook" is a session id, path or uri (omit it when one notebook is open).';
const GUARD =
  'Read-before-write: a non-empty cell can be changed only at the version you last read (list_cells/get_cell, ' +
  'or your own write); otherwise the tool fails with the current cell: read it again and retry, or pass ' +
  '"version" (the one you read) or "force": true.';

export function cellTools(ctx: BridgeServices): ToolRow[] {
  const cells = ctx.cells;
  const readOnly = { readOnlyHint: true };
  /** An answer at the asked detail; in full, its cells' images ride along as image content. */
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
    return shown(
      body.notebook,
      { ...about, ...detail, ...result },
      result.runs.map((r) => r.cell),
      outputs ?? 'summary',
      waitedKind(result),
    );
  };
  const shown = async (
    notebook: string | undefined,
    body: object,
    views: readonly CellAnswer[],
    detail: OutputDetail,
    kind?: OutcomeKind,
  ) => found(answerAt(body, detail), kind, detail === 'full' ? await images(cells, notebook, views) : []);
  /** One run waited for; a wait that runs out is a result to read (the run goes on), not a failure. */
  const waited = async (notebook: string | undefined, handle: RunHandle, timeoutMs?: number, detail?: OutputDetail) => {
    const options = { wait: true, timeoutMs: timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS, outputs: 'full' as const };
    const { body, kind } = await waitRuns({}, [handle], options);
    const run = { ...body.runs![0]!, ...(body.stale && { stale: body.stale }) };
    const views = [run.cell, ...(run.alsoRan ?? []).map((r) => r.cell)];
    return shown(notebook, body.detail ? { detail: body.detail, ...run } : run, views, detail ?? 'summary', kind);
  };
  return [
    tool({
      name: 'list_notebooks',
      access: 'read',
      description:
        'List the notebooks open in the editor (session id, uri, path, kernel and its state: idle, busy, starting, dead..., cell count).',
      annotations: readOnly,
      handle: () => answer(async () => ({ notebooks: await cells.notebooks() })),
    }),
    tool({
      name: 'get_active_notebook',
      access: 'read',
      description: 'The notebook the person is looking at, with their selected and visible cells.',
      annotations: readOnly,
      handle: () => answer(() => cells.active()),
    }),
    tool({
      name: 'list_cells',
      access: 'read',
      description: `Every cell of a notebook: id, index, kind, language, code, version, execution state and outputs (default "summary"). ${NOTEBOOK}`,
      inputSchema: notebookBody.extend(withOutputs),
      annotations: readOnly,
      handle: ({ notebook, outputs }) => answer(async () => answerAt(await cells.list(notebook), outputs ?? 'summary')),
    }),
    tool({
      name: 'get_cell',
      access: 'read',
      description: `One cell, with its outputs (default "full": images as image content). ${NOTEBOOK}`,
      inputSchema: notebookBody.extend(withRef).extend(withOutputs),
      annotations: readOnly,
      handle: ({ notebook, ref, outputs }) =>
        answer(async () => {
          const cell = await cells.get(notebook, ref);
          return shown(notebook, { cell }, [cell], outputs ?? 'full');
        }),
    }),
    tool({
      name: 'create_cell',
      access: 'edit',
      description: `Insert a cell at "index", or "before"/"after" another cell (default: at the end). ${NOTEBOOK}`,
      inputSchema: createBody,
      handle: ({ notebook, ...cell }) => answer(() => cells.create(notebook, cell)),
    }),
    tool({
      name: 'edit_cell',
      access: 'edit',
      description: `Replace the whole text of a cell (optionally its kind or language). ${GUARD} ${NOTEBOOK}`,
      inputSchema: editBody.extend(withRef),
      handle: ({ notebook, ref, ...change }) => answer(() => cells.edit(notebook, ref, change)),
    }),
    tool({
      name: 'delete_cell',
      access: 'edit',
      description: `Delete a cell. ${GUARD} ${NOTEBOOK}`,
      inputSchema: deleteArgs,
      annotations: { destructiveHint: true },
      handle: ({ notebook, ref, ...guard }) => answer(() => cells.remove(notebook, ref, guard)),
    }),
    tool({
      name: 'move_cell',
      access: 'edit',
      description: `Move a cell "to" an index, or "before"/"after" another cell. ${NOTEBOOK}`,
      inputSchema: moveBody.extend(withRef),
      handle: ({ notebook, ref, ...to }) => answer(() => cells.move(notebook, ref, to)),
    }),
    tool({
      name: 'run_cell',
      access: 'run',
      description:
        `Run a code cell in the notebook's kernel and wait for it (timeoutMs, default ${DEFAULT_RUN_TIMEOUT_MS}): ` +
        'returns success and the cell with its outputs (default "summary"), and in alsoRan the cells the kernel ' +
        're-ran on its own meanwhile (marimo re-runs dependents). A timeout stops the wait, not the run (see interrupt). ' +
        NOTEBOOK,
      inputSchema: runBody.omit({ wait: true }).extend(withRef),
      handle: ({ notebook, ref, timeoutMs, outputs }) =>
        answer(async () => waited(notebook, await cells.run(notebook, ref), timeoutMs, outputs)),
    }),
    tool({
      name: 'wait_cell',
      access: 'read',
      description:
        'Wait again for the run a code cell has queued or running (after run_cell, edit_cells or run_cells ran out ' +
        'of time), without running it again: returns like run_cell (a cell with no run in flight: its last run at ' +
        `once). ${NOTEBOOK}`,
      inputSchema: followBody.extend(withRef),
      annotations: readOnly,
      handle: ({ notebook, ref, timeoutMs, outputs }) =>
        answer(async () => waited(notebook, await cells.follow(notebook, ref), timeoutMs, outputs)),
    }),
    tool({
      name: 'edit_cells',
      access: 'edit',
      description:
        'Apply a batch of operations (create/edit/delete/move) as one all-or-nothing edit (one undo step up to 20 cells), then ' +
        'run the cells in "run" and wait for them. Refs (ids or indices) name cells as they were before the batch; ' +
        '"index" and "to" count positions in the notebook as the earlier ops left it. A create op may carry a "name" ' +
        '(e.g. "intro"): later ops use it as "after"/"before", "run" lists it, and the answer maps each name to the ' +
        `new cell's id ("names"). Every op is checked before anything changes. ${GUARD} ${NOTEBOOK}`,
      inputSchema: editsBody.extend(waitArgs),
      handle: ({ notebook, ops, run, wait, timeoutMs, outputs, strict }) =>
        answer(async () => {
          const { runs, ...applied } = await cells.batch(notebook, ops, run ?? [], { strict });
          const options = { wait: wait ?? true, timeoutMs: timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS, outputs: 'full' as const };
          const { body, kind } = await waitRuns(applied, runs, options);
          return shown(
            notebook,
            body,
            (body.runs ?? []).map((r) => r.cell),
            outputs ?? 'summary',
            kind,
          );
        }),
    }),
    tool({
      name: 'run_cells',
      access: 'run',
      description:
        'Run several code cells in notebook order: "cells" (ids or indices), a "range" {start, end (excluded)} or ' +
        '"all": true (markup cells are skipped). onError "stop" (default) leaves the cells after one that does not ' +
        'succeed unrun ("skipped"); "continue" runs them all. Waits (unless wait: false) and returns per-cell ' +
        `results in order, with each cell's outputs (default "summary"). ${NOTEBOOK}`,
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
        'Run the stale cells in notebook order (list_cells shows "stale" with its reason, "dependsOn" and "dependents"): ' +
        'every stale cell, or "cell" and the cells downstream of it that ran before; "rebuild": also the cells they read ' +
        'from that have not run in this kernel (named in "needs" otherwise). Stops at the first failure; ' +
        `waits (unless wait: false) and returns per-cell results (default "summary"). ${NOTEBOOK}`,
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
      description:
        "The notebook kernel's variables without running a cell (no execution count, no history): name, type, " +
        `shape or length, size in bytes and a short repr. Reprs that raise or hang come back as a note. ${NOTEBOOK}`,
      inputSchema: notebookBody,
      annotations: readOnly,
      handle: ({ notebook }) => answer(() => notebookVariables(ctx, notebook)),
    }),
    tool({
      name: 'inspect_variable',
      access: 'read',
      description: `One kernel variable in detail (a longer repr; a DataFrame's columns and dtypes), without running a cell. ${NOTEBOOK}`,
      inputSchema: notebookBody.extend({ name: z.string().min(1).describe('The variable name.') }),
      annotations: readOnly,
      handle: ({ notebook, name }) => answer(() => notebookVariables(ctx, notebook, name)),
    }),
    tool({
      name: 'clear_outputs',
      access: 'edit',
      description: `Clear the outputs (and last run) of "cells", a "range" or "all": true. ${NOTEBOOK}`,
      inputSchema: clearBody,
      annotations: { destructiveHint: true },
      handle: (body) => answer(() => cells.clearOutputs(body.notebook, toSelection(body))),
    }),
    tool({
      name: 'save_notebook',
      access: 'save',
      description:
        'Save a notebook to its file, or with "all": true every open notebook the agents changed or ran; ' +
        `returns what was saved (a failure says why: read-only file, changed on disk, untitled). ${NOTEBOOK}`,
      inputSchema: saveBody,
      handle: (body) => answer(() => cells.save(body.all ? 'all' : body.notebook)),
    }),
    tool({
      name: 'interrupt',
      access: 'run',
      description: `Interrupt whatever the notebook's kernel is running. ${NOTEBOOK}`,
      inputSchema: notebookBody,
      handle: ({ notebook }) =>
        answer(async () => {
          return { interrupted: true, how: await cells.interrupt(notebook) };
        }),
    }),
    tool({
      name: 'restart_kernel',
      access: 'run',
      description: `Restart the notebook's kernel (builtin and Jupyter kernels): every variable is lost. ${NOTEBOOK}`,
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
      description:
        "Select and start a kernel for a notebook whose kernel is not running yet (as the person would in the kernel picker): 'jupyter' " +
        "starts the Jupyter kernel its metadata names, 'builtin' the Agent Bridge Python kernel. Returns its session.",
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

import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { CellService, CellView } from '../core/cells';
import { BridgeError } from '../core/errors';
import { isTextMime } from '../core/cellOutputs';
import { DEFAULT_RUN_TIMEOUT_MS, timeoutDetail, waitRuns } from '../core/cellRuns';
import {
  clearBody,
  createBody,
  editBody,
  editsBody,
  moveBody,
  notebookBody,
  ref,
  runBody,
  runManyBody,
  saveBody,
  toSelection,
} from '../core/cellSchemas';
import type { BridgeServices } from '../core/services';
import { startKernelBody } from '../core/kernelSchemas';

/**
 * The cell routes as MCP tools: the same request schemas and the same CellService calls as the
 * REST handlers, so read-before-write, batches and output caps are the service's, not ours.
 * Differences are of transport only: runs wait by default (a tool call has no 202), and image
 * outputs come back once as MCP image content (the JSON keeps their url and size).
 */

const withRef = { ref };
const deleteArgs = editBody.pick({ notebook: true, version: true, force: true }).extend(withRef);
const waitArgs = { wait: z.boolean().optional().describe('Wait for the runs to end (default true).') };

const NOTEBOOK = '"notebook" is a session id, path or uri (omit it when one notebook is open).';
const GUARD =
  'Read-before-write: a non-empty cell can be changed only at the version you last read (list_cells/get_cell, ' +
  'or your own write); otherwise the tool fails with the current cell: read it again and retry, or pass ' +
  '"version" (the one you read) or "force": true.';

type Json = Record<string, unknown>;

export function registerCellTools(server: McpServer, ctx: BridgeServices): void {
  const cells = ctx.cells;
  const readOnly = { readOnlyHint: true };

  server.registerTool(
    'list_notebooks',
    { description: 'List the notebooks open in the editor (session id, uri, path, kernel, cell count).', annotations: readOnly },
    () => answer(async () => ({ notebooks: await cells.notebooks() })),
  );
  server.registerTool(
    'get_active_notebook',
    { description: 'The notebook the person is looking at, with their selected and visible cells.', annotations: readOnly },
    () => answer(() => cells.active()),
  );
  server.registerTool(
    'list_cells',
    {
      description: `Every cell of a notebook: id, index, kind, language, code, version, execution state and capped outputs. ${NOTEBOOK}`,
      inputSchema: notebookBody,
      annotations: readOnly,
    },
    ({ notebook }) => answer(() => cells.list(notebook)),
  );
  server.registerTool(
    'get_cell',
    {
      description: `One cell, with its outputs (images as image content). ${NOTEBOOK}`,
      inputSchema: notebookBody.extend(withRef),
      annotations: readOnly,
    },
    ({ notebook, ref }) =>
      answer(async () => {
        const cell = await cells.get(notebook, ref);
        return new WithImages({ cell }, await images(cells, notebook, [cell]));
      }),
  );
  server.registerTool(
    'create_cell',
    {
      description: `Insert a cell at "index", or "before"/"after" another cell (default: at the end). ${NOTEBOOK}`,
      inputSchema: createBody,
    },
    ({ notebook, ...cell }) => answer(async () => ({ cell: await cells.create(notebook, cell) })),
  );
  server.registerTool(
    'edit_cell',
    {
      description: `Replace the whole text of a cell (optionally its kind or language). ${GUARD} ${NOTEBOOK}`,
      inputSchema: editBody.extend(withRef),
    },
    ({ notebook, ref, ...change }) => answer(async () => ({ cell: await cells.edit(notebook, ref, change) })),
  );
  server.registerTool(
    'delete_cell',
    { description: `Delete a cell. ${GUARD} ${NOTEBOOK}`, inputSchema: deleteArgs, annotations: { destructiveHint: true } },
    ({ notebook, ref, ...guard }) => answer(() => cells.remove(notebook, ref, guard)),
  );
  server.registerTool(
    'move_cell',
    {
      description: `Move a cell "to" an index, or "before"/"after" another cell. ${NOTEBOOK}`,
      inputSchema: moveBody.extend(withRef),
    },
    ({ notebook, ref, ...to }) => answer(async () => ({ cell: await cells.move(notebook, ref, to) })),
  );
  server.registerTool(
    'run_cell',
    {
      description:
        `Run a code cell in the notebook's kernel and wait for it (timeoutMs, default ${DEFAULT_RUN_TIMEOUT_MS}): ` +
        'returns success and the cell with its outputs. A timeout stops the wait, not the run (see interrupt). ' +
        NOTEBOOK,
      inputSchema: runBody.omit({ wait: true }).extend(withRef),
    },
    ({ notebook, ref, timeoutMs }) =>
      answer(async () => {
        const handle = await cells.run(notebook, ref);
        // A wait that runs out is a result to read (the run goes on), not a failure.
        const { body } = await waitRuns({}, [handle], { wait: true, timeoutMs: timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS });
        const run = body.runs![0]!;
        return new WithImages(body.detail ? { detail: body.detail, ...run } : run, await images(cells, notebook, [run.cell]));
      }),
  );
  server.registerTool(
    'edit_cells',
    {
      description:
        'Apply a batch of operations (create/edit/delete/move) as one all-or-nothing edit (one undo step), then ' +
        'run the cells in "run" (ids, or indices in the edited notebook) and wait for them. Refs name cells as ' +
        `they were before the batch; every op is checked before anything changes. ${GUARD} ${NOTEBOOK}`,
      inputSchema: editsBody.extend(waitArgs),
    },
    ({ notebook, ops, run, wait, timeoutMs }) =>
      answer(async () => {
        const { runs, ...applied } = await cells.batch(notebook, ops, run ?? []);
        const { body } = await waitRuns(applied, runs, { wait: wait ?? true, timeoutMs: timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS });
        return new WithImages(
          body,
          await images(
            cells,
            notebook,
            (body.runs ?? []).map((r) => r.cell),
          ),
        );
      }),
  );
  server.registerTool(
    'run_cells',
    {
      description:
        'Run several code cells in notebook order: "cells" (ids or indices), a "range" {start, end (excluded)} or ' +
        '"all": true (markup cells are skipped). onError "stop" (default) leaves the cells after one that does not ' +
        'succeed unrun ("skipped"); "continue" runs them all. Waits (unless wait: false) and returns per-cell ' +
        `results in order, with each cell's outputs. ${NOTEBOOK}`,
      inputSchema: runManyBody,
    },
    (body) =>
      answer(async () => {
        const series = await cells.runMany(body.notebook, toSelection(body), body.onError ?? 'stop');
        if (body.wait === false) return { queued: series.cellIds };
        const timeoutMs = body.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;
        const result = await series.wait({ timeoutMs });
        // A wait that runs out is a result to read (the series goes on), not a failure.
        const detail = result.done ? {} : { detail: timeoutDetail(timeoutMs, result.pending) };
        return new WithImages(
          { ...detail, ...result },
          await images(
            cells,
            body.notebook,
            result.runs.map((r) => r.cell),
          ),
        );
      }),
  );
  server.registerTool(
    'clear_outputs',
    {
      description: `Clear the outputs (and last run) of "cells", a "range" or "all": true. ${NOTEBOOK}`,
      inputSchema: clearBody,
      annotations: { destructiveHint: true },
    },
    (body) => answer(() => cells.clearOutputs(body.notebook, toSelection(body))),
  );
  server.registerTool(
    'save_notebook',
    {
      description:
        'Save a notebook to its file, or with "all": true every open notebook the agents changed or ran; ' +
        `returns what was saved (a failure says why: read-only file, changed on disk, untitled). ${NOTEBOOK}`,
      inputSchema: saveBody,
    },
    (body) => answer(() => cells.save(body.all ? 'all' : body.notebook)),
  );
  server.registerTool(
    'interrupt',
    { description: `Interrupt whatever the notebook's kernel is running. ${NOTEBOOK}`, inputSchema: notebookBody },
    ({ notebook }) =>
      answer(async () => {
        return { interrupted: true, how: await cells.interrupt(notebook) };
      }),
  );
  server.registerTool(
    'restart_kernel',
    {
      description: `Restart the notebook's kernel (builtin and Jupyter kernels): every variable is lost. ${NOTEBOOK}`,
      inputSchema: notebookBody,
      annotations: { destructiveHint: true },
    },
    ({ notebook }) =>
      answer(async () => {
        await cells.restart(notebook);
        return { restarted: true };
      }),
  );
  server.registerTool(
    'start_kernel',
    {
      description:
        "Select and start a kernel for a notebook whose kernel is not running yet (as the person would in the kernel picker): 'jupyter' " +
        "starts the Jupyter kernel its metadata names, 'builtin' the Agent Bridge Python kernel. Returns its session.",
      inputSchema: startKernelBody,
    },
    ({ notebook, kernel }) => answer(() => ctx.host.startKernel(notebook, kernel)),
  );
}

type ImageContent = { type: 'image'; data: string; mimeType: string };

/** A result whose image outputs travel as image content beside the JSON. */
class WithImages {
  constructor(
    readonly body: object,
    readonly images: ImageContent[],
  ) {}
}

/**
 * Runs a tool body: its value becomes the structured result (and its JSON text); a BridgeError
 * becomes a tool error carrying the same detail and extra fields as the REST body (e.g. the
 * current cell of a read-before-write refusal), so the agent can recover without another call.
 */
export async function answer(run: () => Promise<object>): Promise<CallToolResult> {
  try {
    const value = await run();
    const { body, images: extra } = value instanceof WithImages ? value : { body: value, images: [] };
    return { content: [{ type: 'text', text: JSON.stringify(body) }, ...extra], structuredContent: body as Json };
  } catch (error) {
    if (!(error instanceof BridgeError)) throw error;
    const body = { status: error.status, detail: error.detail, ...error.extra };
    const more = Object.keys(error.extra).length ? `\n${JSON.stringify(error.extra)}` : '';
    return { isError: true, content: [{ type: 'text', text: `${error.detail}${more}` }], structuredContent: body };
  }
}

/**
 * The image outputs of these cells, read raw through the same service as the output-item route.
 * Best effort: the outputs may have changed since the view was taken, and the operation itself
 * has succeeded, so an image that cannot be read is left to its url.
 */
async function images(cells: CellService, notebook: string | undefined, views: readonly CellView[]): Promise<ImageContent[]> {
  const found: ImageContent[] = [];
  for (const view of views) {
    for (const [o, output] of view.outputs.entries()) {
      for (const [i, item] of output.items.entries()) {
        if (!item.mime.startsWith('image/') || isTextMime(item.mime)) continue;
        try {
          const raw = await cells.outputItem(notebook, view.id, o, i);
          if (raw.mime === item.mime)
            found.push({ type: 'image', data: Buffer.from(raw.data).toString('base64'), mimeType: raw.mime });
        } catch (error) {
          if (!(error instanceof BridgeError)) throw error;
        }
      }
    }
  }
  return found;
}

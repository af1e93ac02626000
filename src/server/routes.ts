import { z } from 'zod';
import type { CellService } from '../core/cells';
import type { KeyedQueue } from '../core/keyedQueue';
import type { NotebookHost } from '../core/sessions';
import { MCP_URL_PATH as MCP_PATH } from '../core/agentConfig';
import { DEFAULT_RUN_TIMEOUT_MS, outputIndex, rawContentType, respondRun, respondSeries, waitRuns } from './cellRun';
import {
  clearBody,
  createBody,
  deleteQuery,
  editBody,
  editsBody,
  moveBody,
  notebookBody,
  notebookQuery,
  runBody,
  runManyBody,
  runQuery,
  saveBody,
  toSelection,
} from '../core/cellSchemas';
import { executeScratchpad } from './execute';
import { Reply, route, type Route } from './route';
import { MethodNotAllowed } from './router';

/** What the handlers work with; built once per server by the composition root. */
export interface RouteContext {
  host: NotebookHost;
  runs: KeyedQueue;
  version: string;
  /** Reading, editing and running the cells of open notebooks. */
  cells: CellService;
}

/** GET (a standalone event stream) and DELETE (ending a session) mean nothing without sessions. */
function mcpMethodNotAllowed({ req }: { req: { method?: string | undefined } }): never {
  throw new MethodNotAllowed(
    ['POST'],
    `${req.method} ${MCP_PATH} is not supported: this MCP server is stateless; send every request as a POST`,
  );
}

const health = () => ({ status: 'healthy', server: 'agent-bridge' });

/** THE route table: marimo's surface and ours, every row validated the same way. */
export const routes: readonly Route<RouteContext>[] = [
  route({ method: 'get', path: '/health', handle: (_i, ctx) => ({ ...health(), version: ctx.version }) }),
  route({ method: 'get', path: '/healthz', handle: (_i, ctx) => ({ ...health(), version: ctx.version }) }),

  route({
    method: 'get',
    path: '/api/sessions',
    handle: async (_i, ctx) =>
      Object.fromEntries((await ctx.host.sessions()).map((s) => [s.id, { filename: s.path, path: s.path }])),
  }),

  route({
    method: 'post',
    path: '/api/kernel/execute',
    // marimo ignores other keys, so this schema does too.
    body: z.object({ code: z.string({ error: '"code" must be a string of Python source' }) }),
    handle: ({ body, req, res }, ctx) => executeScratchpad(body.code, req, res, ctx),
  }),

  // marimo's MCP mount: Streamable HTTP, stateless, so only POST carries meaning. The SDK is
  // loaded on the first MCP request, not at activation.
  route({
    method: 'post',
    path: MCP_PATH,
    // JSON-RPC messages, which the SDK validates itself.
    body: z.unknown(),
    handle: async ({ body, req, res }, ctx) => (await import('../mcp/server')).serveMcp(req, res, body, ctx),
  }),
  route({ method: 'get', path: MCP_PATH, handle: mcpMethodNotAllowed }),
  route({ method: 'delete', path: MCP_PATH, handle: mcpMethodNotAllowed }),

  route({
    method: 'post',
    path: '/notebooks/open',
    body: z.strictObject({
      path: z.string().min(1, 'give the absolute path of a notebook file'),
      kernel: z.enum(['builtin']).optional(),
    }),
    handle: async ({ body }, ctx) => ({ session: await ctx.host.open(body.path, { kernel: body.kernel }) }),
  }),

  // ---- cells: read, edit (read-before-write), run. `notebook` (session id, path or uri) is in
  // the query of GET/DELETE and in the body of POST/PATCH; omitted, the only open notebook.
  route({ method: 'get', path: '/notebooks', handle: async (_i, ctx) => ({ notebooks: await ctx.cells.notebooks() }) }),
  route({ method: 'get', path: '/notebooks/active', handle: (_i, ctx) => ctx.cells.active() }),
  route({
    method: 'get',
    path: '/notebooks/cells',
    query: notebookQuery,
    handle: ({ query }, ctx) => ctx.cells.list(query.notebook),
  }),
  route({
    method: 'post',
    path: '/notebooks/cells',
    body: createBody,
    handle: async ({ body: { notebook, ...cell } }, ctx) => new Reply(201, { cell: await ctx.cells.create(notebook, cell) }),
  }),
  route({
    method: 'post',
    path: '/notebooks/edits',
    body: editsBody,
    handle: async ({ body }, ctx) => {
      const { runs, ...applied } = await ctx.cells.batch(body.notebook, body.ops, body.run ?? []);
      return waitRuns(applied, runs, { wait: body.wait ?? false, timeoutMs: body.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS });
    },
  }),
  route({
    method: 'post',
    path: '/notebooks/run',
    body: runManyBody,
    handle: async ({ body, req, res }, ctx) =>
      respondSeries(
        await ctx.cells.runMany(body.notebook, toSelection(body), body.onError ?? 'stop'),
        { wait: body.wait ?? false, timeoutMs: body.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS },
        req,
        res,
      ),
  }),
  route({
    method: 'post',
    path: '/notebooks/clear-outputs',
    body: clearBody,
    handle: ({ body }, ctx) => ctx.cells.clearOutputs(body.notebook, toSelection(body)),
  }),
  route({
    method: 'post',
    path: '/notebooks/save',
    body: saveBody,
    handle: ({ body }, ctx) => ctx.cells.save(body.all ? 'all' : body.notebook),
  }),
  route({
    method: 'post',
    path: '/notebooks/interrupt',
    body: notebookBody,
    handle: async ({ body }, ctx) => {
      await ctx.cells.interrupt(body.notebook);
      return { interrupted: true };
    },
  }),
  route({
    method: 'post',
    path: '/notebooks/restart',
    body: notebookBody,
    handle: async ({ body }, ctx) => {
      await ctx.cells.restart(body.notebook);
      return { restarted: true };
    },
  }),
  route({
    method: 'get',
    path: '/notebooks/cells/:ref',
    query: notebookQuery,
    handle: async ({ query, params }, ctx) => ({ cell: await ctx.cells.get(query.notebook, params['ref']!) }),
  }),
  route({
    method: 'patch',
    path: '/notebooks/cells/:ref',
    body: editBody,
    handle: async ({ body: { notebook, ...change }, params }, ctx) => ({
      cell: await ctx.cells.edit(notebook, params['ref']!, change),
    }),
  }),
  route({
    method: 'delete',
    path: '/notebooks/cells/:ref',
    query: deleteQuery,
    handle: ({ query: { notebook, ...guard }, params }, ctx) => ctx.cells.remove(notebook, params['ref']!, guard),
  }),
  route({
    method: 'post',
    path: '/notebooks/cells/:ref/move',
    body: moveBody,
    handle: async ({ body: { notebook, ...to }, params }, ctx) => ({ cell: await ctx.cells.move(notebook, params['ref']!, to) }),
  }),
  route({
    method: 'post',
    path: '/notebooks/cells/:ref/run',
    body: runBody,
    query: runQuery,
    handle: async ({ body, query, params, req, res }, ctx) => {
      const handle = await ctx.cells.run(body.notebook ?? query.notebook, params['ref']!);
      const wait = body.wait ?? query.wait ?? false;
      return respondRun(handle, { wait, timeoutMs: body.timeoutMs ?? query.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS }, req, res);
    },
  }),
  route({
    method: 'get',
    path: '/notebooks/cells/:ref/outputs/:output/:item',
    query: notebookQuery,
    handle: async ({ query, params, res }, ctx) => {
      const item = await ctx.cells.outputItem(
        query.notebook,
        params['ref']!,
        outputIndex(params['output'], 'index'),
        outputIndex(params['item'], 'item'),
      );
      res.writeHead(200, {
        'Content-Type': rawContentType(item.mime),
        'Content-Length': item.data.byteLength,
        'X-Content-Type-Options': 'nosniff',
      });
      res.end(item.data);
    },
  }),
];

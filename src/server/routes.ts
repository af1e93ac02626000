import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { MCP_URL_PATH as MCP_PATH } from '../core/agents/agentConfig';
import { DEFAULT_RUN_TIMEOUT_MS } from '../core/runs/cellRuns';
import { answerAt } from '../core/outputs/outputDetail';
import { listAnswer } from '../core/outputs/cellBrief';
import type { BridgeServices } from '../core/services';
import type { DryRun } from '../core/model/cellService';
import { outputIndex, rawContentType, respondRun, respondRuns, respondSeries } from './cellRun';
import {
  cellsQuery,
  clearBody,
  dryRun,
  createBody,
  deleteQuery,
  editBody,
  editsBody,
  followBody,
  listQuery,
  moveBody,
  notebookBody,
  notebookQuery,
  runBody,
  runManyBody,
  runQuery,
  runStaleBody,
  saveBody,
  toSelection,
  undoBody,
} from '../core/cells/cellSchemas';
import { notebookVariables } from '../core/runs/variables';
import { httpCaller } from '../core/agents/clients';
import { rerun, rerunArgs } from '../mcp/runTools';
import { leaving } from './guardRoutes';
import { dryRunExecute, serveExecute } from './execute';
import { SCRATCHPAD_OUTPUT_PATH } from '../core/outputs/scratchpadOutputs';
import { kernelChoice, startKernelBody } from '../core/runs/kernelSchemas';
import { Reply, route, type Route } from './route';
import { MethodNotAllowed } from './errorResponses';
import { BridgeError } from '../core/bridgeError';

/** What the handlers work with: the services, and the MCP transport, which the composition root loads on first use. */
export interface RouteContext extends BridgeServices {
  /** The MCP transport; handed the services the route was given (scoped to its activity). */
  serveMcp(ctx: BridgeServices, req: IncomingMessage, res: ServerResponse, body: unknown): Promise<void>;
}

/** GET (a standalone event stream) and DELETE (ending a session) mean nothing without sessions. */
function mcpMethodNotAllowed({ req }: { req: { method?: string | undefined } }): never {
  throw new MethodNotAllowed(
    ['POST'],
    `${req.method} ${MCP_PATH} is not supported: this MCP server is stateless; send every request as a POST`,
  );
}

const runsQuery = z.strictObject({
  notebook: z.string().optional(),
  limit: z.string().regex(/^\d+$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(1).max(500)).optional(),
});

/** marimo's `/health`, with the server named: its `version` is a marimo version (core/runs/marimoVersion.ts), the bridge's own is `bridgeVersion`. */
const health = (ctx: RouteContext) => ({
  status: 'healthy',
  server: 'agent-bridge',
  version: ctx.marimoVersion(),
  bridgeVersion: ctx.version,
});

/** A run route's `dryRun: true`: the cells it would run and what the risk scan finds in them. */
const dryRunAnswer = async (ctx: BridgeServices, notebook: string | undefined, run: DryRun) => ({
  dryRun: true,
  ...(await ctx.cells.dryRun(notebook, run)),
});

/** THE route table: marimo's surface and ours, every row validated the same way. */
export const routes: readonly Route<RouteContext>[] = [
  route({ method: 'get', path: '/health', access: 'open', handle: (_i, ctx) => health(ctx) }),
  route({ method: 'get', path: '/healthz', access: 'open', handle: (_i, ctx) => health(ctx) }),

  route({
    method: 'get',
    path: '/api/sessions',
    // marimo's value also names the kernel session (`session_id`) apart from the key, the id its
    // front end chose; ours are one id.
    handle: async (_i, ctx) =>
      Object.fromEntries((await ctx.host.sessions()).map((s) => [s.id, { session_id: s.id, filename: s.path, path: s.path }])),
  }),

  route({
    method: 'post',
    path: '/api/kernel/execute',
    holds: true,
    access: 'execute',
    activity: 'scratchpad run',
    // marimo ignores other keys, so this schema does too.
    body: z.object({ code: z.string({ error: '"code" must be a string of Python source' }), dryRun }),
    handle: ({ body, req, res }, ctx) =>
      body.dryRun ? dryRunExecute(body.code, req, ctx) : serveExecute(body.code, req, res, ctx),
  }),

  route({
    method: 'get',
    path: SCRATCHPAD_OUTPUT_PATH,
    activity: 'scratchpad output',
    handle: ({ params, res }, ctx) => {
      const kept = ctx.outputs.get(params['id']!);
      if (kept === 'gone')
        throw new BridgeError(
          'not_found',
          `Output ${params['id']} has expired: scratchpad outputs are kept for ${ctx.outputs.bounds.keepMs / 60_000} minutes (fewer when newer ones need the room); run the code again to get a new URL`,
        );
      if (!kept)
        throw new BridgeError(
          'not_found',
          `No output has the id ${params['id']}: check the URL against the one the capped run's note gave (the id is the last part)`,
        );
      res.writeHead(200, {
        'Content-Type': 'text/plain; charset=utf-8',
        'Content-Length': Buffer.byteLength(kept.text),
        'X-Content-Type-Options': 'nosniff',
        'X-Agent-Bridge-Output-Complete': String(kept.complete),
      });
      res.end(kept.text);
    },
  }),

  // marimo's MCP mount: Streamable HTTP, stateless, so only POST carries meaning.
  route({
    method: 'post',
    path: MCP_PATH,
    holds: true,
    access: 'gateway',
    // JSON-RPC messages, which the SDK validates itself.
    body: z.unknown(),
    handle: ({ body, req, res }, ctx) => ctx.serveMcp(ctx, req, res, body),
  }),
  route({ method: 'get', path: MCP_PATH, access: 'gateway', handle: mcpMethodNotAllowed }),
  route({ method: 'delete', path: MCP_PATH, access: 'gateway', handle: mcpMethodNotAllowed }),

  route({
    method: 'post',
    path: '/notebooks/open',
    activity: 'notebook open',
    body: z.strictObject({
      path: z.string().min(1, 'give the absolute path of a notebook file'),
      kernel: kernelChoice.optional(),
    }),
    handle: async ({ body }, ctx) => ({ session: await ctx.host.open(body.path, { kernel: body.kernel }) }),
  }),
  route({
    method: 'post',
    path: '/notebooks/kernel/start',
    holds: true,
    access: 'run',
    activity: 'kernel start',
    body: startKernelBody,
    handle: ({ body }, ctx) => ctx.host.startKernel(body.notebook, body.kernel),
  }),

  // ---- cells: read, edit (read-before-write), run. `notebook` (session id, path or uri) is in
  // the query of GET/DELETE and in the body of POST/PATCH; omitted, the only open notebook.
  route({ method: 'get', path: '/notebooks', handle: async (_i, ctx) => ({ notebooks: await ctx.cells.notebooks() }) }),
  route({ method: 'get', path: '/notebooks/active', handle: (_i, ctx) => ctx.cells.active() }),
  // Who is where: the person's cells, the agents' and what runs for whom (src/core/agents/presence.ts).
  route({
    method: 'get',
    path: '/notebooks/presence',
    query: notebookQuery,
    handle: ({ query }, ctx) => ctx.cells.presence(query.notebook),
  }),
  route({
    method: 'get',
    path: '/notebooks/cells',
    query: listQuery,
    handle: ({ query }, ctx) => listAnswer(ctx.cells, query.notebook, query),
  }),
  route({
    method: 'post',
    path: '/notebooks/cells',
    activity: 'cell create',
    body: createBody,
    handle: async ({ body: { notebook, ...cell } }, ctx) => new Reply(201, await ctx.cells.create(notebook, cell)),
  }),
  route({
    method: 'post',
    path: '/notebooks/edits',
    holds: true,
    activity: 'batch',
    body: editsBody,
    handle: async ({ body }, ctx) => {
      const { runs, ...applied } = await ctx.cells.batch(body.notebook, body.ops, body.run ?? [], { strict: body.strict });
      return respondRuns(applied, runs, {
        wait: body.wait ?? false,
        timeoutMs: body.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS,
        outputs: body.outputs ?? 'summary',
      });
    },
  }),
  route({
    method: 'get',
    path: '/notebooks/changes',
    query: notebookQuery,
    handle: ({ query }, ctx) => ctx.checkpoints.mine(query.notebook),
  }),
  route({
    method: 'post',
    path: '/notebooks/undo',
    activity: 'undo',
    body: undoBody,
    describe: ({ body }, ctx, author) => ctx.checkpoints.describeUndo(author, body.checkpoint),
    handle: ({ body }, ctx) => ctx.checkpoints.undoOwn(body.notebook, body.checkpoint),
  }),
  route({
    method: 'post',
    path: '/notebooks/run',
    holds: true,
    access: 'run',
    activity: 'cells run',
    body: runManyBody,
    handle: async ({ body, req, res }, ctx) =>
      body.dryRun
        ? dryRunAnswer(ctx, body.notebook, { selection: toSelection(body) })
        : respondSeries(
            await ctx.cells.runMany(body.notebook, toSelection(body), body.onError ?? 'stop'),
            { wait: body.wait ?? false, timeoutMs: body.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS, outputs: body.outputs ?? 'summary' },
            req,
            res,
          ),
  }),
  route({
    method: 'post',
    path: '/notebooks/run-stale',
    holds: true,
    access: 'run',
    activity: 'stale cells run',
    body: runStaleBody,
    handle: async ({ body, req, res }, ctx) => {
      if (body.dryRun) return dryRunAnswer(ctx, body.notebook, { stale: body.cell, rebuild: body.rebuild ?? false });
      const { series, ...about } = await ctx.cells.runStale(body.notebook, body.cell, body.rebuild);
      return respondSeries(
        series,
        { wait: body.wait ?? false, timeoutMs: body.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS, outputs: body.outputs ?? 'summary' },
        req,
        res,
        about,
      );
    },
  }),
  route({
    method: 'post',
    path: '/notebooks/clear-outputs',
    activity: 'clear outputs',
    body: clearBody,
    handle: ({ body }, ctx) => ctx.cells.clearOutputs(body.notebook, toSelection(body)),
  }),
  route({
    method: 'post',
    path: '/notebooks/save',
    access: 'save',
    activity: 'notebook save',
    body: saveBody,
    handle: ({ body }, ctx) => ctx.cells.save(body.all ? 'all' : body.notebook),
  }),
  route({
    method: 'post',
    path: '/notebooks/persist-ids',
    activity: 'keep cell ids in the file',
    body: notebookBody,
    handle: ({ body }, ctx) => ctx.cells.persistIds(body.notebook),
  }),
  route({
    method: 'post',
    path: '/notebooks/interrupt',
    access: 'run',
    activity: 'interrupt',
    body: notebookBody,
    handle: async ({ body }, ctx) => {
      return { interrupted: true, how: await ctx.cells.interrupt(body.notebook) };
    },
  }),
  route({
    method: 'post',
    path: '/notebooks/restart',
    holds: true,
    access: 'run',
    activity: 'kernel restart',
    body: notebookBody,
    handle: async ({ body }, ctx) => {
      await ctx.cells.restart(body.notebook);
      return { restarted: true };
    },
  }),
  // ---- the run history: an agent's own past runs (its credential's; without one, its name's).
  route({
    method: 'get',
    path: '/notebooks/runs',
    query: runsQuery,
    handle: ({ query, req }, ctx) => ({ runs: ctx.history.list(httpCaller(ctx.access.identities, req.headers), query) }),
  }),
  route({
    method: 'get',
    path: '/notebooks/runs/:id',
    handle: ({ params, req }, ctx) => {
      const { owner: _o, ...run } = ctx.history.get(httpCaller(ctx.access.identities, req.headers), params['id']!);
      return run;
    },
  }),
  route({
    method: 'get',
    path: '/notebooks/runs/:id/files',
    handle: ({ params, req }, ctx) => ctx.history.files(httpCaller(ctx.access.identities, req.headers), params['id']!),
  }),
  route({
    method: 'post',
    path: '/notebooks/runs/:id/rerun',
    access: 'execute',
    activity: 'rerun',
    body: rerunArgs,
    handle: async ({ body, params, req, res }, ctx) => {
      const caller = httpCaller(ctx.access.identities, req.headers);
      const { outcome, result, run, rerunOf } = await rerun(ctx, caller, params['id']!, body, {
        signal: leaving(res),
        host: req.headers.host,
      });
      return Reply.of(outcome.kind, { ...result, run, rerunOf, ...(outcome.detail && { detail: outcome.detail }) });
    },
  }),
  // ---- the kernel's variables, read beside the runs: no cell, no execution count, no history.
  route({
    method: 'get',
    path: '/notebooks/variables',
    holds: true,
    query: notebookQuery,
    handle: ({ query }, ctx) => notebookVariables(ctx, query.notebook),
  }),
  route({
    method: 'get',
    path: '/notebooks/variables/:name',
    holds: true,
    query: notebookQuery,
    handle: ({ query, params }, ctx) => notebookVariables(ctx, query.notebook, params['name']!),
  }),
  route({
    method: 'get',
    path: '/notebooks/cells/:ref',
    query: cellsQuery,
    handle: async ({ query, params }, ctx) =>
      answerAt({ cell: await ctx.cells.get(query.notebook, params['ref']!) }, query.outputs ?? 'full'),
  }),
  route({
    method: 'patch',
    path: '/notebooks/cells/:ref',
    activity: 'cell edit',
    body: editBody,
    handle: ({ body: { notebook, ...change }, params }, ctx) => ctx.cells.edit(notebook, params['ref']!, change),
  }),
  route({
    method: 'delete',
    path: '/notebooks/cells/:ref',
    activity: 'cell delete',
    query: deleteQuery,
    handle: ({ query: { notebook, ...guard }, params }, ctx) => ctx.cells.remove(notebook, params['ref']!, guard),
  }),
  route({
    method: 'post',
    path: '/notebooks/cells/:ref/move',
    activity: 'cell move',
    body: moveBody,
    handle: ({ body: { notebook, ...to }, params }, ctx) => ctx.cells.move(notebook, params['ref']!, to),
  }),
  route({
    method: 'post',
    path: '/notebooks/cells/:ref/run',
    holds: true,
    access: 'run',
    activity: 'cell run',
    body: runBody,
    query: runQuery,
    handle: async ({ body, query, params, req, res }, ctx) => {
      if (body.dryRun ?? query.dryRun) return dryRunAnswer(ctx, body.notebook ?? query.notebook, { cell: params['ref']! });
      const handle = await ctx.cells.run(body.notebook ?? query.notebook, params['ref']!);
      const wait = body.wait ?? query.wait ?? false;
      const timeoutMs = body.timeoutMs ?? query.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;
      return respondRun(handle, { wait, timeoutMs, outputs: body.outputs ?? query.outputs ?? 'summary' }, req, res);
    },
  }),
  route({
    method: 'post',
    path: '/notebooks/cells/:ref/wait',
    holds: true,
    access: 'read',
    body: followBody,
    handle: async ({ body, params, req, res }, ctx) =>
      respondRun(
        await ctx.cells.follow(body.notebook, params['ref']!),
        { wait: true, timeoutMs: body.timeoutMs ?? DEFAULT_RUN_TIMEOUT_MS, outputs: body.outputs ?? 'summary' },
        req,
        res,
      ),
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
        // A notebook's HTML or SVG must not run as a page on the bridge's own origin.
        'Content-Security-Policy': "sandbox; default-src 'none'",
      });
      res.end(item.data);
    },
  }),
];

import { z } from 'zod';
import type { KeyedQueue } from '../core/keyedQueue';
import type { NotebookHost } from '../core/sessions';
import { executeScratchpad } from './execute';
import { route, type Route } from './route';

/** What the handlers work with; built once per server by the composition root. */
export interface RouteContext {
  host: NotebookHost;
  runs: KeyedQueue;
  version: string;
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

  route({
    method: 'post',
    path: '/notebooks/open',
    body: z.strictObject({
      path: z.string().min(1, 'give the absolute path of a notebook file'),
      kernel: z.enum(['builtin']).optional(),
    }),
    handle: async ({ body }, ctx) => ({ session: await ctx.host.open(body.path, { kernel: body.kernel }) }),
  }),
];

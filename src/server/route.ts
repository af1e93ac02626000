import type { IncomingMessage, ServerResponse } from 'node:http';
import { Router, type NextFunction, type Request, type Response } from 'express';
import type { z } from 'zod';
import type { AccessKind } from '../core/agents/accessPolicy';
import type { Author } from '../core/cells/checkpoints';
import { BridgeError } from '../core/bridgeError';
import { describeZodError } from '../core/text/inputErrors';
import { httpStatus, type OutcomeKind } from '../core/outcome';
import { MethodNotAllowed } from './errorResponses';

export type Method = 'get' | 'post' | 'patch' | 'delete';

/** What a handler receives: inputs already validated against the route's schemas. */
export interface RouteInput<B, Q> {
  body: B;
  query: Q;
  params: Record<string, string>;
  req: IncomingMessage;
  res: ServerResponse;
}

/**
 * A JSON answer with its outcome: a run's end, 504 for a wait that ran out, or a success other
 * than 200 (201 Created, 202 Accepted).
 */
export class Reply {
  constructor(
    readonly status: number,
    readonly body: unknown,
    readonly kind: OutcomeKind = 'ok',
  ) {}

  /** The answer of an outcome: its status follows from its kind. */
  static of(kind: OutcomeKind, body: unknown): Reply {
    return new Reply(httpStatus(kind), body, kind);
  }
}

/**
 * One row of the route table. A handler returns the JSON to send (200), a Reply, or nothing
 * after it wrote the response itself (event streams).
 */
export interface Route<Ctx, B = unknown, Q = unknown> {
  method: Method;
  path: string;
  body?: z.ZodType<B>;
  query?: z.ZodType<Q>;
  /** What the person's access policy sees (default: GET reads, other methods edit). */
  access?: AccessKind;
  /** The activity view's name for it (default: `METHOD path`). */
  activity?: string;
  /** Its answer can wait on a kernel, or stream: it counts against the client's held requests (heldRequests.ts). */
  holds?: true;
  /** What it does, for the person's prompt and the record, where its inputs do not say (default: them, as JSON). */
  describe?(input: RouteInput<B, Q>, ctx: Ctx, author: Author): string;
  handle(input: RouteInput<B, Q>, ctx: Ctx): unknown;
}

/** Declares a row with its input types inferred from its schemas. */
export function route<Ctx, B = undefined, Q = undefined>(r: Route<Ctx, B, Q>): Route<Ctx> {
  return r as unknown as Route<Ctx>;
}

/** A row's input checked against its schema (400 naming each bad field); no schema, no input. */
export function validate<T>(schema: z.ZodType<T> | undefined, value: unknown, where: string): T {
  if (!schema) return undefined as T;
  const result = schema.safeParse(value);
  if (!result.success) throw new BridgeError('bad_input', describeZodError(where, result.error));
  return result.data;
}

/** The parsed JSON body: `{}` when there was none; anything but an object or array is a 400. */
function jsonBody(req: Request): unknown {
  const body: unknown = req.body;
  if (body === undefined) return {};
  if (typeof body !== 'object' || body === null) throw new BridgeError('bad_input', 'The JSON body must be an object');
  return body;
}

/**
 * The route table on an express.Router that matches paths exactly (no trailing-slash or case
 * folding: clients call the paths as written). Literal paths are mounted before patterns, so
 * `/a/b` wins over `/a/:x`. HEAD is answered by the GET row. A request no row takes ends in a
 * 405 with Allow when its path exists under other methods, else in a 404.
 */
export function mountRoutes<Ctx>(rows: readonly Route<Ctx>[], ctx: Ctx): Router {
  const under = (prefix: string) =>
    rows
      .filter((r) => r.path === prefix.slice(0, -1) || r.path.startsWith(prefix))
      .map((r) => `${r.method.toUpperCase()} ${r.path}`);
  const router = Router({ caseSensitive: true, strict: true });
  const byPath = new Map<string, Route<Ctx>[]>();
  for (const row of rows) byPath.set(row.path, [...(byPath.get(row.path) ?? []), row]);
  const paths = [...byPath.keys()].sort((a, b) => Number(a.includes('/:')) - Number(b.includes('/:')));
  const allowed = new WeakMap<Request, string[]>();
  for (const path of paths) {
    const mounted = router.route(path);
    const methods = byPath.get(path)!.map((row) => row.method.toUpperCase());
    for (const row of byPath.get(path)!) mounted[row.method]((req: Request, res: Response) => serve(row, req, res, ctx));
    // Reached only when no row of this path took the method; a later pattern still may.
    mounted.all((req: Request, _res: Response, next: NextFunction) => {
      allowed.set(req, [...(allowed.get(req) ?? []), ...methods]);
      next();
    });
  }
  router.use((req: Request) => {
    const allow = allowed.get(req);
    if (allow) throw new MethodNotAllowed(allow, `${req.method} ${req.path} is not supported: use ${allow.join(' or ')}`);
    // Under a family of routes, the way forward is the family; elsewhere (`GET /`), every route.
    const family = `/${req.path.split('/')[1] ?? ''}/`;
    const routes = family.length > 2 ? under(family) : [];
    if (!routes.length)
      throw new BridgeError('not_found', `No route ${req.method} ${req.path}; the routes are listed in "routes"`, {
        routes: rows.map((r) => `${r.method.toUpperCase()} ${r.path}`),
      });
    throw new BridgeError('not_found', `No route ${req.method} ${req.path}; the routes under ${family} are listed in "routes"`, {
      routes,
    });
  });
  return router;
}

async function serve<Ctx>(row: Route<Ctx>, req: Request, res: Response, ctx: Ctx): Promise<void> {
  const body = validate(row.body, jsonBody(req), 'request body');
  const query = row.query ? validate(row.query, req.query, 'query') : undefined;
  const params = req.params as Record<string, string>;
  const result = await row.handle({ body, query, params, req, res }, ctx);
  if (res.headersSent) return;
  if (result instanceof Reply) res.status(result.status).json(result.body);
  else res.json(result ?? {});
}

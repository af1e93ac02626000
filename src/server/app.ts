import express from 'express';
import type { Log } from '../core/log';
import type { BearerCheck } from './bearerCheck';
import { refuseLoneSurrogates } from '../core/text/wellFormedText';
import { errorHandler } from './errorResponses';
import { mountRoutes, type Route } from './route';
import { requestLog, requireJsonBody, securityChecks } from './security';

export { listen, type RunningServer } from './listen';

export interface AppOptions<Ctx> {
  routes: readonly Route<Ctx>[];
  context: Ctx;
  token: () => string | null;
  port: () => number;
  bearer: BearerCheck;
  maxBodyBytes: number;
  log: Log;
}

/**
 * Every request takes one path, whose order is the security model: log, Host/Origin/token,
 * body type, body size and JSON, the route table (404/405), the row's schemas, then its
 * handler. Every error, whoever raised it, leaves as JSON `{detail}`.
 */
export function createApp<Ctx>(options: AppOptions<Ctx>): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // node:querystring: repeated keys become arrays, and the result has no prototype to reach.
  app.set('query parser', 'simple');
  app.use(requestLog(options.log));
  app.use(securityChecks(options));
  app.use(requireJsonBody(options.maxBodyBytes));
  // UTF-8 only (others are a 415), never inflated: a compressed body is a 415 too.
  app.use(express.json({ limit: options.maxBodyBytes, type: 'application/json', strict: false, inflate: false }));
  // Every string of every body (routes and MCP alike) may reach a cell or a kernel.
  app.use((req, _res, next) => {
    refuseLoneSurrogates(req.body);
    next();
  });
  app.use(mountRoutes(options.routes, options.context));
  app.use(errorHandler(options));
  return app;
}

import express from 'express';
import type { Log } from '../core/log';
import { errorHandler } from './errors';
import { mountRoutes, type Route } from './route';
import { jsonBodies } from './jsonBody';
import { requestLog, securityChecks } from './security';

export { listen, type RunningServer } from './listen';

export interface AppOptions<Ctx> {
  routes: readonly Route<Ctx>[];
  context: Ctx;
  token: () => string | null;
  port: () => number;
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
  app.use(jsonBodies(options.maxBodyBytes));
  app.use(mountRoutes(options.routes, options.context));
  app.use(errorHandler(options.log));
  return app;
}

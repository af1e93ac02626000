import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import type { Log } from '../core/log';
import { errorHandler } from './errors';
import { mountRoutes, type Route } from './route';
import { requestLog, requireJsonBody, securityChecks } from './security';

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
  app.use(requireJsonBody(options.maxBodyBytes));
  // UTF-8 only (others are a 415), never inflated: a compressed body is a 415 too.
  app.use(express.json({ limit: options.maxBodyBytes, type: 'application/json', strict: false, inflate: false }));
  app.use(mountRoutes(options.routes, options.context));
  app.use(errorHandler(options));
  return app;
}

export interface RunningServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Listens on loopback only; `port` 0 picks a free one. */
export function listen(app: express.Express, port: number, onPort: (port: number) => void): Promise<RunningServer> {
  // noDelay: each event of a stream goes out when it is written, not after the client's ACK.
  const server = createServer({ noDelay: true }, app);
  server.keepAliveTimeout = 5_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      const bound = (server.address() as AddressInfo).port;
      onPort(bound);
      resolve({
        port: bound,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeAllConnections();
          }),
      });
    });
  });
}

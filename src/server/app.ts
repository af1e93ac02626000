import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import { BridgeError } from '../core/errors';
import type { Log } from '../core/log';
import { mountRoutes, type Route } from './route';
import { requireJsonBody, securityMiddleware } from './security';

export interface AppOptions<Ctx> {
  routes: readonly Route<Ctx>[];
  context: Ctx;
  token: () => string | null;
  port: () => number;
  maxBodyBytes: number;
  log: Log;
}

/**
 * The middleware order is the security model: log, Host/Origin/token, body type, body size,
 * then the route table; every error, whoever raised it, leaves as JSON `{detail}`.
 */
export function createApp<Ctx>(options: AppOptions<Ctx>): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(requestLog(options.log));
  app.use(securityMiddleware(options));
  app.use(requireJsonBody);
  app.use(express.json({ limit: options.maxBodyBytes, type: 'application/json' }));
  mountRoutes(app, options.routes, options.context);
  app.use((req: Request) => {
    throw new BridgeError(404, `No route ${req.method} ${req.path}`);
  });
  app.use(errorHandler(options));
  return app;
}

function requestLog(log: Log) {
  return (req: Request, res: Response, next: NextFunction): void => {
    const started = performance.now();
    // The path only: a query string could carry anything a client put there.
    res.on('close', () => {
      const ms = (performance.now() - started).toFixed(1);
      log.info(`${req.method} ${req.path} → ${res.statusCode} (${ms} ms)${res.writableFinished ? '' : ' client closed'}`);
    });
    next();
  };
}

interface BodyParserError {
  type: string;
  status: number;
}
function isBodyParserError(e: unknown): e is BodyParserError {
  return typeof e === 'object' && e !== null && 'type' in e && 'status' in e;
}

function errorHandler(options: { maxBodyBytes: number; log: Log }) {
  return (error: unknown, req: Request, res: Response, _next: NextFunction): void => {
    let status = 500;
    let body: Record<string, unknown>;
    if (error instanceof BridgeError) {
      status = error.status;
      body = { detail: error.detail, ...error.extra };
    } else if (isBodyParserError(error) && error.type === 'entity.too.large') {
      status = 413;
      body = { detail: `Request body is larger than ${options.maxBodyBytes} bytes (setting agentBridge.maxBodyBytes)` };
    } else if (isBodyParserError(error) && error.type === 'entity.parse.failed') {
      status = 400;
      body = { detail: 'Malformed JSON body: send a JSON object' };
    } else if (isBodyParserError(error) && error.status >= 400 && error.status < 500) {
      status = error.status; // e.g. 415 for a charset other than UTF-8
      body = { detail: `Unreadable request body (${error.type}): send UTF-8 JSON` };
    } else {
      const message = error instanceof Error ? error.message : String(error);
      options.log.error(`${req.method} ${req.path} failed: ${error instanceof Error ? error.stack : message}`);
      body = { detail: `Internal error: ${message}` };
    }
    if (res.headersSent) {
      res.end();
      return;
    }
    res.status(status).json(body);
  };
}

export interface RunningServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Listens on loopback only; `port` 0 picks a free one. */
export function listen(app: express.Express, port: number, onPort: (port: number) => void): Promise<RunningServer> {
  const server: Server = createServer(app);
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

import { createServer, type IncomingMessage, type RequestListener, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BridgeError } from '../core/errors';
import type { Log } from '../core/log';
import { readJsonBody } from './body';
import { sendJson } from './respond';
import { Reply, validate, type Route } from './route';
import { MethodNotAllowed, Router } from './router';
import { checkRequest } from './security';

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
 * route (404/405), body type and size, the row's schemas, then its handler. Every error, whoever
 * raised it, leaves as JSON `{detail}`. Plain node:http, because an agent's scratchpad round trip
 * is about a millisecond and Express's layers added 0.7 ms to it (npm run bench, section 1).
 */
export function createApp<Ctx>(options: AppOptions<Ctx>): RequestListener {
  const router = new Router(options.routes);

  async function serve(req: IncomingMessage, res: ServerResponse, path: string, search: string): Promise<void> {
    checkRequest(req, path, options);
    const { row, params } = router.match(req.method ?? 'GET', path);
    const raw = await readJsonBody(req, options.maxBodyBytes);
    const body = validate(row.body, raw ?? {}, 'request body');
    const query = row.query ? validate(row.query, parseQuery(search), 'query') : undefined;
    const result = await row.handle({ body, query, params, req, res }, options.context);
    if (res.headersSent) return;
    if (result instanceof Reply) sendJson(res, result.status, result.body);
    else sendJson(res, 200, result ?? {});
  }

  return (req, res) => {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    logRequest(options.log, req, res, path);
    serve(req, res, path, q < 0 ? '' : url.slice(q + 1)).catch((error: unknown) => sendError(options.log, req, res, path, error));
  };
}

/** Method, path (never the query: it could carry anything a client put there), status and time. */
function logRequest(log: Log, req: IncomingMessage, res: ServerResponse, path: string): void {
  const started = performance.now();
  res.once('close', () => {
    const ms = (performance.now() - started).toFixed(1);
    log.info(`${req.method} ${path} → ${res.statusCode} (${ms} ms)${res.writableFinished ? '' : ' client closed'}`);
  });
}

/** Repeated keys become arrays, which the rows' schemas then refuse where one value is meant. */
function parseQuery(search: string): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {};
  for (const [key, value] of new URLSearchParams(search)) {
    const seen = query[key];
    query[key] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return query;
}

function sendError(log: Log, req: IncomingMessage, res: ServerResponse, path: string, error: unknown): void {
  if (res.headersSent) {
    // A stream already under way: all that is left is to end it.
    res.end();
    return;
  }
  if (!(error instanceof BridgeError)) {
    const message = error instanceof Error ? error.message : String(error);
    log.error(`${req.method} ${path} failed: ${error instanceof Error ? error.stack : message}`);
    sendJson(res, 500, { detail: `Internal error: ${message}` });
    return;
  }
  if (error instanceof MethodNotAllowed) res.setHeader('Allow', error.allow.join(', '));
  // An oversized body is left unread: close the connection rather than drain it.
  if (error.status === 413) res.setHeader('Connection', 'close');
  sendJson(res, error.status, { detail: error.detail, ...error.extra });
}

export interface RunningServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Listens on loopback only; `port` 0 picks a free one. */
export function listen(app: RequestListener, port: number, onPort: (port: number) => void): Promise<RunningServer> {
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

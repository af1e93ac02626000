import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { BridgeError } from '../core/bridgeError';
import { cutLine, type Log } from '../core/log';
import type { BearerCheck } from './bearerCheck';

/** Paths anyone on the machine may call: marimo's liveness probes, which carry no data. */
const PUBLIC_PATHS = new Set(['/health', '/healthz']);
const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '[::1]'];
/** Longest path a log line quotes: the rest is counted, not written (any client can send one). */
export const LOGGED_PATH_CHARS = 200;

export interface SecurityOptions {
  /** The port actually bound; Host must name it (DNS rebinding defence). */
  port: () => number;
  /** The per-window token, or null when the person turned the token off. */
  token: () => string | null;
  /** Compares a request's bearer token with it (one per window, built where the app is composed). */
  bearer: BearerCheck;
}

/** A path as a log line quotes it: at most LOGGED_PATH_CHARS, with how much was left out. */
export const loggedPath = (path: string) => cutLine(path, LOGGED_PATH_CHARS);

/** A request answered without error within this time is logged at debug level, the rest at info. */
export const QUIET_REQUEST_MS = 1_000;

/**
 * Method, path (never the query: it could carry anything a client put there), status and time.
 * Errors, slow answers and clients that left are logged at info; the rest at debug, as a line
 * written per request costs the extension host more than the rest of a quick run's own work
 * (SETUP.md, measured figures).
 */
export function requestLog(log: Log): RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    res.once('close', () => {
      const ms = performance.now() - started;
      const quiet = res.statusCode < 400 && ms < QUIET_REQUEST_MS && res.writableFinished;
      const line = `${req.method} ${loggedPath(req.path)} → ${res.statusCode} (${ms.toFixed(1)} ms)${res.writableFinished ? '' : ' client closed'}`;
      if (quiet) log.debug(line);
      else log.info(line);
    });
    next();
  };
}

/**
 * Host allowlist (421), loopback-only Origin (403; any Origin while the token is off), then the
 * bearer token (401), in that order;
 * the first that fails answers. Every request passes here before its route is even looked up.
 */
export function securityChecks(options: SecurityOptions): RequestHandler {
  const { bearer } = options;
  return (req: Request, _res: Response, next: NextFunction): void => {
    const port = options.port();
    const host = req.headers.host ?? '';
    if (!LOOPBACK_HOSTS.some((name) => host === `${name}:${port}`)) {
      throw new BridgeError('misdirected', `Host '${host}' is not allowed: connect to http://127.0.0.1:${port}`);
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !isLoopbackOrigin(origin)) {
      throw new BridgeError('forbidden', `Origin '${origin}' is not allowed: the bridge serves local tools, not web pages`);
    }
    const token = options.token();
    // Without the token, a page on any loopback origin (an output the bridge served, say) could
    // drive the bridge; agents and tools send no Origin.
    if (token === null && origin !== undefined) {
      throw new BridgeError(
        'forbidden',
        `Origin '${origin}' is not allowed while the token is off (agentBridge.requireToken): the bridge answers tools, not web pages`,
      );
    }
    if (token !== null && !PUBLIC_PATHS.has(req.path) && !bearer.matches(req.headers.authorization, token)) {
      // marimo's text when nothing was sent (its clients print it); a wrong one says where the
      // current token is, since it changes with every window (re)load.
      if (req.headers.authorization === undefined) throw new BridgeError('unauthorized', 'Authorization header required');
      throw new BridgeError('unauthorized', WRONG_TOKEN);
    }
    next();
  };
}

/**
 * Requests that carry a body must declare it as JSON (415 otherwise): a form post from a web
 * page, which skips the CORS preflight, can never be one. A declared length over the limit is a
 * 413 before a byte is read (express.json would read the whole body off first).
 */
export function requireJsonBody(limit: number): RequestHandler {
  return (req, _res, next) => {
    const length = req.headers['content-length'];
    if (req.headers['transfer-encoding'] === undefined && (length === undefined || length === '0')) return next();
    const type = req.headers['content-type'];
    if ((type ?? '').split(';', 1)[0]!.trim().toLowerCase() !== 'application/json')
      throw new BridgeError('unsupported_media', `Content-Type must be application/json (got ${type ?? 'none'})`);
    if (length !== undefined && Number(length) > limit) throw bodyTooLarge(limit);
    next();
  };
}

export const bodyTooLarge = (limit: number) =>
  new BridgeError('too_large', `Request body is larger than ${limit} bytes (setting agentBridge.maxBodyBytes)`);

const WRONG_TOKEN =
  'Wrong token: the Authorization header does not carry the current token (it changes when the VS Code window ' +
  'reloads). Get it from MARIMO_TOKEN in a new VS Code terminal, the "Agent Bridge: Copy Connection Info" ' +
  'command, or the bridge discovery file (<VS Code global storage>/agent-bridge.agent-bridge/bridges/, key "token"); ' +
  'send it as "Authorization: Bearer <token>".';

function isLoopbackOrigin(origin: string): boolean {
  try {
    const { hostname, protocol } = new URL(origin);
    return (protocol === 'http:' || protocol === 'https:') && LOOPBACK_HOSTS.includes(hostname);
  } catch {
    return false;
  }
}

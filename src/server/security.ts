import { createHash, timingSafeEqual } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { BridgeError } from '../core/errors';

/** Paths anyone on the machine may call: marimo's liveness probes, which carry no data. */
const PUBLIC_PATHS = new Set(['/health', '/healthz']);
const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '[::1]'];

export interface SecurityOptions {
  /** The port actually bound; Host must name it (DNS rebinding defence). */
  port: () => number;
  /** The per-window token, or null when the person turned the token off. */
  token: () => string | null;
}

/** Host allowlist (421), loopback-only Origin (403), then the bearer token (401), in that order. */
export function securityMiddleware(options: SecurityOptions) {
  return (req: Request, _res: Response, next: NextFunction): void => {
    const port = options.port();
    const host = req.headers.host ?? '';
    if (!LOOPBACK_HOSTS.some((name) => host === `${name}:${port}`)) {
      throw new BridgeError(421, `Host '${host}' is not allowed: connect to http://127.0.0.1:${port}`);
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !isLoopbackOrigin(origin)) {
      throw new BridgeError(403, `Origin '${origin}' is not allowed: the bridge serves local tools, not web pages`);
    }
    const token = options.token();
    if (token !== null && !PUBLIC_PATHS.has(req.path) && !bearerMatches(req.headers.authorization, token)) {
      throw new BridgeError(401, 'Authorization header required');
    }
    next();
  };
}

function isLoopbackOrigin(origin: string): boolean {
  try {
    const { hostname, protocol } = new URL(origin);
    return (protocol === 'http:' || protocol === 'https:') && ['127.0.0.1', 'localhost', '[::1]'].includes(hostname);
  } catch {
    return false;
  }
}

/** Constant-time: both sides are hashed to equal length before the comparison. */
function bearerMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  if (!match) return false;
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(match[1]!), digest(token));
}

/**
 * Requests that carry a body must declare it as JSON (415 otherwise): a form post from a web
 * page, which skips the CORS preflight, can never be one. Empty bodies need no type.
 */
export function requireJsonBody(req: Request, _res: Response, next: NextFunction): void {
  const length = req.headers['content-length'];
  const hasBody = req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  if (hasBody && !req.is('application/json')) {
    const type = req.headers['content-type'] ?? 'none';
    throw new BridgeError(415, `Content-Type must be application/json (got ${type})`);
  }
  next();
}

import { createServer, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { capConnections } from './connectionCap';

export interface RunningServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Most sockets open at once. Each is a file descriptor of the extension host, which every
 * extension in the window shares. At the cap an idle socket gives its slot to a new connection
 * (connectionCap.ts); a new one is closed at once only when every socket has a request in flight.
 */
export const MAX_CONNECTIONS = 256;

/**
 * A request's headers must arrive within this, checked every CHECK_MS: a socket that sends
 * nothing, or half its headers, is closed within 5 s (the cap makes room sooner when it is needed).
 */
export const HEADERS_TIMEOUT_MS = 4_000;
/** The whole request (headers and body, not the answer, which may stream for an hour). */
const REQUEST_TIMEOUT_MS = 30_000;
const CHECK_MS = 1_000;

export interface ListenOptions {
  maxConnections?: number;
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  checkMs?: number;
}

/** Listens on loopback only; `port` 0 picks a free one. */
export function listen(
  app: RequestListener,
  port: number,
  onPort: (port: number) => void,
  options: ListenOptions = {},
): Promise<RunningServer> {
  // noDelay: each event of a stream goes out when it is written, not after the client's ACK.
  const server = createServer({ noDelay: true, connectionsCheckingInterval: options.checkMs ?? CHECK_MS }, app);
  server.keepAliveTimeout = 5_000;
  server.headersTimeout = options.headersTimeoutMs ?? HEADERS_TIMEOUT_MS;
  server.requestTimeout = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  capConnections(server, options.maxConnections ?? MAX_CONNECTIONS);
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

/**
 * A request listener whose app is built on first use, or by `warm()`: the socket can listen
 * (and activation end) before Express, zod and the route table are loaded. Requests that come
 * earlier wait for the app; if it cannot be built they get a JSON 500 saying why.
 */
export function deferredApp(build: () => Promise<RequestListener>): RequestListener & { warm(): Promise<void> } {
  let app: RequestListener | undefined;
  let building: Promise<RequestListener> | undefined;
  const ready = () => (building ??= build().then((built) => (app = built)));
  const listener: RequestListener = (req, res) => {
    if (app) return app(req, res);
    ready().then(
      (built) => built(req, res),
      (error: unknown) => {
        const body = JSON.stringify({ detail: `Internal error: the server could not start: ${String(error)}` });
        res.writeHead(500, { 'Content-Type': 'application/json; charset=utf-8' }).end(body);
      },
    );
  };
  return Object.assign(listener, { warm: () => ready().then(() => undefined) });
}

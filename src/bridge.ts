import type { RequestListener } from 'node:http';
import type { Log } from './core/log';
import type { SessionInfo } from './core/model/notebookHost';
import type { BridgeAdvert, Discovery } from './discovery';
import { deferredApp, listen, type RunningServer } from './server/listen';
import { errorMessage } from './core/errorMessage';
import { randomHex } from './core/ids';

/** What the request handler of one server start is built with. */
export interface ServerParams {
  token: () => string | null;
  port: () => number;
  maxBodyBytes: number;
}

export interface BridgeOptions {
  version: string;
  log: Log;
  discovery: Discovery;
  settings: () => { port: number; requireToken: boolean; maxBodyBytes: number };
  /** Builds the request handler (Express, the route table, the services); called once the socket listens. */
  app: (server: ServerParams) => Promise<RequestListener>;
}

export interface ConnectionInfo {
  url: string;
  port: number;
  token: string | null;
}

/**
 * The HTTP server's lifecycle: start on loopback, advertise through the discovery files,
 * stop and withdraw them. The token lives as long as the window, across server restarts, so
 * terminals that already received it keep working.
 */
export class Bridge {
  private server: RunningServer | undefined;
  private startedAt = '';
  private readonly secret = randomHex(32);
  private token: string | null = null;

  constructor(private readonly options: BridgeOptions) {}

  get connection(): ConnectionInfo | undefined {
    if (!this.server) return undefined;
    return { url: `http://127.0.0.1:${this.server.port}`, port: this.server.port, token: this.token };
  }

  async start(): Promise<ConnectionInfo> {
    if (this.server) await this.stop();
    const settings = this.options.settings();
    this.token = settings.requireToken ? this.secret : null;
    let port = 0;
    // Express and the route table load once the socket listens: activation does not wait for them.
    const app = deferredApp(() =>
      this.options.app({ token: () => this.token, port: () => port, maxBodyBytes: settings.maxBodyBytes }),
    );
    this.server = await listen(app, settings.port, (bound) => (port = bound));
    setImmediate(
      () => void app.warm().catch((error: unknown) => this.options.log.error(`the server could not start: ${String(error)}`)),
    );
    this.startedAt = new Date().toISOString();
    this.options.log.info(`bridge listening on http://127.0.0.1:${port} (token ${this.token ? 'required' : 'off'})`);
    return this.connection!;
  }

  /**
   * (Re)writes the discovery files: after a start, and whenever the sessions change. `marimoVersion`
   * is the `version` they give (core/runs/marimoVersion.ts); the bridge's own is `bridgeVersion`.
   */
  publish(sessions: SessionInfo[], marimoVersion: string): void {
    const connection = this.connection;
    if (!connection) return;
    const advert: BridgeAdvert = {
      server: 'agent-bridge',
      version: marimoVersion,
      bridgeVersion: this.options.version,
      url: connection.url,
      host: '127.0.0.1',
      port: connection.port,
      pid: process.pid,
      token: connection.token,
      startedAt: this.startedAt,
      sessions,
    };
    try {
      this.options.discovery.publish(advert);
    } catch (error) {
      this.options.log.error(`could not write discovery files: ${errorMessage(error)}`);
    }
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.options.discovery.withdraw();
    await server?.close();
  }
}

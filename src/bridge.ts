import { randomBytes } from 'node:crypto';
import type { Gate } from './core/access';
import type { CellService } from './core/cells';
import { KeyedQueue } from './core/keyedQueue';
import { cappedLog, type Log } from './core/log';
import type { NotebookHost, SessionInfo } from './core/sessions';
import { Discovery, type BridgeAdvert } from './discovery';
import { lazyMcp } from './mcp/lazy';
import { deferredApp, listen, type RunningServer } from './server/listen';

export interface BridgeOptions {
  host: NotebookHost;
  cells: CellService;
  version: string;
  log: Log;
  discovery: Discovery;
  /** The person's access policy and the activity record. */
  access: Gate;
  settings: () => { port: number; requireToken: boolean; maxBodyBytes: number };
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
  private readonly secret = randomBytes(32).toString('hex');
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
    const services = {
      host: this.options.host,
      cells: this.options.cells,
      runs: new KeyedQueue(),
      version: this.options.version,
      access: this.options.access,
    };
    // Express and the route table load once the socket listens: activation does not wait for them.
    const app = deferredApp(async () => {
      const [{ createApp }, { routes }, { guardRoutes }] = await Promise.all([
        import('./server/app'),
        import('./server/routes'),
        import('./server/access'),
      ]);
      return createApp({
        routes: guardRoutes(routes),
        context: { ...services, serveMcp: lazyMcp },
        token: () => this.token,
        port: () => port,
        maxBodyBytes: settings.maxBodyBytes,
        log: cappedLog(this.options.log),
      });
    });
    this.server = await listen(app, settings.port, (bound) => (port = bound));
    setImmediate(
      () => void app.warm().catch((error: unknown) => this.options.log.error(`the server could not start: ${String(error)}`)),
    );
    this.startedAt = new Date().toISOString();
    this.options.log.info(`bridge listening on http://127.0.0.1:${port} (token ${this.token ? 'required' : 'off'})`);
    return this.connection!;
  }

  /** (Re)writes the discovery files: after a start, and whenever the sessions change. */
  publish(sessions: SessionInfo[]): void {
    const connection = this.connection;
    if (!connection) return;
    const advert: BridgeAdvert = {
      server: 'agent-bridge',
      version: this.options.version,
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
      this.options.log.error(`could not write discovery files: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.options.discovery.withdraw();
    await server?.close();
  }
}

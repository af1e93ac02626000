import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { SessionInfo } from './core/model/notebookHost';
import { writeFileAtomic } from './fsAtomic';

/** What our own discovery files say: everything an agent needs to connect, token included. */
export interface BridgeAdvert {
  server: 'agent-bridge';
  /** A marimo version, as the registry entry gives it (core/runs/marimoVersion.ts). */
  version: string;
  /** The bridge's own. */
  bridgeVersion: string;
  url: string;
  host: string;
  port: number;
  pid: number;
  token: string | null;
  startedAt: string;
  sessions: SessionInfo[];
}

/** marimo's server registry folder, resolved exactly as marimo and discover-servers.sh do. */
export function marimoRegistryDir(env: NodeJS.ProcessEnv = process.env, platform = process.platform): string {
  if (platform === 'win32') return join(env['USERPROFILE'] ?? homedir(), '.marimo', 'servers');
  const state = env['XDG_STATE_HOME']?.trim() ? env['XDG_STATE_HOME'] : join(homedir(), '.local', 'state');
  return join(state, 'marimo', 'servers');
}

/** The registry entry: marimo's keys exactly, never a secret (other users' tools read these). */
export function marimoRegistryEntry(advert: BridgeAdvert) {
  return {
    server_id: `${advert.host}:${advert.port}`,
    pid: advert.pid,
    host: advert.host,
    port: advert.port,
    base_url: '',
    started_at: advert.startedAt,
    version: advert.version,
  };
}

export function marimoRegistryFileName(host: string, port: number): string {
  return `${host}:${port}`.replace(/[:/]/g, '_') + '.json';
}

/** True while a process with this pid exists (EPERM: it exists, owned by someone else). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes what a bridge that died without stopping (a crashed or killed window) left behind:
 * its own file in `advertDir`, and the registry entry it wrote, recognised by that file's host,
 * port and pid, so no entry of marimo's or of a live window is touched. Returns the files removed.
 */
export function removeStaleEntries(advertDir: string, registryDir: string, alive = processAlive): string[] {
  let names: string[];
  try {
    names = readdirSync(advertDir).filter((n) => n.endsWith('.json'));
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const file = join(advertDir, name);
    const advert = readJson(file) as Partial<BridgeAdvert> | undefined;
    if (advert?.server !== 'agent-bridge' || typeof advert.pid !== 'number' || alive(advert.pid)) continue;
    if (typeof advert.host === 'string' && typeof advert.port === 'number') {
      const entry = join(registryDir, marimoRegistryFileName(advert.host, advert.port));
      if ((readJson(entry) as { pid?: unknown } | undefined)?.pid === advert.pid) {
        rmSync(entry, { force: true });
        removed.push(entry);
      }
    }
    rmSync(file, { force: true });
    removed.push(file);
  }
  return removed;
}

/**
 * Removes a file this process wrote, unless another has written it since: a window reloaded with
 * the same AGENT_BRIDGE_DISCOVERY_FILE, or a bridge now on our old port, must keep its advert
 * when this one goes (the old window's extension host can exit after the new one published).
 */
function removeIfOurs(file: string): void {
  if ((readJson(file) as { pid?: unknown } | undefined)?.pid === process.pid) rmSync(file, { force: true });
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Owns the files that let agents find this bridge. `publish` (re)writes them all; `withdraw`
 * removes them, and also runs at process exit, since a killed window never deactivates.
 */
export class Discovery {
  private written = new Set<string>();
  private readonly onExit = () => this.withdraw();

  constructor(
    private readonly ownFiles: readonly string[],
    private readonly registryDir: string,
  ) {
    process.once('exit', this.onExit);
  }

  publish(advert: BridgeAdvert): void {
    const registryFile = join(this.registryDir, marimoRegistryFileName(advert.host, advert.port));
    for (const stale of this.written) if (stale !== registryFile && !this.ownFiles.includes(stale)) removeIfOurs(stale);
    this.written = new Set();
    mkdirSync(this.registryDir, { recursive: true, mode: 0o700 });
    writeFileAtomic(registryFile, JSON.stringify(marimoRegistryEntry(advert)) + '\n');
    this.written.add(registryFile);
    const own = JSON.stringify(advert, null, 2) + '\n';
    for (const file of this.ownFiles) {
      writeFileAtomic(file, own);
      this.written.add(file);
    }
  }

  withdraw(): void {
    for (const file of this.written) removeIfOurs(file);
    this.written.clear();
  }

  dispose(): void {
    this.withdraw();
    process.off('exit', this.onExit);
  }
}

/**
 * A full garbage collection in the sandbox's extension host, asked from outside, so a check can read
 * what the host still holds rather than when V8 chose to collect. A kernel printing as fast as it can
 * leaves hundreds of MB of dead read buffers that V8 may keep for as long as the host stays idle
 * (+282 MB 20 s after a case in a CI run; +104 MB for 40 s in a local run, which one collection brought below
 * the level before the case).
 *
 * SIGUSR1 opens Node's inspector in the process; the sandbox's NODE_OPTIONS (`--inspect-port=0`)
 * put it on a free port, found among the process's listening sockets, and the DevTools protocol's
 * HeapProfiler.collectGarbage does the collection.
 */
import * as fs from 'node:fs';
import { WebSocket } from 'undici';
import { sleep } from '../src/core/sleep';

/** What the sandbox gives code-server's NODE_OPTIONS: an inspector opened later takes any free port. */
export const INSPECTOR_NODE_OPTIONS = '--inspect-port=0';

/** Where a /proc fd link points, or '' for an fd closed meanwhile. */
function linkTarget(link: string): string {
  try {
    return fs.readlinkSync(link);
  } catch {
    return '';
  }
}

/** Ports `pid` listens on (TCP over IPv4, loopback or any address). */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    const inode = /^socket:\[(\d+)\]$/.exec(linkTarget(`/proc/${pid}/fd/${fd}`))?.[1];
    if (inode) inodes.add(inode);
  }
  const ports: number[] = [];
  for (const line of fs.readFileSync(`/proc/${pid}/net/tcp`, 'utf8').split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f[3] === '0A' && f[9] && inodes.has(f[9])) ports.push(parseInt(f[1]!.split(':')[1]!, 16)); // 0A: LISTEN
  }
  return ports;
}

/** The inspector's WebSocket address once it listens (its /json/list answers), or undefined. */
async function inspectorUrl(pid: number, skipPorts: number[]): Promise<string | undefined> {
  for (const port of listeningPorts(pid).filter((p) => !skipPorts.includes(p))) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/json/list`, { signal: AbortSignal.timeout(2000) });
      const targets = (await res.json()) as { webSocketDebuggerUrl?: string }[];
      const url = Array.isArray(targets) ? targets[0]?.webSocketDebuggerUrl : undefined;
      if (url) return url;
    } catch {
      // not the inspector
    }
  }
  return undefined;
}

/**
 * Collects all garbage in `pid`'s V8 heap (`skipPorts`: ports known not to be the inspector, such as
 * the bridge's, which is never sent a stray request). Throws if the inspector cannot be reached.
 */
export async function collectGarbage(pid: number, skipPorts: number[]): Promise<void> {
  let url = await inspectorUrl(pid, skipPorts);
  if (!url) {
    process.kill(pid, 'SIGUSR1');
    for (let waited = 0; !url && waited < 5000; waited += 100) {
      await sleep(100);
      url = await inspectorUrl(pid, skipPorts);
    }
  }
  if (!url)
    throw new Error(`the inspector of process ${pid} did not open after SIGUSR1 (is NODE_OPTIONS ${INSPECTOR_NODE_OPTIONS}?)`);
  const ws = new WebSocket(url);
  try {
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener('open', () => resolve());
      ws.addEventListener('error', () => reject(new Error(`cannot connect to the inspector at ${url}`)));
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('HeapProfiler.collectGarbage did not answer in 30 s')), 30_000);
      ws.addEventListener('message', (e) => {
        if ((JSON.parse(String(e.data)) as { id?: number }).id !== 1) return;
        clearTimeout(timer);
        resolve();
      });
      ws.send(JSON.stringify({ id: 1, method: 'HeapProfiler.collectGarbage' }));
    });
  } finally {
    ws.close();
  }
}

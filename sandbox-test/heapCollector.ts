/**
 * A full garbage collection in the sandbox's extension host, asked from outside, so a check can read
 * what the host still holds rather than when V8 chose to collect. A kernel printing as fast as it can
 * leaves hundreds of MB of dead read buffers that V8 may keep for as long as the host stays idle
 * (+282 MB 20 s after a case in a CI run; +104 MB for 40 s in a local run, which one collection brought below
 * the level before the case).
 *
 * SIGUSR1 opens Node's inspector in the process, on Node's default port (VS Code strips NODE_OPTIONS
 * from the extension host, so no other port can be asked for). The inspector is found among the
 * process's own listening sockets, the DevTools protocol's HeapProfiler.collectGarbage collects, and
 * the inspector is closed again: another sandbox on the machine (a second harness or CI run) may be
 * waiting for the port, and retries its SIGUSR1 until it is free.
 */
import * as fs from 'node:fs';
import { WebSocket } from 'undici';
import { sleep } from '../src/core/sleep';

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

/** How long a collection waits for the inspector's port, which another sandbox's collection may hold. */
const OPEN_WAIT_MS = 60_000;

/** The inspector's address, opening it with SIGUSR1 (again while the port is another's). */
async function openInspector(pid: number, skipPorts: number[]): Promise<string> {
  for (const since = Date.now(); Date.now() - since < OPEN_WAIT_MS; await sleep(500)) {
    const url = await inspectorUrl(pid, skipPorts);
    if (url) return url;
    process.kill(pid, 'SIGUSR1'); // a no-op while it is opening; tried again once the port is free
  }
  throw new Error(`the inspector of process ${pid} did not open in ${OPEN_WAIT_MS / 1000} s after SIGUSR1 (is port 9229 held?)`);
}

/** One DevTools protocol session: `call` sends a method and resolves with its result. */
async function devtoolsSession(url: string): Promise<{ call(method: string, params?: object): Promise<unknown>; close(): void }> {
  const ws = new WebSocket(url);
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener('open', () => resolve());
    ws.addEventListener('error', () => reject(new Error(`cannot connect to the inspector at ${url}`)));
  });
  const waiting = new Map<number, (answer: { result?: unknown; error?: unknown }) => void>();
  ws.addEventListener('message', (e) => {
    const answer = JSON.parse(String(e.data)) as { id?: number; result?: unknown; error?: unknown };
    if (answer.id !== undefined) waiting.get(answer.id)?.(answer);
  });
  let last = 0;
  return {
    call: (method, params = {}) =>
      new Promise((resolve, reject) => {
        const id = ++last;
        const timer = setTimeout(() => reject(new Error(`${method} did not answer in 30 s`)), 30_000);
        waiting.set(id, (answer) => {
          clearTimeout(timer);
          waiting.delete(id);
          if (answer.error) reject(new Error(`${method}: ${JSON.stringify(answer.error)}`));
          else resolve(answer.result);
        });
        ws.send(JSON.stringify({ id, method, params }));
      }),
    close: () => ws.close(),
  };
}

/** Closes the inspector once this session has gone (close() waits for its sessions to end). */
const CLOSE_LATER = "setTimeout(() => process.getBuiltinModule('node:inspector').close(), 100), 'closing'";

/**
 * Collects all garbage in `pid`'s V8 heap (`skipPorts`: ports known not to be the inspector, such as
 * the bridge's, which is never sent a stray request), and closes the inspector again.
 */
export async function collectGarbage(pid: number, skipPorts: number[]): Promise<void> {
  const session = await devtoolsSession(await openInspector(pid, skipPorts));
  try {
    await session.call('HeapProfiler.collectGarbage');
    const closing = (await session.call('Runtime.evaluate', { expression: CLOSE_LATER })) as { exceptionDetails?: unknown };
    if (closing.exceptionDetails) throw new Error(`the inspector was not closed: ${JSON.stringify(closing.exceptionDetails)}`);
  } finally {
    session.close();
  }
}

/**
 * Servers the benchmark compares the extension host against, each in its own Node process:
 * - plain: the bridge's own server code without VS Code (scripts/bench/plainServer.ts);
 * - floor: node:http in front of the same kernel and nothing else (scripts/bench/floorServer.ts);
 * - bare: a node:http server answering /health, the floor of any HTTP round trip on this machine.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { REPO_ROOT } from '../../sandbox-test/vscode';

const TSX_LOADER = path.join(REPO_ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs');

export interface PlainServer {
  url: string;
  token: string;
  session: string;
  /** Session id of each generated notebook, by cell count. */
  notebooks: Record<string, string>;
  pid: number;
  stop(): void;
}

/** The floor and bare servers. */
export interface BareServer {
  url: string;
  pid: number;
  stop(): void;
}

function firstLine(child: ChildProcess, what: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start within 30 s`)), 30_000);
    child.once('exit', (code) => reject(new Error(`${what} exited with code ${code}`)));
    readline.createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      resolve(line);
    });
  });
}

/** Starts scripts/bench/<file> under tsx; it answers one JSON line, and stops when stdin closes (also when the benchmark dies). */
async function startTsx<T>(file: string, args: readonly string[], what: string): Promise<T & { stop(): void }> {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, path.join(__dirname, file), ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
    cwd: REPO_ROOT,
  });
  const info = JSON.parse(await firstLine(child, what)) as T;
  return { ...info, stop: () => child.stdin!.end() };
}

export function startPlainServer(kernelScript: string, sizes: readonly number[]): Promise<PlainServer> {
  return startTsx<Omit<PlainServer, 'stop'>>('plainServer.ts', [kernelScript, ...sizes.map(String)], 'the plain-node server');
}

export function startFloorServer(kernelScript: string): Promise<BareServer> {
  return startTsx<Omit<BareServer, 'stop'>>('floorServer.ts', [kernelScript], 'the floor server');
}

const BARE = `
const http = require('node:http');
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.end('{"status":"healthy","server":"bare"}');
  });
});
server.keepAliveTimeout = 5000;
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ url: 'http://127.0.0.1:' + server.address().port, pid: process.pid })));
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
`;

export async function startBareServer(): Promise<BareServer> {
  const child = spawn(process.execPath, ['-e', BARE], { stdio: ['pipe', 'pipe', 'inherit'] });
  const info = JSON.parse(await firstLine(child, 'the bare node:http server')) as Omit<BareServer, 'stop'>;
  return { ...info, stop: () => child.stdin!.end() };
}

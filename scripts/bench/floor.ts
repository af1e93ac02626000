/**
 * Two floors of an HTTP front on this machine, in a Node process of its own, over one
 * KernelProcess (the same kernel.py and Python as the bridge's): bare node:http and nothing else;
 * and Express with express.json and a Router holding bare handlers (the framework the bridge is
 * built on, without its checks, validation, queue or log). A GET gets a small JSON body; a POST
 * runs its `code` in scratchpad mode and answers marimo's event stream in one write with `done`.
 * The bridge's figure minus the Express floor's, taken in the same run, is what the bridge's own
 * code costs on top of its framework.
 *
 * Run as `tsx scripts/bench/floor.ts PYTHON KERNEL_PY`: prints {"url","expressUrl"} and serves until stdin closes.
 */
import { spawn } from 'node:child_process';
import { createServer, type RequestListener, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import * as readline from 'node:readline';
import express from 'express';
import { KernelProcess } from '../../src/kernels/builtin/kernelProcess';

const frame = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

async function serve(python: string, script: string): Promise<void> {
  const kernel = new KernelProcess({ python, script });
  await kernel.start();
  const health = (res: ServerResponse) => {
    res.setHeader('content-type', 'application/json; charset=utf-8');
    res.end('{"status":"healthy","server":"floor"}');
  };
  const execute = (code: string, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
    let events = '';
    void kernel
      .run(code, 'scratchpad', (o) => {
        if (o.kind === 'stream') events += frame(o.name, { data: o.text });
      })
      .then((r) => res.end(events + frame('done', { success: r.success })));
  };
  const bare: RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST') return health(res);
      execute((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { code: string }).code, res);
    });
  };
  const router = express.Router();
  router.get('/health', (_req, res) => health(res));
  router.post('/api/kernel/execute', (req, res) => execute((req.body as { code: string }).code, res));
  const app = express();
  app.use(express.json());
  app.use(router);
  const listen = (handler: RequestListener) =>
    new Promise<string>((resolve) => {
      const server = createServer({ noDelay: true, keepAliveTimeout: 60_000 }, handler);
      server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
    });
  const [url, expressUrl] = await Promise.all([listen(bare), listen(app)]);
  process.stdout.write(`${JSON.stringify({ url, expressUrl })}\n`);
  process.stdin.resume();
  process.stdin.on('end', () => {
    kernel.dispose();
    process.exit(0);
  });
}

/** Starts the floor server under tsx; `stop()` (or this process dying) closes its stdin, which ends it. */
export async function startFloor(
  python: string,
  script: string,
  repoRoot: string,
): Promise<{ url: string; expressUrl: string; pid: number; stop(): void }> {
  const loader = path.join(repoRoot, 'node_modules', 'tsx', 'dist', 'loader.mjs');
  const child = spawn(process.execPath, ['--import', loader, __filename, python, script], {
    stdio: ['pipe', 'pipe', 'inherit'],
    cwd: repoRoot,
  });
  const line = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the floor server did not start within 30 s')), 30_000);
    child.once('exit', (code) => reject(new Error(`the floor server exited with code ${code}`)));
    readline.createInterface({ input: child.stdout! }).once('line', (l) => (clearTimeout(timer), resolve(l)));
  });
  const { url, expressUrl } = JSON.parse(line) as { url: string; expressUrl: string };
  return { url, expressUrl, pid: child.pid!, stop: () => child.stdin!.end() };
}

if (require.main === module) {
  const [python, script] = process.argv.slice(2);
  if (!python || !script) throw new Error('usage: floor.ts PYTHON KERNEL_PY');
  serve(python, script).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}

/**
 * The floor of any HTTP front on this machine, in a Node process of its own: bare node:http and
 * nothing else (no checks, routing, validation, queue or log). A GET gets a small JSON body; a
 * POST runs its `code` in scratchpad mode on a KernelProcess over the same kernel.py and Python
 * as the bridge's, and answers marimo's event stream in one write with `done`. The bridge's
 * figure minus the floor's, taken in the same run, is what the bridge's HTTP stack costs.
 *
 * Run as `tsx scripts/bench/floor.ts PYTHON KERNEL_PY`: prints {"url"} and serves until stdin closes.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { KernelProcess } from '../../src/kernels/builtin/kernelProcess';

const frame = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

async function serve(python: string, script: string): Promise<void> {
  const kernel = new KernelProcess({ python, script });
  await kernel.start();
  const server = createServer({ noDelay: true, keepAliveTimeout: 60_000 }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST') {
        res.setHeader('content-type', 'application/json; charset=utf-8');
        res.end('{"status":"healthy","server":"floor"}');
        return;
      }
      const { code } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { code: string };
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
      let events = '';
      void kernel
        .run(code, 'scratchpad', (o) => {
          if (o.kind === 'stream') events += frame(o.name, { data: o.text });
        })
        .then((r) => res.end(events + frame('done', { success: r.success })));
    });
  });
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })}\n`);
  });
  process.stdin.resume();
  process.stdin.on('end', () => {
    kernel.dispose();
    process.exit(0);
  });
}

/** Starts the floor server under tsx; `stop()` (or this process dying) closes its stdin, which ends it. */
export async function startFloor(python: string, script: string, repoRoot: string): Promise<{ url: string; stop(): void }> {
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
  return { url: (JSON.parse(line) as { url: string }).url, stop: () => child.stdin!.end() };
}

if (require.main === module) {
  const [python, script] = process.argv.slice(2);
  if (!python || !script) throw new Error('usage: floor.ts PYTHON KERNEL_PY');
  serve(python, script).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  });
}

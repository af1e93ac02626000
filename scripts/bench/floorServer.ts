/**
 * The floor of any HTTP front to the builtin kernel on this machine: node:http and the same
 * BuiltinScratchpad over a KernelProcess, and nothing else (no checks, routing, validation,
 * queue or log). Every POST is an execute whose events leave in one write with `done`, which is
 * as few as there can be. The benchmark sets the bridge's overhead beside this server's: what is
 * left between the two is what the bridge's own path costs.
 *
 * `tsx scripts/bench/floorServer.ts KERNEL_PY` prints one JSON line {"url","pid"} and serves
 * until stdin closes.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KernelProcess } from '../../src/kernels/builtin/kernelProcess';
import { BuiltinScratchpad } from '../../src/kernels/builtin/scratchpad';
import { frameEvent } from '../../src/server/sse';

async function main(): Promise<void> {
  const [script] = process.argv.slice(2);
  if (!script) throw new Error('usage: floorServer.ts KERNEL_PY');
  const kernel = new KernelProcess({ python: 'python3', script });
  await kernel.start();
  const scratchpad = new BuiltinScratchpad(kernel);
  const never = new AbortController().signal;
  const server = createServer({ noDelay: true }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const { code } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { code: string };
      res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8' });
      let events = '';
      void scratchpad
        .executeScratchpad(code, (e) => (events += frameEvent(e.name, { data: e.text })), never)
        .then((result) => res.end(events + frameEvent('done', result)));
    });
  });
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}`, pid: process.pid })}\n`);
  });
  process.stdin.resume();
  process.stdin.on('end', () => {
    kernel.dispose();
    process.exit(0);
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

/**
 * The bridge's own server code in a plain Node process, without VS Code: src/server's app and
 * route table, the real BuiltinScratchpad over a KernelProcess, and the real NotebookCells over
 * the in-memory FakeNotebooks of the unit tests, holding the benchmark's generated notebooks.
 * The benchmark sends it the same requests as the extension host: the difference between the two
 * is what running inside VS Code costs (its event loop, its notebook API), not the bridge's code.
 *
 * `tsx scripts/bench/plainServer.ts KERNEL_PY SIZE...` prints one JSON line
 * {"url","token","session","notebooks":{size: sessionId}} and serves until stdin closes.
 */
import { KeyedQueue } from '../../src/core/keyedQueue';
import type { Log } from '../../src/core/log';
import { NotebookCells } from '../../src/core/notebookCells';
import { STDOUT_MIME } from '../../src/core/cellOutputs';
import type { NotebookHost } from '../../src/core/sessions';
import { BridgeError } from '../../src/core/errors';
import { KernelProcess } from '../../src/kernels/builtin/kernelProcess';
import { BuiltinScratchpad } from '../../src/kernels/builtin/scratchpad';
import { createApp, listen } from '../../src/server/app';
import { routes } from '../../src/server/routes';
import { FakeNotebooks } from '../../test/unit/fakes/notebooks';
import { makeNotebook } from './notebooks';

const silent: Log = { debug() {}, info() {}, warn() {}, error() {} };
const TOKEN = 'plain-node-bench-token';

interface NbCell {
  cell_type: string;
  source: string[];
  outputs?: { text: string[] }[];
}

async function main(): Promise<void> {
  const [script, ...sizes] = process.argv.slice(2);
  if (!script) throw new Error('usage: plainServer.ts KERNEL_PY SIZE...');
  const kernel = new KernelProcess({ python: 'python3', script });
  await kernel.start();
  const scratchpad = new BuiltinScratchpad(kernel);
  const session = {
    id: 's_plain0',
    path: '/bench/plain.ipynb',
    uri: 'file:///bench/plain.ipynb',
    notebookType: 'jupyter-notebook',
  };
  const host: NotebookHost = {
    sessions: async () => [session],
    kernelFor: async (id) => {
      if (id !== session.id) throw new BridgeError(404, `Invalid session id: ${id}`);
      return scratchpad;
    },
    open: async () => {
      throw new BridgeError(400, 'not in the plain-node baseline');
    },
  };
  const notebooks = new FakeNotebooks();
  const ids: Record<string, string> = {};
  const enc = new TextEncoder();
  for (const size of sizes.map(Number)) {
    const nb = makeNotebook(size) as { cells: NbCell[] };
    const sid = `s_list${String(size).padStart(4, '0')}`.slice(0, 8);
    notebooks.add(
      {
        sessionId: sid,
        uri: `file:///bench/list-${size}.ipynb`,
        path: `/bench/list-${size}.ipynb`,
        notebookType: 'jupyter-notebook',
        kernel: 'builtin',
      },
      nb.cells.map((c) => ({
        kind: c.cell_type === 'code' ? ('code' as const) : ('markup' as const),
        code: c.source.join(''),
        outputs: (c.outputs ?? []).map((o) => ({ items: [{ mime: STDOUT_MIME, data: enc.encode(o.text.join('')) }] })),
      })),
    );
    ids[size] = sid;
  }
  let port = 0;
  const app = createApp({
    routes,
    context: {
      host,
      cells: new NotebookCells(notebooks, { outputTextLimit: () => 20_000 }),
      runs: new KeyedQueue(),
      version: 'bench',
    },
    token: () => TOKEN,
    port: () => port,
    maxBodyBytes: 1024 * 1024,
    log: silent,
  });
  const server = await listen(app, 0, (p) => (port = p));
  process.stdout.write(
    JSON.stringify({
      url: `http://127.0.0.1:${server.port}`,
      token: TOKEN,
      session: session.id,
      notebooks: ids,
      pid: process.pid,
    }) + '\n',
  );
  process.stdin.resume();
  process.stdin.on('end', () => {
    kernel.dispose();
    void server.close().then(() => process.exit(0));
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});

import { strict as assert } from 'node:assert';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KeyedQueue } from '../../src/core/flow/keyedQueue';
import { ScratchpadOutputs } from '../../src/core/outputs/scratchpadOutputs';
import { serveExecute } from '../../src/server/execute';
import { FakeKernel, FakeNotebookHost } from './fakes/notebookHost';
import { FakeNotebooks } from './fakes/notebooks';
import { NOTHING_FOUND } from './fakes/app';
import { RiskChecks } from '../../src/core/cells/riskChecks';
import { Gate } from '../../src/core/agents/accessPolicy';

describe('execute with a client that stops reading', () => {
  let server: Server;
  let kernel: FakeKernel;

  before(async () => {
    // Prints that keep coming (16 MB over a few hundred ms), then a run that goes on until interrupted.
    const print = { name: 'stdout' as const, text: 'x'.repeat(65_536) };
    kernel = new FakeKernel({
      flood: {
        steps: [...Array.from({ length: 256 }, () => [print, { waitMs: 1 }]).flat(), { waitForAbort: true }],
        result: { success: true, status: 'succeeded', output: { mimetype: 'text/plain', data: '' } },
      },
    });
    const host = new FakeNotebookHost([
      { info: { id: 's_aaaaaa', path: '/a.ipynb', uri: 'file:///a.ipynb', notebookType: 'jupyter-notebook' }, kernel },
    ]);
    const risk = new RiskChecks(NOTHING_FOUND, new FakeNotebooks(), () => Gate.open());
    const deps = { host, runs: new KeyedQueue(), outputs: new ScratchpadOutputs(), risk };
    server = createServer(
      (req, res) => void serveExecute('flood', req, res, deps, { limits: { holdChars: 100_000, stallMs: 150 }, cap: Infinity }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('interrupts the run once the client read nothing for stallMs, and says so in the stream', async () => {
    const { port } = server.address() as AddressInfo;
    const body = await new Promise<string>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', headers: { 'marimo-session-id': 's_aaaaaa' } });
      req.on('response', (res) => {
        res.pause();
        const readLater = () => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
          res.resume();
        };
        // Read only once the run was interrupted (the fake records the abort).
        const poll = setInterval(() => {
          if (kernel.calls[0]?.aborted) {
            clearInterval(poll);
            readLater();
          }
        }, 20);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(kernel.calls[0]?.aborted, true);
    assert.match(body, /the client read nothing for 0\.15 s while output waited: the run was interrupted/);
    assert.match(body, /output events \(\d+ characters\) dropped here/);
    assert.ok(
      body.endsWith(
        'event: done\ndata: {"success":false,"status":"interrupted","output":{"mimetype":"text/plain","data":""}}\n\n',
      ),
    );
    // Of 16 MB printed: what the stream held (100 KB) plus what the sockets' buffers took.
    assert.ok(body.length < 8 * 1024 * 1024, `${body.length} characters reached the client`);
  });
});

import { strict as assert } from 'node:assert';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BenchClient } from '../../scripts/bench/client';

describe('the bench client (scripts/bench/client.ts) against a real node:http server', () => {
  let server: http.Server;
  let url: string;
  let connections = 0;

  before(async () => {
    server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8').on('data', (c: string) => (body += c));
      req.on('end', () => {
        if (req.url !== '/api/kernel/execute') {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ method: req.method, url: req.url, auth: req.headers.authorization ?? null, body }));
          return;
        }
        const { code } = JSON.parse(body) as { code: string };
        if (code === 'hang') return; // headers never come
        res.writeHead(code === 'refused' ? 404 : 200, { 'content-type': 'text/event-stream' });
        if (code === 'refused') return void res.end('{"detail":"Invalid session id"}');
        // Split mid-event and mid-character, as TCP may deliver it.
        const stream = `event: stdout\ndata: {"data":"é${req.headers['marimo-session-id']}\\n"}\n\nevent: stderr\ndata: {"data":"w"}\n\nevent: done\ndata: {"success":true}\n\n`;
        const bytes = Buffer.from(stream);
        res.write(bytes.subarray(0, 25));
        setTimeout(() => res.end(bytes.subarray(25)), 20);
      });
    });
    server.on('connection', () => connections++);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(() => new Promise((resolve) => server.close(resolve)));

  it('sends JSON with the token and keeps one connection', async () => {
    const client = new BenchClient(url, 'tok');
    const before = connections;
    const first = await client.request('PATCH', '/a?b=1', { x: 'é' });
    assert.equal(first.status, 200);
    assert.deepEqual(JSON.parse(first.text), { method: 'PATCH', url: '/a?b=1', auth: 'Bearer tok', body: '{"x":"é"}' });
    assert.ok(first.ms > 0);
    assert.equal(JSON.parse((await client.request('GET', '/2')).text).auth, 'Bearer tok');
    assert.equal(connections - before, 1);
    await client.close();
  });

  it('reads an execute stream split anywhere: stdout, stderr, done and its time', async () => {
    const client = new BenchClient(url, null);
    const r = await client.execute('s1', 'print(1)');
    assert.deepEqual([r.status, r.stdout, r.stderr, r.done, r.error], [200, 'és1\n', 'w', { success: true }, undefined]);
    assert.ok(r.ms >= 15, `done came after the second write: ${r.ms} ms`);
    await client.close();
  });

  it('reports a refused run without throwing', async () => {
    const client = new BenchClient(url, null);
    const r = await client.execute('s1', 'refused');
    assert.equal(r.status, 404);
    assert.match(r.error ?? '', /status 404: .*Invalid session id/);
    assert.ok(Number.isNaN(r.ms));
    await client.close();
  });

  it('gives up on a silent server after its timeout', async () => {
    const client = new BenchClient(url, null);
    const r = await client.execute('s1', 'hang', 100);
    assert.match(r.error ?? '', /timeout/i);
    assert.ok(Number.isNaN(r.ms));
    await client.close();
  });
});

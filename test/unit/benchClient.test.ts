import { strict as assert } from 'node:assert';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KeepAliveClient, ResponseParser } from '../../scripts/bench/client';

/** Feeds `bytes` to a parser in pieces of `step` bytes and records what it reported. */
function parse(bytes: string, step: number) {
  const seen = { status: 0, headers: new Map<string, string>(), body: '', ended: 0 };
  const parser = new ResponseParser({
    head: (status, headers) => {
      seen.status = status;
      seen.headers = new Map(headers);
    },
    body: (b) => (seen.body += b.toString('latin1')),
    end: () => seen.ended++,
  });
  const buf = Buffer.from(bytes, 'latin1');
  for (let at = 0; at < buf.length; at += step) parser.feed(buf.subarray(at, at + step));
  return { ...seen, done: parser.done };
}

const EVENTS = ['event: stdout\ndata: {"a":1}\n\n', 'event: done\ndata: {}\n\n'];
const CHUNKED =
  'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n' +
  `${EVENTS[0]!.length.toString(16)}\r\n${EVENTS[0]}\r\n` +
  `${EVENTS[1]!.length.toString(16)};ext=1\r\n${EVENTS[1]}\r\n` +
  '0\r\nX-Trailer: y\r\n\r\n';

describe('bench HTTP client', () => {
  describe('ResponseParser', () => {
    for (const step of [1, 2, 7, 1000]) {
      it(`decodes a chunked body fed ${step} byte(s) at a time`, () => {
        const r = parse(CHUNKED, step);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get('content-type'), 'text/event-stream');
        assert.equal(r.body, EVENTS.join(''));
        assert.deepEqual([r.ended, r.done], [1, true]);
      });
    }

    it('reads a Content-Length body, and an empty one', () => {
      const r = parse('HTTP/1.1 404 Not Found\r\nContent-Length: 5\r\n\r\nabcde', 3);
      assert.deepEqual([r.status, r.body, r.ended], [404, 'abcde', 1]);
      assert.deepEqual(parse('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n', 100).ended, 1);
    });

    it('refuses what the bridge never sends instead of guessing', () => {
      assert.throws(() => parse('HTTP/1.1 200 OK\r\n\r\n', 100), /neither Content-Length nor a chunked body/);
      assert.throws(() => parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', 100), /bad chunk size/);
      assert.throws(() => parse('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc', 100), /CRLF/);
      assert.throws(() => parse('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab', 100), /1 bytes after the end/);
      assert.throws(() => parse('SPDY 200\r\n\r\n', 100), /bad status line/);
    });
  });

  describe('KeepAliveClient against node:http', () => {
    let server: http.Server;
    let url: string;
    let connections: number;
    const handle = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => {
      if (req.url === '/close') {
        res.setHeader('Connection', 'close');
        res.end('{"bye":1}');
      } else if (req.url === '/cut') {
        res.writeHead(200, { 'Content-Type': 'text/event-stream' });
        res.write('event: stdout\ndata: {"data":"x"}\n\n', () => res.destroy());
      } else if (req.url === '/api/kernel/execute') {
        const { code } = JSON.parse(body) as { code: string };
        if (code === 'hang') return;
        res.writeHead(200, { 'Content-Type': 'text/event-stream' });
        res.write(`event: stdout\ndata: ${JSON.stringify({ data: code })}\n\n`);
        setTimeout(() => res.end('event: done\ndata: {"success":true,"output":{"data":"7"}}\n\n'), 5);
      } else res.end(JSON.stringify({ method: req.method, url: req.url, auth: req.headers.authorization ?? null, body }));
    };

    beforeEach(async () => {
      connections = 0;
      server = http.createServer((req, res) => {
        let body = '';
        req.setEncoding('utf8');
        req.on('data', (c: string) => (body += c)).on('end', () => handle(req, res, body));
      });
      server.on('connection', () => connections++);
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });

    afterEach(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });

    it('sends JSON with the token and keeps one connection for sequential and concurrent calls', async () => {
      const client = new KeepAliveClient(url, 'tok');
      const first = await client.request('PATCH', '/a?b=1', { x: 'é' });
      assert.equal(first.status, 200);
      assert.deepEqual(JSON.parse(first.body.toString()), {
        method: 'PATCH',
        url: '/a?b=1',
        auth: 'Bearer tok',
        body: '{"x":"é"}',
      });
      assert.ok(first.ms > 0);
      const both = await Promise.all([client.request('GET', '/1'), client.request('GET', '/2')]);
      assert.deepEqual(
        both.map((r) => (JSON.parse(r.body.toString()) as { url: string }).url),
        ['/1', '/2'],
      );
      assert.equal(connections, 1);
      client.close();
    });

    it('reads an execute stream: events, done and the times they came', async () => {
      const client = new KeepAliveClient(url, null);
      const r = await client.execute('s1', 'print(1)');
      assert.deepEqual([r.status, r.stdout, r.events, r.framingErrors, r.error], [200, 'print(1)', 2, 0, undefined]);
      assert.deepEqual(r.done, { success: true, output: { data: '7' } });
      assert.ok(r.headersMs <= r.firstEventMs && r.firstEventMs < r.doneMs && r.doneMs <= r.endMs, JSON.stringify(r));
      client.close();
    });

    it('opens a new connection after a Connection: close answer', async () => {
      const client = new KeepAliveClient(url, null);
      assert.equal((await client.request('GET', '/close')).status, 200);
      assert.equal((await client.request('GET', '/x')).status, 200);
      assert.equal(connections, 2);
      client.close();
    });

    it('reports a stream cut short, and the next call still works', async () => {
      const client = new KeepAliveClient(url, null);
      const r = await client.request('GET', '/cut').catch((e: Error) => e);
      assert.ok(r instanceof Error && /closed the connection before the response ended/.test(r.message), String(r));
      assert.equal((await client.request('GET', '/x')).status, 200);
      client.close();
    });

    it('gives up on a silent server after its timeout', async () => {
      const client = new KeepAliveClient(url, null);
      const r = await client.execute('s1', 'hang', { timeoutMs: 50 });
      assert.match(r.error ?? '', /no end of response within 50 ms/);
      assert.ok(Number.isNaN(r.doneMs));
      client.close();
    });
  });
});

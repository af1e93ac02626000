import { strict as assert } from 'node:assert';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { silentLog, startTestServer, TEST_TOKEN } from './fakes/app';
import type { RunningServer } from '../../src/server/app';
import { FakeKernel, FakeNotebookHost } from './fakes/notebookHost';
import { request } from './fakes/http';
import { sleep } from '../../src/core/sleep';
import { MARIMO_PROTOCOL_VERSION } from '../../src/core/runs/marimoVersion';

const TOKEN = TEST_TOKEN;
const done = (data = '') => ({ success: true, status: 'succeeded' as const, output: { mimetype: 'text/plain', data } });

describe('HTTP contract (fake notebook host)', () => {
  let server: RunningServer;
  let port = 0;
  let kernel: FakeKernel;
  let token: string | null;

  const auth = () => ({ authorization: `Bearer ${TOKEN}` });
  const execute = (code: unknown, extra: Record<string, string> = {}, session = 's_aaaaaa', abortAfterMs?: number) =>
    request(port, {
      method: 'POST',
      path: '/api/kernel/execute',
      headers: { ...auth(), 'content-type': 'application/json', 'marimo-session-id': session, ...extra },
      body: JSON.stringify({ code }),
      abortAfterMs,
    });
  /** A client that sends code and goes away after `ms`. */
  const executeThenLeave = (code: string, ms: number) => execute(code, {}, 's_aaaaaa', ms).catch(() => undefined);

  beforeEach(async () => {
    token = TOKEN;
    kernel = new FakeKernel({
      'print(2 + 2)': { steps: [{ name: 'stdout', text: '4\n' }], result: done() },
      '1 + 1': { steps: [], result: done('2') },
      raise: {
        steps: [{ name: 'stderr', text: 'Traceback...\nValueError: x\n' }],
        result: { success: false, status: 'failed', output: { mimetype: 'text/plain', data: '' } },
      },
      slow: { steps: [{ name: 'stdout', text: 'a' }, { waitMs: 150 }, { name: 'stdout', text: 'b' }], result: done() },
      forever: { steps: [{ name: 'stdout', text: 'started\n' }, { waitForAbort: true }], result: done() },
      crash: { steps: [{ throws: 'kernel went away' }], result: done() },
      héllo: { steps: [{ name: 'stdout', text: 'héllo ✓ 日本\n' }], result: done('"✓"') },
      // 32 MB of prints, far more than a stream holds for a client that is not reading.
      flood: {
        steps: Array.from({ length: 512 }, () => ({ name: 'stdout' as const, text: 'x'.repeat(65_536) })),
        result: done(),
      },
    });
    const host = new FakeNotebookHost([
      { info: { id: 's_aaaaaa', path: '/work/a.ipynb', uri: 'file:///work/a.ipynb', notebookType: 'jupyter-notebook' }, kernel },
      { info: { id: 's_bbbbbb', path: null, uri: 'untitled:Untitled-1.ipynb', notebookType: 'jupyter-notebook' }, kernel },
      { info: { id: 's_nokern', path: '/work/c.ipynb', uri: 'file:///work/c.ipynb', notebookType: 'jupyter-notebook' } },
    ]);
    server = await startTestServer({ host, token: () => token, maxBodyBytes: 2048 });
    port = server.port;
  });
  afterEach(() => server.close());

  describe('health', () => {
    for (const path of ['/health', '/healthz']) {
      it(`${path} answers without a token and contains "healthy"`, async () => {
        const res = await request(port, { path });
        assert.equal(res.status, 200);
        assert.match(res.headers['content-type'] ?? '', /^application\/json/);
        assert.ok(res.body.includes('"healthy"'));
        assert.equal(JSON.parse(res.body).status, 'healthy');
        // marimo-pair's skill reads `version` as marimo's (code mode since 0.21.1); the bridge's is its own key.
        assert.deepEqual(JSON.parse(res.body), {
          status: 'healthy',
          server: 'agent-bridge',
          version: MARIMO_PROTOCOL_VERSION,
          bridgeVersion: '0.0.0-test',
        });
      });
    }
  });

  describe('sessions', () => {
    it('lists notebooks that have a kernel, with filename = path, null for untitled', async () => {
      const res = await request(port, { path: '/api/sessions', headers: auth() });
      assert.equal(res.status, 200);
      assert.deepEqual(JSON.parse(res.body), {
        s_aaaaaa: { session_id: 's_aaaaaa', filename: '/work/a.ipynb', path: '/work/a.ipynb' },
        s_bbbbbb: { session_id: 's_bbbbbb', filename: null, path: null },
      });
    });
    it('requires the token', async () => {
      const res = await request(port, { path: '/api/sessions' });
      assert.equal(res.status, 401);
      assert.deepEqual(JSON.parse(res.body), { detail: 'Authorization header required' });
    });
    it('a wrong token is told apart from none, and told where the current one is', async () => {
      for (const authorization of ['Bearer not-the-token', 'Basic eDp5']) {
        const res = await request(port, { path: '/api/sessions', headers: { authorization } });
        assert.equal(res.status, 401);
        const detail = JSON.parse(res.body).detail as string;
        assert.match(detail, /^Wrong token: /);
        for (const where of ['MARIMO_TOKEN', 'Copy Connection Info', 'discovery file']) assert.ok(detail.includes(where), where);
        assert.ok(!detail.includes('not-the-token'), 'the presented token is not echoed');
      }
    });
  });

  describe('execute framing', () => {
    it('streams stdout then done, byte for byte', async () => {
      const res = await execute('print(2 + 2)');
      assert.equal(res.status, 200);
      assert.equal(res.headers['content-type'], 'text/event-stream; charset=utf-8');
      assert.equal(
        res.body,
        'event: stdout\ndata: {"data":"4\\n"}\n\nevent: done\ndata: {"success":true,"status":"succeeded","output":{"mimetype":"text/plain","data":""}}\n\n',
      );
    });
    it('puts the trailing value in done.output', async () => {
      const res = await execute('1 + 1');
      assert.equal(
        res.body,
        'event: done\ndata: {"success":true,"status":"succeeded","output":{"mimetype":"text/plain","data":"2"}}\n\n',
      );
    });
    it('sends errors on stderr and success false', async () => {
      const res = await execute('raise');
      assert.equal(
        res.body,
        'event: stderr\ndata: {"data":"Traceback...\\nValueError: x\\n"}\n\nevent: done\ndata: {"success":false,"status":"failed","output":{"mimetype":"text/plain","data":""}}\n\n',
      );
    });
    it('round-trips unicode as UTF-8', async () => {
      const res = await execute('héllo');
      assert.ok(res.body.startsWith('event: stdout\ndata: {"data":"héllo ✓ 日本\\n"}\n\n'));
    });
    it('ends a stream whose kernel threw with stderr and a failed done', async () => {
      const res = await execute('crash');
      assert.equal(res.status, 200);
      assert.equal(
        res.body,
        'event: stderr\ndata: {"data":"kernel went away\\n"}\n\nevent: done\ndata: {"success":false,"status":"failed","output":{"mimetype":"text/plain","data":""}}\n\n',
      );
    });
    it('never sends comments, ids or retries', async () => {
      const res = await execute('slow');
      for (const line of res.body.split('\n')) assert.match(line, /^(event: (stdout|stderr|done)|data: \{.*\}|)$/);
    });
  });

  describe('execute errors, in marimo order', () => {
    it('401 before anything else', async () => {
      const res = await request(port, {
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(res.status, 401);
      assert.equal(JSON.parse(res.body).detail, 'Authorization header required');
    });
    it('400 for a missing code before the session is checked', async () => {
      const res = await request(port, {
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { ...auth(), 'content-type': 'application/json' },
        body: '{}',
      });
      assert.equal(res.status, 400);
      assert.match(JSON.parse(res.body).detail, /code/);
    });
    it('400 for code that is not a string', async () => {
      const res = await execute(42);
      assert.equal(res.status, 400);
      assert.match(JSON.parse(res.body).detail, /^Invalid request body: code: /);
    });
    it('400 for malformed JSON', async () => {
      const res = await request(port, {
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { ...auth(), 'content-type': 'application/json', 'marimo-session-id': 's_aaaaaa' },
        body: '{"code":',
      });
      assert.equal(res.status, 400);
      assert.match(JSON.parse(res.body).detail, /Malformed JSON/);
    });
    it('400 Missing Marimo-Session-Id header', async () => {
      const res = await request(port, {
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { ...auth(), 'content-type': 'application/json' },
        body: '{"code":"1"}',
      });
      assert.equal(res.status, 400);
      assert.deepEqual(JSON.parse(res.body), { detail: 'Missing Marimo-Session-Id header' });
    });
    it('404 Invalid session id', async () => {
      const res = await execute('1', {}, 's_nope00');
      assert.equal(res.status, 404);
      assert.deepEqual(JSON.parse(res.body), { detail: 'Invalid session id: s_nope00' });
    });
    it('409 when the notebook has no kernel', async () => {
      const res = await execute('1', {}, 's_nokern');
      assert.equal(res.status, 409);
      assert.equal(res.headers['content-type']?.startsWith('application/json'), true);
    });
    it('413 for a body over the limit', async () => {
      const res = await execute('x'.repeat(4096));
      assert.equal(res.status, 413);
      assert.match(JSON.parse(res.body).detail, /larger than 2048 bytes/);
    });
    it('415 for a text/plain body', async () => {
      const res = await execute('1', { 'content-type': 'text/plain' });
      assert.equal(res.status, 415);
      assert.match(JSON.parse(res.body).detail, /application\/json/);
    });
  });

  describe('security', () => {
    it('421 for a forged Host', async () => {
      const res = await request(port, { path: '/health', headers: { host: 'evil.example:80' } });
      assert.equal(res.status, 421);
    });
    it('421 for the right name on the wrong port', async () => {
      const res = await request(port, { path: '/health', headers: { host: `127.0.0.1:${port + 1}` } });
      assert.equal(res.status, 421);
    });
    it('accepts localhost and [::1] Hosts', async () => {
      for (const host of [`localhost:${port}`, `[::1]:${port}`])
        assert.equal((await request(port, { path: '/health', headers: { host } })).status, 200);
    });
    it('403 for a foreign Origin, even with the token', async () => {
      const res = await request(port, { path: '/api/sessions', headers: { ...auth(), origin: 'https://evil.example' } });
      assert.equal(res.status, 403);
    });
    it('403 for an opaque Origin', async () => {
      assert.equal((await request(port, { path: '/api/sessions', headers: { ...auth(), origin: 'null' } })).status, 403);
    });
    it('allows a loopback Origin', async () => {
      assert.equal(
        (await request(port, { path: '/api/sessions', headers: { ...auth(), origin: `http://localhost:${port}` } })).status,
        200,
      );
    });
    it('401 for a wrong token', async () => {
      assert.equal((await request(port, { path: '/api/sessions', headers: { authorization: 'Bearer nope' } })).status, 401);
    });
    it('never takes the token from the query string', async () => {
      assert.equal((await request(port, { path: `/api/sessions?access_token=${TOKEN}` })).status, 401);
    });
    it('sends no CORS headers, not even on a preflight', async () => {
      const res = await request(port, {
        method: 'OPTIONS',
        path: '/api/kernel/execute',
        headers: { origin: `http://127.0.0.1:${port}`, 'access-control-request-method': 'POST' },
      });
      assert.equal(res.headers['access-control-allow-origin'], undefined);
      const ok = await request(port, { path: '/api/sessions', headers: auth() });
      assert.equal(
        Object.keys(ok.headers).some((h) => h.startsWith('access-control-')),
        false,
      );
    });
    it('with the token turned off, needs none but still checks Host and Origin', async () => {
      token = null;
      assert.equal((await request(port, { path: '/api/sessions' })).status, 200);
      assert.equal((await request(port, { path: '/api/sessions', headers: { host: 'evil.example' } })).status, 421);
      assert.equal((await request(port, { path: '/api/sessions', headers: { origin: 'http://evil.example' } })).status, 403);
    });
    it('with the token turned off, refuses every request that carries an Origin, loopback ones included', async () => {
      token = null;
      for (const origin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
        const res = await request(port, { path: '/api/sessions', headers: { origin } });
        assert.equal(res.status, 403, origin);
        assert.match(JSON.parse(res.body).detail, /token is off/);
      }
    });
    it('answers unknown routes with a JSON 404 listing the routes (GET / too)', async () => {
      for (const path of ['/nope', '/']) {
        const res = await request(port, { path, headers: auth() });
        assert.equal(res.status, 404);
        const body = JSON.parse(res.body);
        assert.match(body.detail, new RegExp(`No route GET ${path}; the routes are listed in "routes"`));
        for (const route of ['GET /health', 'POST /api/kernel/execute', 'GET /notebooks/cells', 'POST /mcp/server'])
          assert.ok(body.routes.includes(route), `${route} in ${res.body}`);
      }
    });

    it('tells an expired scratchpad output from an id no output had', async () => {
      const res = await request(port, { path: '/notebooks/scratchpad/outputs/nope', headers: auth() });
      assert.equal(res.status, 404);
      assert.match(JSON.parse(res.body).detail, /No output has the id nope: check the URL/);
    });
  });

  describe('request bodies and paths', () => {
    const post = (headers: Record<string, string>, body: string | Buffer) =>
      request(port, {
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { ...auth(), 'marimo-session-id': 's_aaaaaa', ...headers },
        body,
      });
    it('accepts a UTF-8 charset and a BOM, refuses other charsets and compressed bodies with 415', async () => {
      const ok = await post({ 'content-type': 'application/json; charset="UTF-8"' }, '\ufeff{"code":"1 + 1"}');
      assert.match(ok.body, /"data":"2"/);
      const latin1 = await post({ 'content-type': 'application/json; charset=latin1' }, '{"code":"1 + 1"}');
      assert.deepEqual(
        [latin1.status, JSON.parse(latin1.body).detail],
        [415, "Charset 'latin1' is not supported: send UTF-8 JSON"],
      );
      const gzip = await post({ 'content-type': 'application/json', 'content-encoding': 'gzip' }, '{"code":"1 + 1"}');
      assert.equal(gzip.status, 415);
    });
    it('a chunked body within the limit is read; an empty one is {}', async () => {
      const chunked = { 'content-type': 'application/json', 'transfer-encoding': 'chunked' };
      assert.match((await post(chunked, '{"code":"1 + 1"}')).body, /"data":"2"/);
      const empty = await post(chunked, '');
      assert.deepEqual(
        [empty.status, JSON.parse(empty.body).detail],
        [400, 'Invalid request body: code: "code" must be a string of Python source'],
      );
    });
    it('a POST without a body needs no Content-Type, and its body is {}', async () => {
      const res = await post({ 'content-length': '0', 'content-type': 'text/plain' }, '');
      assert.deepEqual(
        [res.status, JSON.parse(res.body).detail],
        [400, 'Invalid request body: code: "code" must be a string of Python source'],
      );
    });
    it('checks the declared length before the charset and the encoding', async () => {
      const res = await post(
        { 'content-type': 'application/json; charset=latin1', 'content-encoding': 'gzip', 'content-length': '4096' },
        'x'.repeat(4096),
      );
      assert.equal(res.status, 413);
    });
    it('413 for an oversized chunked body (no Content-Length), and closes that connection', async () => {
      const res = await request(port, {
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { ...auth(), 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
        body: JSON.stringify({ code: 'x'.repeat(4096) }),
      });
      assert.equal(res.status, 413);
      assert.equal(res.headers.connection, 'close');
      assert.equal(kernel.calls.length, 0);
    });
    it('a client that leaves halfway through its body is not an internal error', async () => {
      const errors: string[] = [];
      const own = await startTestServer({ log: { ...silentLog, error: (m) => errors.push(m) } });
      try {
        await new Promise<void>((resolve) => {
          const socket = connect(own.port, '127.0.0.1', () => {
            socket.write(
              `POST /api/kernel/execute HTTP/1.1\r\nHost: 127.0.0.1:${own.port}\r\nAuthorization: Bearer ${TOKEN}\r\n` +
                'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"code":',
            );
            setTimeout(() => socket.destroy(), 50);
          });
          socket.on('close', () => resolve());
        });
        await sleep(50);
        assert.deepEqual(errors, []);
      } finally {
        await own.close();
      }
    });
    it('400 for JSON that is not an object', async () => {
      const res = await post({ 'content-type': 'application/json' }, '"print(1)"');
      assert.deepEqual([res.status, JSON.parse(res.body).detail], [400, 'The JSON body must be an object']);
    });
    it('405 with Allow for a path that takes another method', async () => {
      const res = await request(port, { method: 'DELETE', path: '/api/sessions', headers: auth() });
      assert.deepEqual([res.status, res.headers.allow], [405, 'GET']);
      assert.match(JSON.parse(res.body).detail, /^DELETE \/api\/sessions is not supported: use GET$/);
    });
    it('answers HEAD from the GET row, without a body', async () => {
      const res = await request(port, { method: 'HEAD', path: '/health' });
      assert.deepEqual([res.status, res.body], [200, '']);
    });
    it('checks the token before telling a path exists', async () => {
      assert.equal((await request(port, { path: '/nope' })).status, 401);
    });
    it('parses a query key __proto__ as a plain key, refused like any unknown one', async () => {
      const res = await request(port, { path: '/notebooks/cells?__proto__=x&notebook=a', headers: auth() });
      assert.deepEqual(
        [res.status, JSON.parse(res.body).detail],
        [400, 'Invalid query: (root): Unrecognized key: "__proto__" (allowed: notebook, outputs, view)'],
      );
    });
    it('logs a long path from an unauthenticated client cut, with how much was left out', async () => {
      const lines: string[] = [];
      const own = await startTestServer({ log: { ...silentLog, info: (m) => lines.push(m) } });
      try {
        assert.equal((await request(own.port, { path: `/${'a'.repeat(15_000)}` })).status, 401);
        for (let i = 0; i < 50 && !lines.length; i++) await sleep(10);
        assert.equal(lines.length, 1);
        assert.ok(lines[0]!.length < 300, `log line of ${lines[0]!.length} chars`);
        assert.match(lines[0]!, /^GET \/a+… \(14801 more chars\) → 401 /);
      } finally {
        await own.close();
      }
    });
    it('logs a refused request at info, and a quick answered one at debug only', async () => {
      const lines: string[] = [];
      const log = { ...silentLog, info: (m: string) => lines.push(`info ${m}`), debug: (m: string) => lines.push(`debug ${m}`) };
      const own = await startTestServer({ log });
      try {
        assert.equal((await request(own.port, { path: '/api/sessions' })).status, 401);
        assert.equal((await request(own.port, { path: '/health' })).status, 200);
        for (let i = 0; i < 50 && lines.length < 2; i++) await sleep(10);
        assert.deepEqual(
          lines.map((l) => l.replace(/\(.*$/, '')),
          ['info GET /api/sessions → 401 ', 'debug GET /health → 200 '],
        );
      } finally {
        await own.close();
      }
    });
  });

  describe('runs', () => {
    it('runs one at a time per session, in arrival order', async () => {
      const [first, second] = await Promise.all([execute('slow'), execute('1 + 1')]);
      assert.equal(first.status, 200);
      assert.equal(second.status, 200);
      const [a, b] = kernel.calls;
      assert.equal(a!.code, 'slow');
      assert.ok(b!.started >= a!.ended, 'second run started before the first ended');
    });
    it('answers 200 to a run that waits its turn, before the turn comes', async () => {
      const first = execute('slow');
      await sleep(20);
      const queued = httpRequest({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/api/kernel/execute',
        headers: { ...auth(), 'content-type': 'application/json', 'marimo-session-id': 's_aaaaaa' },
        agent: false,
      });
      const status = await new Promise<[number | undefined, number]>((resolve, reject) => {
        queued.on('response', (res) => {
          resolve([res.statusCode, kernel.calls.length]);
          res.resume();
        });
        queued.on('error', reject);
        queued.end(JSON.stringify({ code: '1 + 1' }));
      });
      assert.deepEqual(status, [200, 1], 'no 200 before the queued run started');
      await first;
    });
    it('runs different sessions concurrently', async () => {
      await Promise.all([execute('slow'), execute('slow', {}, 's_bbbbbb')]);
      const [a, b] = kernel.calls;
      assert.ok(b!.started < a!.ended, 'sessions were serialized with each other');
    });
    it('never runs a queued run whose client went away while it waited', async () => {
      const first = execute('slow');
      await sleep(20);
      await executeThenLeave('1 + 1', 50);
      await first;
      const after = await execute('print(2 + 2)');
      assert.match(after.body, /"data":"4\\n"/);
      assert.deepEqual(
        kernel.calls.map((c) => c.code),
        ['slow', 'print(2 + 2)'],
      );
    });
    it('sends a client that does not read a capped answer, with where the whole output is', async () => {
      const body = await new Promise<string>((resolve, reject) => {
        const req = httpRequest({
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/kernel/execute',
          headers: { host: `127.0.0.1:${port}`, ...auth(), 'content-type': 'application/json', 'marimo-session-id': 's_aaaaaa' },
          agent: false,
        });
        req.on('response', (res) => {
          res.pause();
          setTimeout(() => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
            res.resume();
          }, 200);
        });
        req.on('error', reject);
        req.end(JSON.stringify({ code: 'flood' }));
      });
      // The answer is capped (head and tail), so what waits for the client is small whatever the run printed.
      assert.ok(body.length < 300_000, `${body.length} characters reached the client`);
      assert.match(
        body,
        /characters cut here, after character \d+; .* at http:\/\/127\.0\.0\.1:\d+\/notebooks\/scratchpad\/outputs\//,
      );
      assert.ok(
        body.endsWith(
          'event: done\ndata: {"success":true,"status":"succeeded","output":{"mimetype":"text/plain","data":""}}\n\n',
        ),
      );
    });
    it('interrupts the run when the client disconnects', async () => {
      await executeThenLeave('forever', 100);
      for (let i = 0; i < 50 && !kernel.calls[0]?.aborted; i++) await sleep(10);
      assert.equal(kernel.calls[0]?.aborted, true);
      const next = await execute('1 + 1');
      assert.match(next.body, /"data":"2"/);
    });
  });
});

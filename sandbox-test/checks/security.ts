/** Auth, Host/Origin, content type, body size and request validation (protocol.md §3–§5). */
import { eq, match, ok, show } from '../assert';
import { type HttpResult, responseLog } from '../http';
import { checkRun, suiteState } from './context';

/** Asserts a JSON error response `{"detail": ...}` with this status (and detail, when given). */
function expectError(r: HttpResult, status: number, detail?: string | RegExp): void {
  eq(r.status, status, `status (body ${show(r.text)})`);
  match(String(r.headers['content-type']), /^application\/json/, 'content-type of the error');
  const body = r.json();
  ok(typeof body?.detail === 'string' && body.detail.length > 0, `no "detail" string in ${show(r.text)}`);
  if (typeof detail === 'string') eq(body.detail, detail, 'detail');
  else if (detail) match(body.detail, detail, 'detail');
}

/** The `security` suite's checks. */
export function securityChecks(): void {
  const ctx = suiteState((c) => ({ sid: c.analysis.session.id }));
  const execBody = { code: "print('must not run')" };
  /** A POST to the execute route with `body` sent as it is, under `contentType`. */
  const postRaw = (body: string, contentType: string, signal: AbortSignal) =>
    ctx.client.request({
      method: 'POST',
      path: '/api/kernel/execute',
      body,
      contentType,
      headers: { 'marimo-session-id': ctx.sid },
      signal,
    });

  it('security: no token → 401 "Authorization header required"', async () => {
    const { signal } = checkRun();
    expectError(await ctx.client.get('/api/sessions', { token: null, signal }), 401, 'Authorization header required');
    const r = await ctx.client.post('/api/kernel/execute', execBody, {
      token: null,
      signal,
      headers: { 'marimo-session-id': ctx.sid },
    });
    expectError(r, 401, 'Authorization header required');
  });

  it('security: wrong token → 401', async () => {
    const { signal } = checkRun();
    const wrong = ctx.advert.token ? ctx.advert.token.replace(/.$/, (c) => (c === '0' ? '1' : '0')) : 'wrong';
    expectError(await ctx.client.get('/api/sessions', { token: wrong, signal }), 401, /^Wrong token: .*Copy Connection Info/);
    expectError(
      await ctx.client.get('/api/sessions', {
        token: null,
        headers: { authorization: `Basic ${Buffer.from(`x:${wrong}`).toString('base64')}` },
        signal,
      }),
      401,
    );
  });

  it('security: token in the query string is not accepted', async () => {
    const { signal } = checkRun();
    ok(ctx.advert.token, 'the bridge has no token (agentBridge.requireToken off?)');
    expectError(await ctx.client.get(`/api/sessions?access_token=${ctx.advert.token}`, { token: null, signal }), 401);
  });

  it('security: forged Host → 421', async () => {
    const { signal } = checkRun();
    expectError(await ctx.client.get('/api/sessions', { host: `evil.example:${ctx.client.port}`, signal }), 421);
    expectError(await ctx.client.get('/health', { host: `attacker.test`, signal }), 421);
    expectError(await ctx.client.get('/api/sessions', { host: `127.0.0.1:${ctx.client.port + 1}`, signal }), 421);
  });

  it('security: loopback Host names are accepted (127.0.0.1, localhost, [::1])', async () => {
    const { signal } = checkRun();
    for (const host of [`127.0.0.1:${ctx.client.port}`, `localhost:${ctx.client.port}`, `[::1]:${ctx.client.port}`]) {
      const r = await ctx.client.get('/api/sessions', { host, signal });
      eq(r.status, 200, `status with Host ${host}`);
    }
  });

  it('security: foreign Origin → 403, and nothing runs', async () => {
    const { signal } = checkRun();
    expectError(await ctx.client.get('/api/sessions', { origin: 'https://evil.example', signal }), 403);
    const r = await ctx.client.post('/api/kernel/execute', execBody, {
      origin: 'http://192.168.1.5:8080',
      headers: { 'marimo-session-id': ctx.sid },
      signal,
    });
    expectError(r, 403);
    expectError(await ctx.client.get('/api/sessions', { origin: 'null', signal }), 403);
  });

  it('security: loopback Origin is allowed', async () => {
    const { signal } = checkRun();
    for (const origin of ['http://localhost:5173', `http://127.0.0.1:${ctx.client.port}`]) {
      eq((await ctx.client.get('/api/sessions', { origin, signal })).status, 200, `status with Origin ${origin}`);
    }
  });

  it('security: POST with text/plain → 415', async () => {
    const { signal } = checkRun();
    expectError(await postRaw(JSON.stringify(execBody), 'text/plain', signal), 415);
  });

  it('security: body over 1 MiB → 413', async () => {
    const { signal } = checkRun();
    const r = await ctx.client.post(
      '/api/kernel/execute',
      { code: `# ${'x'.repeat(1_100_000)}` },
      { headers: { 'marimo-session-id': ctx.sid }, signal },
    );
    expectError(r, 413);
  });

  it('security: missing Marimo-Session-Id → 400', async () => {
    const { signal } = checkRun();
    expectError(await ctx.client.post('/api/kernel/execute', execBody, { signal }), 400, 'Missing Marimo-Session-Id header');
  });

  it('security: unknown session → 404 "Invalid session id: s_nope00", naming the open notebooks', async () => {
    const { signal } = checkRun();
    const r = await ctx.client.post('/api/kernel/execute', execBody, { headers: { 'marimo-session-id': 's_nope00' }, signal });
    expectError(
      r,
      404,
      /^Invalid session id: s_nope00; the open notebooks are .*\(GET \/api\/sessions lists those a kernel serves\)$/,
    );
  });

  it('security: missing or non-string code → 400', async () => {
    const { signal } = checkRun();
    for (const body of [{}, { code: 42 }]) {
      expectError(await ctx.client.post('/api/kernel/execute', body, { headers: { 'marimo-session-id': ctx.sid }, signal }), 400);
    }
  });

  it('security: malformed JSON → 400', async () => {
    const { signal } = checkRun();
    expectError(await postRaw('{"code": "print(1)"', 'application/json', signal), 400);
  });

  it('security: no Access-Control-Allow-Origin header on any response', async () => {
    const { signal } = checkRun();
    // A preflight from a loopback origin, plus every response seen so far in this run.
    await ctx.client.request({
      method: 'OPTIONS',
      path: '/api/kernel/execute',
      origin: 'http://localhost:5173',
      token: null,
      headers: { 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,marimo-session-id' },
      signal,
    });
    ok(responseLog.length >= 20, `only ${responseLog.length} responses recorded`);
    const offenders = responseLog.filter((r) => Object.keys(r.headers).some((k) => k.startsWith('access-control-')));
    ok(offenders.length === 0, `CORS headers on: ${offenders.map((o) => `${o.method} ${o.path} ${o.status}`).join(', ')}`);
  });
}

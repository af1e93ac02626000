import { strict as assert } from 'node:assert';
import { createApp, listen, type RunningServer } from '../../src/server/app';
import { BearerCheck } from '../../src/server/bearerCheck';
import { route, type Method } from '../../src/server/route';
import { silentLog } from './fakes/app';
import { request } from './fakes/http';

/** Each row answers with its own name and the params it was given. */
const row = (method: Method, path: string) =>
  route<null>({ method, path, handle: ({ params }) => ({ row: `${method} ${path}`, params }) });
const rows = [
  row('get', '/notebooks/cells'),
  row('get', '/notebooks/cells/:ref'),
  row('patch', '/notebooks/cells/:ref'),
  row('get', '/notebooks/cells/:ref/outputs/:output/:item'),
  row('get', '/notebooks/cells/first'),
];

describe('route table on the router', () => {
  let server: RunningServer;
  const call = async (method: string, path: string) => {
    const res = await request(server.port, { method, path });
    return { status: res.status, allow: res.headers.allow, body: res.body ? JSON.parse(res.body) : undefined };
  };

  before(async () => {
    let port = 0;
    const app = createApp({
      routes: rows,
      context: null,
      token: () => null,
      port: () => port,
      bearer: new BearerCheck(),
      maxBodyBytes: 1024,
      log: silentLog,
    });
    server = await listen(app, 0, (p) => (port = p));
  });
  after(() => server.close());

  it('finds literal rows and binds decoded params', async () => {
    assert.deepEqual((await call('GET', '/notebooks/cells')).body, { row: 'get /notebooks/cells', params: {} });
    assert.deepEqual((await call('GET', '/notebooks/cells/c%201/outputs/0/2')).body, {
      row: 'get /notebooks/cells/:ref/outputs/:output/:item',
      params: { ref: 'c 1', output: '0', item: '2' },
    });
    assert.deepEqual((await call('PATCH', '/notebooks/cells/-1')).body.params, { ref: '-1' });
  });

  it('prefers a literal row over a pattern that also fits, whatever the table order', async () => {
    assert.equal((await call('GET', '/notebooks/cells/first')).body.row, 'get /notebooks/cells/first');
  });

  it('lets a pattern take a method the literal path does not have', async () => {
    assert.equal((await call('PATCH', '/notebooks/cells/first')).body.row, 'patch /notebooks/cells/:ref');
  });

  it('answers HEAD from the GET row', async () => {
    const res = await request(server.port, { method: 'HEAD', path: '/notebooks/cells/x' });
    assert.deepEqual([res.status, res.body], [200, '']);
  });

  it('405 with Allow naming the methods the path takes', async () => {
    const res = await call('DELETE', '/notebooks/cells/x');
    assert.deepEqual([res.status, res.allow], [405, 'GET, PATCH']);
    assert.equal(res.body.detail, 'DELETE /notebooks/cells/x is not supported: use GET or PATCH');
  });

  it('404 for paths no row fits: empty params, extra segments, trailing slashes, other case', async () => {
    for (const path of ['/notebooks/cells/', '/notebooks/cells/x/y', '/notebooks/cells//outputs/0/1', '/Notebooks/cells'])
      assert.equal((await call('GET', path)).status, 404, path);
  });

  it('400 for a param that is not valid percent-encoding', async () => {
    const res = await call('GET', '/notebooks/cells/%ZZ');
    assert.deepEqual([res.status, res.body.detail], [400, "Malformed percent-encoding in the path segment '%ZZ'"]);
  });
});

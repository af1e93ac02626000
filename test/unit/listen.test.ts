import { strict as assert } from 'node:assert';
import type { RequestListener } from 'node:http';
import { deferredApp, listen } from '../../src/server/listen';
import { request } from './fakes/http';

describe('deferred app', () => {
  it('listens before the app is built, and serves early requests once it is', async () => {
    let builds = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const app = deferredApp(async () => {
      builds++;
      await gate;
      const serve: RequestListener = (_req, res) => res.end('built');
      return serve;
    });
    const server = await listen(app, 0, () => undefined);
    try {
      const early = request(server.port, { path: '/' });
      await new Promise((r) => setTimeout(r, 20));
      release();
      assert.equal((await early).body, 'built');
      await app.warm();
      assert.equal((await request(server.port, { path: '/' })).body, 'built');
      assert.equal(builds, 1);
    } finally {
      await server.close();
    }
  });

  it('answers a JSON 500 saying why when the app cannot be built', async () => {
    const server = await listen(
      deferredApp(() => Promise.reject(new Error('no express'))),
      0,
      () => undefined,
    );
    try {
      const res = await request(server.port, { path: '/health' });
      assert.deepEqual(
        [res.status, JSON.parse(res.body).detail],
        [500, 'Internal error: the server could not start: Error: no express'],
      );
    } finally {
      await server.close();
    }
  });
});

import { strict as assert } from 'node:assert';
import type { RequestListener } from 'node:http';
import { connect, type Socket } from 'node:net';
import { deferredApp, listen } from '../../src/server/listen';
import { request } from './fakes/http';
import { sleep } from '../../src/core/sleep';

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
      await sleep(20);
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

describe('connection cap', () => {
  it('closes connections past the cap at once; once some close, new ones are served', async () => {
    const serve: RequestListener = (_req, res) => res.end('ok');
    const server = await listen(serve, 0, () => undefined, 3);
    const idle: Socket[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const socket = connect(server.port, '127.0.0.1');
        await new Promise((r) => socket.once('connect', r));
        idle.push(socket);
      }
      await sleep(50);
      const over = connect(server.port, '127.0.0.1');
      over.on('error', () => undefined);
      await new Promise((r) => over.once('close', r)); // dropped by the server, not left hanging
      idle.pop()!.destroy();
      await sleep(50);
      assert.equal((await request(server.port, { path: '/' })).body, 'ok');
    } finally {
      for (const socket of idle) socket.destroy();
      await server.close();
    }
  });
});

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
  /** Sockets opened and connected, each sending nothing until told. */
  const open = async (port: number, n: number): Promise<Socket[]> => {
    const out: Socket[] = [];
    for (let i = 0; i < n; i++) {
      const socket = connect(port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.resume(); // read what the server sends (a 408), so its close is seen
      await new Promise((r) => socket.once('connect', r));
      out.push(socket);
    }
    return out;
  };
  const closed = (socket: Socket) => new Promise<void>((r) => (socket.destroyed ? r() : socket.once('close', () => r())));

  it('at the cap, a new connection takes the slot of a socket that sent nothing; sockets with a request in flight keep theirs', async () => {
    const held: (() => void)[] = [];
    // '/hold' answers when the test says; anything else at once.
    const serve: RequestListener = (req, res) => (req.url === '/hold' ? held.push(() => res.end('held')) : res.end('ok'));
    const server = await listen(serve, 0, () => undefined, { maxConnections: 3 });
    const sockets: Socket[] = [];
    try {
      const holding = [request(server.port, { path: '/hold' })];
      while (held.length < 1) await sleep(10);
      sockets.push(...(await open(server.port, 2)));
      assert.equal((await request(server.port, { path: '/' })).body, 'ok', 'served at the cap');
      await closed(sockets[0]!); // the oldest silent socket gave its slot
      holding.push(request(server.port, { path: '/hold' }), request(server.port, { path: '/hold' }));
      while (held.length < 3) await sleep(10);
      // Every slot has a request in flight: a new connection is closed at once, not left hanging.
      const over = connect(server.port, '127.0.0.1');
      over.on('error', () => undefined);
      await closed(over);
      for (const release of held) release();
      assert.deepEqual(
        (await Promise.all(holding)).map((r) => r.body),
        ['held', 'held', 'held'],
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      await server.close();
    }
  });

  it('closes a socket that sends nothing, or half its headers, after the headers timeout; a long answer is not cut', async () => {
    const serve: RequestListener = (_req, res) => {
      res.write('a');
      setTimeout(() => res.end('b'), 1_500);
    };
    const server = await listen(serve, 0, () => undefined, { headersTimeoutMs: 300, requestTimeoutMs: 500, checkMs: 100 });
    try {
      const [silent, half] = await open(server.port, 2);
      half!.write('GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      await Promise.all([closed(silent!), closed(half!)]);
      assert.equal((await request(server.port, { path: '/' })).body, 'ab', 'an answer longer than the request timeout');
    } finally {
      await server.close();
    }
  });
});

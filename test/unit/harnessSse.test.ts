import { strict as assert } from 'node:assert';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { BridgeClient } from '../../sandbox-test/http';

describe("the harness's event-stream reader (sandbox-test/http.ts) against a real node:http server", () => {
  let server: http.Server;
  let client: BridgeClient;
  const bodies: Record<string, string[]> = {
    // Split mid-line and mid-character, as TCP may deliver it.
    '/good': ['event: stdout\ndata: {"data":"é', '1\\n"}\n\n: running 5 s\n\nevent: done\nda', 'ta: {"success":true}\n\n'],
    '/bad': [
      ': a comment\n\nid: 7\nevent: stdout\ndata: {"data":"x"}\n\ndata: {"a":1}\n\nevent: stdout\r\ndata: nope\r\n\r\nevent: done\ndata: {}\n\nleft over',
    ],
  };

  before(async () => {
    server = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const parts = [...bodies[req.url!]!];
      const next = () => (parts.length > 1 ? res.write(parts.shift()!) && setTimeout(next, 5) : res.end(parts.shift()));
      req.resume().on('end', next);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new BridgeClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, null);
  });

  after(() => new Promise((resolve) => server.close(resolve)));

  it('parses marimo framing split anywhere', async () => {
    const r = await client.stream({ path: '/good' }).result;
    assert.deepEqual(
      r.events.map((e) => [e.event, e.data]),
      [
        ['stdout', { data: 'é1\n' }],
        ['done', { success: true }],
      ],
    );
    assert.deepEqual([r.stdout, r.framingErrors, r.trailing], ['é1\n', [], '']);
    assert.deepEqual(
      r.heartbeats.map((h) => h.text),
      ['running 5 s'],
      "the bridge's heartbeat is not a framing error",
    );
  });

  it('reports every departure from it: comment, id, no event name, CR, data that is not JSON, bytes left over', async () => {
    const r = await client.stream({ path: '/bad' }).result;
    const errors = r.framingErrors.join('\n');
    for (const what of ['comment', '"id":"7"', '"data":"{\\"a\\":1}"', 'CR in the stream', 'data is not JSON: "nope"'])
      assert.ok(errors.includes(what), `${what} not in:\n${errors}`);
    assert.equal(r.trailing, 'left over');
  });
});

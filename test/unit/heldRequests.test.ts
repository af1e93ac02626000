import { strict as assert } from 'node:assert';
import type { RunningServer } from '../../src/server/app';
import { startTestServer, TEST_TOKEN } from './fakes/app';
import { request } from './fakes/http';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';
import { sleep } from '../../src/core/sleep';

/** Waits and streams count against their client's share of the sockets (heldRequests.ts), over fake notebooks. */
describe('held requests', () => {
  let server: RunningServer;
  let ids: string[];
  beforeEach(async () => {
    const docs = new FakeNotebooks({ 'sleep()': { steps: [{ waitMs: 10_000 }] } });
    ids = docs.add(NOTEBOOK_A, [{ code: 'sleep()' }]);
    server = await startTestServer({ notebooks: docs, heldLimits: { perClient: 2, inAll: 3 } });
  });
  afterEach(() => server.close());

  const post = (path: string, client: string, body: object, abortAfterMs?: number) =>
    request(server.port, {
      method: 'POST',
      path,
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json', 'x-agent-bridge-client': client },
      body: JSON.stringify(body),
      ...(abortAfterMs !== undefined && { abortAfterMs }),
    }).catch(() => undefined);
  const wait = (client: string, abortAfterMs?: number, timeoutMs = 60_000) =>
    post(`/notebooks/cells/${ids[0]}/wait`, client, { timeoutMs }, abortAfterMs);

  it('a client past its share gets a 429 naming the limit; others keep theirs; a closed wait frees its place', async () => {
    assert.equal((await post(`/notebooks/cells/${ids[0]}/run`, 'agent-a', {}))?.status, 202);
    const held = [wait('agent-a', 1_000), wait('agent-a', 1_000)];
    await sleep(100);
    const third = await wait('agent-a');
    assert.equal(third?.status, 429);
    assert.match(JSON.parse(third!.body).detail, /the most one client may have open at once \(2\)/);
    assert.equal(JSON.parse(third!.body).limit, 2);
    const other = wait('agent-b', 1_000);
    await sleep(100);
    const fourth = await wait('agent-c');
    assert.equal(fourth?.status, 429, 'all clients together hold at most 3');
    assert.match(JSON.parse(fourth!.body).detail, /for all clients together \(3\)/);
    // Reads that do not hold are not counted.
    const read = await request(server.port, { path: '/notebooks/cells', headers: { authorization: `Bearer ${TEST_TOKEN}` } });
    assert.equal(read.status, 200);
    await Promise.all([...held, other]); // closed by their clients
    await sleep(50);
    const again = await wait('agent-a', undefined, 100);
    assert.equal(again?.status, 504, 'the closed waits gave their places back: this one waits, and runs out');
  });
});

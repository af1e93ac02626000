import { strict as assert } from 'node:assert';
import { CheckFailure } from '../../sandbox-test/assert';
import { type CheckContext, setContext, suiteState } from '../../sandbox-test/checks/context';

/** A context with only what these checks read (a fake: no sandbox runs in a unit test). */
const fakeContext = (name: string) =>
  ({
    sandbox: { page: { name: `${name}-page` } },
    client: { name: `${name}-client` },
    analysis: { session: { id: `s_${name}` } },
  }) as unknown as CheckContext;

describe("the harness's suite state (sandbox-test/checks/context.ts)", () => {
  let early: unknown;
  const first = fakeContext('first');
  before(() => setContext(first)); // as the root hook does, before any suite's own hook
  after(() => setContext(undefined));
  const state = suiteState((c) => ({ sid: c.analysis.session.id }));
  try {
    void state.client;
  } catch (err) {
    early = err;
  }

  it('fails clearly when read while the suites are declared, before the sandbox is up', () => {
    assert.ok(early instanceof CheckFailure, `not a CheckFailure: ${String(early)}`);
    assert.match(early.message, /suite state \(client\) read before the sandbox is up/);
  });

  it("holds the context, its page and what the suite's pick derived once the hook ran", () => {
    assert.equal(state.client, first.client);
    assert.equal(state.page, first.sandbox.page);
    assert.equal(state.sid, 's_first');
    assert.deepEqual(Object.keys({ ...state }).sort(), ['analysis', 'client', 'page', 'sandbox', 'sid']);
  });

  it('reads the live context: a new one (the bridge moved) is what the suite sees next', () => {
    const moved = fakeContext('moved');
    setContext(moved);
    try {
      assert.equal(state.client, moved.client);
      assert.equal(state.sid, 's_first', 'what pick derived stays as the hook found it');
    } finally {
      setContext(first);
    }
  });

  it('is read-only: a suite changes the context through setContext, not by writing to its state', () => {
    assert.throws(() => Object.assign(state, { client: fakeContext('x').client }), /read-only/);
  });
});

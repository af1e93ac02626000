import { strict as assert } from 'node:assert';
import { ClientRegistry, readerOf } from '../../src/core/agents/clients';
import { ReadTracker } from '../../src/core/model/versions';

const nb = 'file:///nb.ipynb';
const cell = (version: number, code = 'x = 1') => ({ id: 'c1', index: 0, version, code });
const a = { key: 'cred-a', label: 'A (unverified)' };
const b = { key: 'cred-b', label: 'B (unverified)' };
const why = (r: { why: string } | undefined) => r?.why ?? '';

describe('read-before-write', () => {
  it('refuses a cell the agent never read, unless it is empty', () => {
    const t = new ReadTracker();
    assert.match(why(t.conflict(a, nb, cell(1), {})), /has not been read by you/);
    assert.equal(t.conflict(a, nb, cell(1, ''), {}), undefined);
    assert.equal(t.conflict(a, nb, cell(1, '  \n'), {}), undefined);
  });

  it('allows the version that was read, refuses a newer one, naming the person when no agent made it', () => {
    const t = new ReadTracker();
    t.saw(a, nb, 'c1', 3);
    assert.equal(t.conflict(a, nb, cell(3), {}), undefined);
    const refused = t.conflict(a, nb, cell(4), {});
    assert.match(why(refused), /changed since you read it \(version 3 → 4\)/);
    assert.equal(refused?.changedBy, 'the person, in the editor');
  });

  it('keeps reads per client: what B read does not let A write; the refusal names who changed the cell', () => {
    const t = new ReadTracker();
    t.saw(a, nb, 'c1', 3);
    t.wrote(b, nb, 'c1', 4); // B read and wrote it
    const refused = t.conflict(a, nb, cell(4), {});
    assert.match(why(refused), /changed since you read it \(version 3 → 4\): B \(unverified\) changed it/);
    assert.equal(refused?.changedBy, b.label);
    const never = { key: 'cred-c', label: 'C (unverified)' };
    assert.match(why(t.conflict(never, nb, cell(4), {})), /has not been read by you/, 'another client read it: not enough');
    assert.equal(t.conflict(b, nb, cell(4), {}), undefined);
  });

  it('an explicit version replaces the record; force skips the check', () => {
    const t = new ReadTracker();
    t.saw(a, nb, 'c1', 3);
    assert.equal(t.conflict(a, nb, cell(4), { version: 4 }), undefined);
    assert.match(why(t.conflict(a, nb, cell(3), { version: 2 })), /is at version 3, not 2/);
    assert.equal(t.conflict(a, nb, cell(9), { force: true }), undefined);
    assert.equal(new ReadTracker().conflict(a, nb, cell(9), { force: true }), undefined);
  });

  it('keeps records per notebook and forgets deleted cells and closed notebooks', () => {
    const t = new ReadTracker();
    t.saw(a, nb, 'c1', 1);
    assert.match(why(t.conflict(a, 'file:///other.ipynb', cell(1), {})), /not been read/);
    t.forget(nb, ['c1']);
    assert.equal(t.seenVersion(a, nb, 'c1'), undefined);
    t.saw(a, nb, 'c1', 1);
    t.retainNotebooks(new Set(['file:///other.ipynb']));
    assert.equal(t.seenVersion(a, nb, 'c1'), undefined);
  });

  it("a credential holder's reads include what it read under its name before it was handed the credential", () => {
    const t = new ReadTracker();
    const byName = readerOf(new ClientRegistry().identify(undefined, 'bob'));
    t.saw(byName, nb, 'c1', 3);
    const registry = new ClientRegistry();
    const holder = readerOf(registry.identify(registry.mint('bob', 'http'), 'bob'));
    assert.equal(t.conflict(holder, nb, cell(3), {}), undefined);
    t.saw(holder, nb, 'c1', 5);
    assert.match(why(t.conflict(holder, nb, cell(6), {})), /version 5 → 6/, "its own read wins over its name's");
  });
});

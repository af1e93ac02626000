import { strict as assert } from 'node:assert';
import { ReadTracker } from '../../src/core/versions';

const nb = 'file:///nb.ipynb';
const cell = (version: number, code = 'x = 1') => ({ id: 'c1', index: 0, version, code });

describe('read-before-write', () => {
  it('refuses a cell the agent never read, unless it is empty', () => {
    const t = new ReadTracker();
    assert.match(t.conflict(nb, cell(1), {}) ?? '', /has not been read/);
    assert.equal(t.conflict(nb, cell(1, ''), {}), undefined);
    assert.equal(t.conflict(nb, cell(1, '  \n'), {}), undefined);
  });

  it('allows the version that was read, refuses a newer one', () => {
    const t = new ReadTracker();
    t.saw(nb, 'c1', 3);
    assert.equal(t.conflict(nb, cell(3), {}), undefined);
    assert.match(t.conflict(nb, cell(4), {}) ?? '', /changed since you read it \(version 3 → 4\)/);
  });

  it('an explicit version replaces the record; force skips the check', () => {
    const t = new ReadTracker();
    t.saw(nb, 'c1', 3);
    assert.equal(t.conflict(nb, cell(4), { version: 4 }), undefined);
    assert.match(t.conflict(nb, cell(3), { version: 2 }) ?? '', /is at version 3, not 2/);
    assert.equal(t.conflict(nb, cell(9), { force: true }), undefined);
    assert.equal(new ReadTracker().conflict(nb, cell(9), { force: true }), undefined);
  });

  it('keeps records per notebook and forgets deleted cells and closed notebooks', () => {
    const t = new ReadTracker();
    t.saw(nb, 'c1', 1);
    assert.match(t.conflict('file:///other.ipynb', cell(1), {}) ?? '', /not been read/);
    t.forget(nb, ['c1']);
    assert.equal(t.seenVersion(nb, 'c1'), undefined);
    t.saw(nb, 'c1', 1);
    t.retainNotebooks(new Set(['file:///other.ipynb']));
    assert.equal(t.seenVersion(nb, 'c1'), undefined);
  });
});

import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { matchByPlace, VersionStore } from '../../src/notebooks/versionStore';
import { sleep } from '../../src/core/sleep';

describe('cell versions kept across window restarts (VersionStore)', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'versions-'));
    file = path.join(dir, 'storage', 'cell-versions.json');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const nb = 'file:///work/a.ipynb';

  it('a new window continues each cell from the version the last one kept, +1 when the text changed', () => {
    const before = new VersionStore(file);
    before.keep(nb, () => [
      { id: 'a1', version: 3, text: 'x = 1' },
      { id: 'a2', version: 1, text: 'y = 2' },
    ]);
    before.dispose(); // the window closes: what is pending is written
    const after = new VersionStore(file);
    assert.equal(after.restored(nb, 'a1', 'x = 1'), 3);
    assert.equal(after.restored(nb, 'a1', 'x = 10'), 4, 'text changed while the window was away');
    assert.equal(after.restored(nb, 'a2', 'y = 2'), 1);
    assert.equal(after.restored(nb, 'zz', 'x = 1'), undefined, 'a cell it never saw');
    assert.equal(after.restored('file:///work/b.ipynb', 'a1', 'x = 1'), undefined, 'another notebook');
    assert.equal((fs.statSync(file).mode & 0o777).toString(8), '600');
  });

  it('reads the cells when it writes (the latest versions), soon after a change', async () => {
    const store = new VersionStore(file);
    let version = 1;
    store.keep(nb, () => [{ id: 'a1', version, text: 'x' }]);
    version = 5;
    await sleep(400);
    assert.equal(new VersionStore(file).restored(nb, 'a1', 'x'), 5);
  });

  it('a notebook closed and reopened in the same window continues from its latest versions', () => {
    const store = new VersionStore(file);
    assert.equal(store.restored(nb, 'a1', 'x'), undefined);
    store.keep(nb, () => [{ id: 'a1', version: 4, text: 'x' }]);
    assert.equal(store.restored(nb, 'a1', 'x'), 4);
  });

  it('a window that has read only some cells keeps the versions of the others', () => {
    const first = new VersionStore(file);
    first.keep(nb, () => [
      { id: 'a1', version: 3, text: 'x' },
      { id: 'a2', version: 5, text: 'y' },
    ]);
    first.dispose();
    const second = new VersionStore(file);
    assert.equal(second.restored(nb, 'a1', 'x'), 3);
    second.keep(nb, () => [{ id: 'a1', version: 3, text: 'x' }]);
    assert.equal(second.restored(nb, 'a2', 'y'), 5);
    second.dispose();
    assert.equal(new VersionStore(file).restored(nb, 'a2', 'y'), 5);
  });

  it('keeps what another window wrote for other notebooks', () => {
    const one = new VersionStore(file);
    const two = new VersionStore(file);
    one.keep(nb, () => [{ id: 'a1', version: 2, text: 'x' }]);
    one.flush();
    two.keep('file:///work/b.ipynb', () => [{ id: 'b1', version: 7, text: 'y' }]);
    two.flush();
    const after = new VersionStore(file);
    assert.equal(after.restored(nb, 'a1', 'x'), 2);
    assert.equal(after.restored('file:///work/b.ipynb', 'b1', 'y'), 7);
  });

  it('starts afresh from a missing or damaged file, and drops malformed entries', () => {
    assert.equal(new VersionStore(file).restored(nb, 'a1', 'x'), undefined);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, '{not json');
    assert.equal(new VersionStore(file).restored(nb, 'a1', 'x'), undefined);
    fs.writeFileSync(file, JSON.stringify({ [nb]: { a1: { version: 'three', hash: 'h' }, a2: null } }));
    assert.equal(new VersionStore(file).restored(nb, 'a1', 'x'), undefined);
    assert.equal(new VersionStore(file).restored(nb, 'a2', 'x'), undefined);
  });

  it('gives the ids it minted (nbformat 4.4: none in the file) back to the cells at their place with their text, after a restart', () => {
    const before = new VersionStore(file);
    before.keep(nb, () => [
      { id: 'c1', version: 2, text: 'x = 1', at: 0 },
      { id: 'c2', version: 1, text: 'y = 2', at: 1 },
      { id: 'c3', version: 4, text: 'y = 2', at: 2 },
      { id: 'f1', version: 3, text: 'z', at: undefined },
    ]);
    before.flush(); // what a killed host had written by then
    const after = new VersionStore(file);
    const found = after.foundAgain(nb, [
      { index: 0, text: 'x = 1' },
      { index: 1, text: 'y = 2' },
      { index: 2, text: 'y = 2' },
      { index: 3, text: 'changed since' },
    ]);
    assert.deepEqual(
      [...found].sort(([a], [b]) => a - b),
      [
        [0, { id: 'c1', version: 2 }],
        [1, { id: 'c2', version: 1 }],
        [2, { id: 'c3', version: 4 }],
      ],
    );
    assert.equal(after.restored(nb, 'f1', 'z'), 3, 'file ids keep their versions beside');
    // The next window's view replaces the minted ids: one it did not take back is gone.
    after.keep(nb, () => [{ id: 'c1', version: 2, text: 'x = 1', at: 0 }]);
    after.flush();
    assert.deepEqual([...new VersionStore(file).foundAgain(nb, [{ index: 1, text: 'y = 2' }])], []);
    assert.equal(new VersionStore(file).restored(nb, 'f1', 'z'), 3);
  });

  it('matches text first, then the nearest place; each id and cell once', () => {
    const kept = (id: string, at: number, hash: string) => ({ id, at, hash, version: 1 });
    const found = matchByPlace(
      [kept('a', 2, 'x'), kept('b', 5, 'x'), kept('c', 7, 'y')],
      [
        { index: 3, hash: 'x' }, // a cell was inserted above: both shifted by one
        { index: 6, hash: 'x' },
        { index: 7, hash: 'x' },
        { index: 9, hash: 'z' },
      ],
    );
    assert.deepEqual([...found].map(([i, f]) => [i, f.id]).sort(), [
      [3, 'a'],
      [6, 'b'],
    ]);
  });
});

import { strict as assert } from 'node:assert';
import { changeSide, type SideCell } from '../../src/core/cells/changeSides';
import { asAuthor, asTheAgentLeftIt, Checkpoints, type CellFace, type Checkpoint } from '../../src/core/cells/checkpoints';
import { NotebookCells } from '../../src/core/cells/notebookCells';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';

const A = NOTEBOOK_A.uri;

describe('the sides of a change as whole notebooks (fake notebooks)', () => {
  let docs: FakeNotebooks;
  let cells: NotebookCells;
  let checkpoints: Checkpoints;
  let ids: string[];

  beforeEach(() => {
    docs = new FakeNotebooks();
    ids = docs.add(NOTEBOOK_A, [{ code: 'a = 1' }, { code: 'b = 2' }, { code: 'c = 3' }, { code: 'd = 4' }]);
    checkpoints = new Checkpoints(() => cells, { load: () => [], save: () => undefined });
    cells = new NotebookCells(docs, {
      outputTextLimit: () => 100,
      onApplied: (notebook, before, after) => checkpoints.record(notebook, before, after),
    });
  });

  const change = async (ops: Parameters<NotebookCells['batch']>[1]): Promise<Checkpoint> => {
    await asAuthor({ client: 'agent' }, () => cells.batch(A, ops, []));
    return checkpoints.pending()[0]!;
  };
  /** A side's cells as code: the notebook's own cells now, the change's kept faces marked. */
  const codes = (side: SideCell<CellFace>[]) => {
    const now = docs.cells(A);
    return side.map((c) => ('now' in c ? now[c.now]!.code : `[${c.face.code}]`));
  };
  const nowIds = () => docs.cells(A).map((c) => c.id);

  it('puts edited, created, deleted and moved cells back as they were, among the cells around them', async () => {
    const checkpoint = await change([
      { op: 'edit', ref: ids[0]!, code: 'a = 10', force: true },
      { op: 'create', index: 2, code: 'new = 0' },
      { op: 'delete', ref: ids[2]!, force: true },
      { op: 'move', ref: ids[3]!, to: 0 },
    ]);
    assert.deepEqual(docs.codes(A), ['d = 4', 'a = 10', 'b = 2', 'new = 0']);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'before')), ['[a = 1]', 'b = 2', '[c = 3]', '[d = 4]']);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'after')), ['[d = 4]', '[a = 10]', 'b = 2', '[new = 0]']);
    assert.ok(asTheAgentLeftIt(checkpoint, docs.cells(A)), 'the notebook is as the agent left it');
  });

  it('keeps what others did since: cells added since stay, and a cell typed in since is no longer as the agent left it', async () => {
    const checkpoint = await change([{ op: 'edit', ref: ids[1]!, code: 'b = 20', force: true }]);
    docs.type(A, 1, 'b = 20  # mine');
    await cells.batch(A, [{ op: 'create', index: 0, code: 'later = 1' }], []);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'before')), [
      'later = 1',
      'a = 1',
      '[b = 2]',
      'c = 3',
      'd = 4',
    ]);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'after')), [
      'later = 1',
      'a = 1',
      '[b = 20]',
      'c = 3',
      'd = 4',
    ]);
    assert.ok(!asTheAgentLeftIt(checkpoint, docs.cells(A)), 'the typing since');
  });

  it('one cell of a change: only that cell put back, the change to the others left as it is', async () => {
    const checkpoint = await change([
      { op: 'edit', ref: ids[0]!, code: 'a = 10', force: true },
      { op: 'edit', ref: ids[3]!, code: 'd = 40', force: true },
    ]);
    const one = checkpoint.cells.filter((d) => d.id === ids[3]);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'before', one)), ['a = 10', 'b = 2', 'c = 3', '[d = 4]']);
    assert.ok(asTheAgentLeftIt(checkpoint, docs.cells(A), one));
  });

  it('one deleted cell of a change that also created one above it goes back after the cell that preceded it', async () => {
    const checkpoint = await change([
      { op: 'create', index: 0, code: 'new = 0' },
      { op: 'delete', ref: ids[2]!, force: true },
    ]);
    assert.deepEqual(docs.codes(A), ['new = 0', 'a = 1', 'b = 2', 'd = 4']);
    const one = checkpoint.cells.filter((d) => d.id === ids[2]);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'before', one)), [
      'new = 0',
      'a = 1',
      'b = 2',
      '[c = 3]',
      'd = 4',
    ]);
  });

  it('two cells edited and swapped: each side has them in its own order', async () => {
    const checkpoint = await change([
      { op: 'edit', ref: ids[1]!, code: 'b = 20', force: true },
      { op: 'edit', ref: ids[2]!, code: 'c = 30', force: true },
      { op: 'move', ref: ids[2]!, to: 1 },
    ]);
    assert.deepEqual(docs.codes(A), ['a = 1', 'c = 30', 'b = 20', 'd = 4']);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'before')), ['a = 1', '[b = 2]', '[c = 3]', 'd = 4']);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'after')), ['a = 1', '[c = 30]', '[b = 20]', 'd = 4']);
    assert.ok(asTheAgentLeftIt(checkpoint, docs.cells(A)));
  });

  it('a cell the agent created and someone deleted since comes back on the after side only', async () => {
    const checkpoint = await change([{ op: 'create', index: 1, code: 'new = 0' }]);
    const made = docs.cells(A)[1]!.id;
    await cells.batch(A, [{ op: 'delete', ref: made, force: true }], []);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'before')), ['a = 1', 'b = 2', 'c = 3', 'd = 4']);
    assert.deepEqual(codes(changeSide(checkpoint.cells, nowIds(), 'after')), ['a = 1', '[new = 0]', 'b = 2', 'c = 3', 'd = 4']);
    assert.ok(!asTheAgentLeftIt(checkpoint, docs.cells(A)));
  });
});

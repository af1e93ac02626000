import { strict as assert } from 'node:assert';
import { cellGraph, staleDownstream, stalePlan, type GraphCell, type RunDataflow } from '../../src/core/model/cellGraph';
import type { CellAnalysis } from '../../src/core/model/codeChecks';

const analyses = (list: CellAnalysis[]) => new Map(list.map((a) => [a.id, a]));
const cell = (id: string, endedAt: number | null, editedSinceRun = false, run?: RunDataflow): GraphCell => ({
  id,
  python: true,
  endedAt,
  editedSinceRun,
  run,
});

describe('cell dependencies and staleness', () => {
  const code = analyses([
    { id: 'a', defines: ['x'], uses: [] },
    { id: 'b', defines: ['y'], uses: ['x'] },
    { id: 'c', defines: ['z'], uses: [] },
    { id: 'd', defines: [], uses: ['y', 'print'] },
  ]);

  it('links each use to the nearest cell above that defines the name', () => {
    const graph = cellGraph([cell('a', 1), cell('b', 2), cell('c', 3), cell('d', 4)], code);
    assert.deepEqual(graph.get('b')?.dependsOn, ['a']);
    assert.deepEqual(graph.get('a')?.dependents, ['b']);
    assert.deepEqual(graph.get('d')?.dependsOn, ['b']);
    assert.deepEqual(
      [...graph.values()].map((e) => e.stale),
      [null, null, null, null],
    );
    assert.deepEqual(graph.get('b')?.dataflow, { from: 'code', reads: ['x'] });
  });

  it('worked out again with the same analyses, follows what changed: a run record applies until the cell is edited', () => {
    const record: RunDataflow = { reads: [], defines: ['x', 'w'], mutates: [] };
    let graph = cellGraph([cell('a', 1, false, record), cell('b', 2)], code);
    assert.deepEqual(graph.get('a')?.dataflow, { from: 'run' });
    graph = cellGraph([cell('a', 1, true, record), cell('b', 2)], code);
    assert.deepEqual(graph.get('a')?.dataflow, { from: 'code' }, 'the edit: the record is of other code');
    graph = cellGraph([cell('a', 1, false, { ...record, reads: ['v'] }), cell('b', 2)], code);
    assert.deepEqual(graph.get('a')?.dataflow, { from: 'run', reads: ['v'] }, 'a new run record');
  });

  it('an edit makes the cell and everything downstream stale, with the reason; the rest stay fresh', () => {
    const cells = [cell('a', 1, true), cell('b', 2), cell('c', 3), cell('d', 4)];
    const graph = cellGraph(cells, code);
    assert.match(graph.get('a')!.stale!.reason, /edited after it last ran/);
    assert.match(graph.get('b')!.stale!.reason, /cell a \(index 0\), which defines x, is stale/);
    assert.match(graph.get('d')!.stale!.reason, /cell b .*is stale \(cell a \(index 0\): its code was edited/);
    assert.equal(graph.get('c')!.stale, null);
    assert.deepEqual(stalePlan(cells, graph).order, ['a', 'b', 'd']);
    assert.deepEqual(stalePlan(cells, graph, { from: 'a' }).order, ['a', 'b', 'd']);
    assert.deepEqual(
      staleDownstream(cells, graph, ['b']).map((s) => [s.id, s.index]),
      [
        ['b', 1],
        ['d', 3],
      ],
    );
  });

  it('an upstream cell that re-ran later, or has not run in this kernel, makes a cell stale', () => {
    let graph = cellGraph([cell('a', 9), cell('b', 2), cell('c', 3), cell('d', 4)], code);
    assert.match(graph.get('b')!.stale!.reason, /ran again after this cell last ran/);
    graph = cellGraph([cell('a', null), cell('b', 2), cell('c', 3), cell('d', null)], code);
    assert.match(graph.get('b')!.stale!.reason, /has not run in this kernel/);
    assert.equal(graph.get('d')!.stale, null, 'a cell that has not run in this kernel is not stale');
  });

  it('after a restart nothing is stale; run-stale names the cells a stale one needs, and runs them with rebuild', () => {
    // The kernel restarted: no cell has run in it, then b ran again (failing, x undefined).
    const cells = [cell('a', null), cell('b', 5), cell('c', null), cell('d', null)];
    let graph = cellGraph([cell('a', null), cell('b', null), cell('c', null), cell('d', null)], code);
    assert.deepEqual(
      [...graph.values()].map((e) => e.stale),
      [null, null, null, null],
    );
    graph = cellGraph(cells, code);
    const offered = stalePlan(cells, graph, { label: 'a.ipynb' });
    assert.deepEqual(offered.order, ['b']);
    assert.deepEqual(offered.needs, [{ id: 'a', index: 0, reason: 'it has not run in this kernel, and b read from it' }]);
    assert.equal(
      offered.detail,
      'Runs 1 stale cell; they read from a, not run in this kernel: pass "rebuild": true to run it first',
    );
    const rebuilt = stalePlan(cells, graph, { rebuild: true });
    assert.deepEqual(rebuilt.order, ['a', 'b']);
    assert.equal(rebuilt.detail, 'Runs 1 stale cell and 1 they need, in notebook order');
  });
});

describe('cell dependencies through mutation', () => {
  const x = (id: string, how: string, extra: Partial<CellAnalysis> = {}): CellAnalysis => ({
    id,
    defines: [],
    uses: ['x'],
    mutates: [{ name: 'x', how }],
    ...extra,
  });

  it('a reader depends on the latest cell that changes the name in place, and on the writers before it back to the binding', () => {
    const code = analyses([
      { id: 'load', defines: ['x'], uses: [] },
      x('m1', "x['a'] = …"),
      { id: 'other', defines: ['x'], uses: [] }, // below: not read by `show`
      x('m2', 'x.append(…)', { mutates: [{ name: 'x', how: 'x.append(…)', method: true }] }),
      { id: 'show', defines: [], uses: ['x'] },
    ]);
    const order = ['load', 'm1', 'other', 'm2', 'show'];
    let graph = cellGraph(
      order.map((id, i) => cell(id, i + 1)),
      code,
    );
    assert.deepEqual(graph.get('show')!.dependsOn, ['m2', 'other']);
    assert.deepEqual(graph.get('m1')!.dependents, []);
    // m2 ran again (edited and run): `show` is stale, and its reason names the mutation.
    graph = cellGraph(
      order.map((id, i) => cell(id, id === 'm2' ? 9 : i + 1)),
      code,
    );
    assert.equal(
      graph.get('show')!.stale!.reason,
      'cell m2 (index 3), which changes x in place (x.append(…)), ran again after this cell last ran',
    );
    assert.equal(graph.get('show')!.stale!.from, 'code');
    assert.deepEqual(graph.get('m2')!.dataflow, { from: 'code', reads: ['x'], changes: ['x'] });
  });

  it('follows a chain of changes: the reader of the last depends on each, back to the binding', () => {
    const code = analyses([
      { id: 'load', defines: ['df'], uses: ['pd'] },
      { id: 'c1', defines: [], uses: ['df'], mutates: [{ name: 'df', how: "df['t'] = …" }] },
      { id: 'c2', defines: ['df'], uses: ['df'], mutates: [{ name: 'df', how: 'df += …' }] },
      { id: 'show', defines: [], uses: ['df'] },
    ]);
    const graph = cellGraph(
      ['load', 'c1', 'c2', 'show'].map((id, i) => cell(id, i + 1, id === 'c1')),
      code,
    );
    assert.deepEqual(graph.get('show')!.dependsOn, ['c2', 'c1', 'load']);
    assert.match(graph.get('show')!.stale!.reason, /^cell c2 \(index 2\), which changes df \(df \+= …\), is stale/);
  });

  it("a mutating method called on a module is the module's function (np.append), not a change of it", () => {
    const code = analyses([
      { id: 'imp', defines: ['np'], uses: [], imports: ['np'] },
      { id: 'call', defines: ['y'], uses: ['np'], mutates: [{ name: 'np', how: 'np.append(…)', method: true }] },
      { id: 'use', defines: [], uses: ['np'] },
    ]);
    const graph = cellGraph([cell('imp', 1), cell('call', 5), cell('use', 3)], code);
    assert.deepEqual(graph.get('use')!.dependsOn, ['imp']);
    assert.equal(graph.get('use')!.stale, null);
  });

  it("a run's record is used over the code: a name read only in a branch the run skipped is no dependency", () => {
    const code = analyses([
      { id: 'load', defines: ['df'], uses: [] },
      { id: 'change', defines: [], uses: ['df'], mutates: [{ name: 'df', how: "df['c'] = …" }] },
      { id: 'branch', defines: ['n'], uses: ['debug', 'df'] }, // `if debug: print(df)`
    ]);
    const skipped: RunDataflow = { reads: ['debug'], defines: ['n'], mutates: [] };
    let graph = cellGraph([cell('load', 1), cell('change', 9), cell('branch', 3, false, skipped)], code);
    assert.equal(graph.get('branch')!.stale, null, 'its run never read df');
    assert.deepEqual(graph.get('branch')!.dataflow, { from: 'run', reads: ['debug'] });
    // The same cell without a record (a Jupyter kernel): from its code, df is read.
    graph = cellGraph([cell('load', 1), cell('change', 9), cell('branch', 3)], code);
    assert.match(graph.get('branch')!.stale!.reason, /changes df in place \(df\['c'\] = …\), ran again/);
    // Edited since the run: the record is of other code, the code counts.
    graph = cellGraph([cell('load', 1), cell('change', 9), cell('branch', 3, true, skipped)], code);
    assert.equal(graph.get('branch')!.dataflow!.from, 'code');
  });

  it('a change the run saw that the code does not show (a called function, another name) counts, from the run', () => {
    const code = analyses([
      { id: 'load', defines: ['df'], uses: [] },
      { id: 'helper', defines: [], uses: ['fix', 'df'] }, // fix(df), which changes df inside
      { id: 'show', defines: [], uses: ['df'] },
    ]);
    const helper: RunDataflow = { reads: ['df', 'fix'], defines: [], mutates: ['df'] };
    const shown: RunDataflow = { reads: ['df'], defines: [], mutates: [] };
    const graph = cellGraph([cell('load', 1), cell('helper', 9, false, helper), cell('show', 3, false, shown)], code);
    assert.deepEqual(graph.get('show')!.dependsOn, ['helper', 'load']);
    assert.deepEqual(graph.get('show')!.stale, {
      reason: 'cell helper (index 1), which changes df in place, ran again after this cell last ran',
      from: 'run',
    });
  });

  it('marimo: a reader depends on the one cell binding the name wherever it is, and on the changes above it', () => {
    const code = analyses([
      { id: 'show', defines: [], uses: ['df'] },
      { id: 'load', defines: ['df'], uses: [] },
      { id: 'add', defines: [], uses: ['df'], mutates: [{ name: 'df', how: "df['weekday'] = …" }] },
      { id: 'plot', defines: [], uses: ['df'] },
    ]);
    const cells = [cell('show', 2), cell('load', 1), cell('add', 5), cell('plot', 3)];
    const graph = cellGraph(cells, code, { boundAnywhere: true });
    assert.deepEqual(graph.get('show')!.dependsOn, ['load']);
    assert.deepEqual(graph.get('plot')!.dependsOn, ['add', 'load']);
    assert.equal(graph.get('show')!.stale, null);
    assert.match(graph.get('plot')!.stale!.reason, /changes df in place \(df\['weekday'\] = …\), ran again/);
    assert.deepEqual(
      staleDownstream(cells, graph, ['add']).map((s) => s.id),
      ['plot'],
    );
  });
});

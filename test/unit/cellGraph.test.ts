import { strict as assert } from 'node:assert';
import { cellGraph, staleRunOrder, type GraphCell } from '../../src/core/cellGraph';
import type { CellAnalysis } from '../../src/core/codeChecks';

const analyses = (list: CellAnalysis[]) => new Map(list.map((a) => [a.id, a]));
const cell = (id: string, endedAt: number | null, editedSinceRun = false): GraphCell => ({
  id,
  python: true,
  endedAt,
  editedSinceRun,
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
  });

  it('an edit makes the cell and everything downstream stale, with the reason; the rest stay fresh', () => {
    const cells = [cell('a', 1, true), cell('b', 2), cell('c', 3), cell('d', 4)];
    const graph = cellGraph(cells, code);
    assert.match(graph.get('a')!.stale!.reason, /edited after it last ran/);
    assert.match(graph.get('b')!.stale!.reason, /cell a \(index 0\), which defines x, is stale/);
    assert.match(graph.get('d')!.stale!.reason, /cell b/);
    assert.equal(graph.get('c')!.stale, null);
    assert.deepEqual(staleRunOrder(cells, graph), ['a', 'b', 'd']);
    assert.deepEqual(staleRunOrder(cells, graph, 'a'), ['a', 'b', 'd']);
  });

  it('an upstream cell that re-ran later, or never ran, makes a cell stale', () => {
    let graph = cellGraph([cell('a', 9), cell('b', 2), cell('c', 3), cell('d', 4)], code);
    assert.match(graph.get('b')!.stale!.reason, /ran again after this cell last ran/);
    graph = cellGraph([cell('a', null), cell('b', 2), cell('c', 3), cell('d', null)], code);
    assert.match(graph.get('b')!.stale!.reason, /never ran/);
    assert.equal(graph.get('d')!.stale, null, 'a cell that never ran is not stale');
  });
});

import { strict as assert } from 'node:assert';
import { cellGraph, type GraphCell } from '../../src/core/model/cellGraph';
import type { CellAnalysis } from '../../src/core/model/codeChecks';
import { inspectAnalyzer } from './support/kernelRuns';

/** Ways a cell changes `x` in place: each makes the next reader of x depend on it. */
const MUTATIONS: readonly [code: string, how: string][] = [
  ["x['c'] = 1", "x['c'] = …"],
  ['x.c = 1', 'x.c = …'],
  ["x.loc[0, 'c'] = 1", "x.loc[0, 'c'] = …"],
  ['x[0], x[1] = 1, 2', 'x[0] = …'],
  ['x.a[0].b = 1', 'x.a[0].b = …'],
  ['x.iloc[0] += 1', 'x.iloc[0] += …'],
  ['x.count *= 2', 'x.count *= …'],
  ['x += 1', 'x += …'],
  ["del x['c']", "del x['c']"],
  ['del x.attr', 'del x.attr'],
  ['x.append(1)', 'x.append(…)'],
  ['x.extend([1])', 'x.extend(…)'],
  ['x.insert(0, 1)', 'x.insert(…)'],
  ['x.pop()', 'x.pop(…)'],
  ['x.remove(1)', 'x.remove(…)'],
  ['x.sort()', 'x.sort(…)'],
  ['x.reverse()', 'x.reverse(…)'],
  ['x.clear()', 'x.clear(…)'],
  ['x.update(a=1)', 'x.update(…)'],
  ["x.setdefault('k', [])", 'x.setdefault(…)'],
  ['x.popitem()', 'x.popitem(…)'],
  ['x.add(1)', 'x.add(…)'],
  ['x.discard(1)', 'x.discard(…)'],
  ['x.difference_update({1})', 'x.difference_update(…)'],
  ["x.drop(columns=['a'], inplace=True)", 'x.drop(…, inplace=True)'],
  ['x.fillna(0, inplace=True)', 'x.fillna(…, inplace=True)'],
  ["x['a'].fillna(0, inplace=True)", "x['a'].fillna(…, inplace=True)"],
  ["x['k'].append(1)", "x['k'].append(…)"],
  ['x.items.append(1)', 'x.items.append(…)'],
  ['for x[0] in range(3):\n    pass', 'for x[0] in …'],
  ['if ready:\n    x.append(1)', 'x.append(…)'],
  ['[x.append(i) for i in range(3)]', 'x.append(…)'],
  ['x[0]: int = 5', 'x[0] = …'],
  ["print(x.pop('k'))", 'x.pop(…)'],
];

/** Cells that read x, copy it or change something else: none makes a later reader of x depend on it. */
const NEAR_MISSES: readonly string[] = [
  "print(x['c'])",
  'y = x.copy()',
  "y = x.sort_values('a')",
  "x.drop(columns=['a'], inplace=False)",
  'y = x.copy()\ny.append(1)',
  'x.copy().append(1)',
  'pop = x.pop',
  'def f():\n    x = []\n    x.append(1)',
  'def g(x):\n    x.append(1)',
  'h = lambda: x.append(1)',
  '[x.append(1) for x in others]',
  'np.append(x, 1)',
  'x2 = [1]\nx2.append(x)',
  "print(x['a'].fillna(0))",
];

/** kernel_inspect.py's analysis (a real Python) read by the dependency graph. */
describe('changes in place count as new versions of a name (a table of forms)', function () {
  this.timeout(60_000);
  const analyzed = new Map<string, CellAnalysis>();

  before(async () => {
    const analyzer = inspectAnalyzer();
    const codes = [
      'import numpy as np\nx = make()\nready = True\nothers = []',
      'print(x)',
      ...MUTATIONS.map(([c]) => c),
      ...NEAR_MISSES,
    ];
    const found = await analyzer.analyze(
      'file:///forms.ipynb',
      codes.map((code, i) => ({ id: String(i), code })),
    );
    analyzer.dispose();
    assert.ok(found, 'the analysis answered');
    for (const [i, code] of codes.entries()) analyzed.set(code, found[i]!);
  });

  /** setup → `code` → reader, all run in order; then `code` runs again. */
  const graphOf = (code: string, rerun: boolean) => {
    const ids = ['setup', 'change', 'reader'];
    const codes = ['import numpy as np\nx = make()\nready = True\nothers = []', code, 'print(x)'];
    const cells: GraphCell[] = ids.map((id, i) => ({
      id,
      python: true,
      endedAt: rerun && id === 'change' ? 10 : i + 1,
      editedSinceRun: false,
    }));
    return cellGraph(cells, new Map(ids.map((id, i) => [id, { ...analyzed.get(codes[i]!)!, id }])));
  };

  for (const [code, how] of MUTATIONS)
    it(`marks: ${code.replace(/\n\s*/g, '⏎ ')}`, () => {
      assert.equal(analyzed.get(code)?.error, undefined, 'it compiles');
      assert.ok(graphOf(code, false).get('reader')!.dependsOn.includes('change'), 'the reader depends on it');
      const stale = graphOf(code, true).get('reader')!.stale;
      assert.ok(stale, 'the reader is stale once it ran again');
      assert.ok(stale.reason.startsWith('cell change (index 1), which changes x'), stale.reason);
      assert.ok(stale.reason.includes(`(${how})`), `${stale.reason} names ${how}`);
    });

  for (const code of NEAR_MISSES)
    it(`does not mark: ${code.replace(/\n\s*/g, '⏎ ')}`, () => {
      assert.equal(analyzed.get(code)?.error, undefined, 'it compiles');
      const graph = graphOf(code, true);
      assert.deepEqual(graph.get('reader')!.dependsOn, ['setup']);
      assert.equal(graph.get('reader')!.stale, null);
    });
});

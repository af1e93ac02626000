/**
 * What the stale marks cost per edit of a 500-cell notebook: kernel_inspect.py's analysis of the
 * edited cell (the others' analyses are kept by their text) and the dependency graph of all 500
 * cells, as the bridge works them out for an edit's answer, a list of the cells and the editor's
 * marks. The analysis is answered two ways: by the notebook's running builtin kernel (over its
 * pipe, beside the runs), and by the kept `python kernel_inspect.py --serve` where the kernel is
 * not ours (Jupyter, marimo, or none started yet).
 */
import { cellGraph, staleDownstream, type GraphCell } from '../../src/core/model/cellGraph';
import type { Kernel } from '../../src/core/model/kernelPort';
import type { KernelProcess } from '../../src/kernels/builtin/kernelProcess';
import { PythonAnalyzer } from '../../src/kernels/pythonAnalyzer';
import { goal, p50, percentile, row } from './report';
import type { Ctx } from './sections';

const CELLS = 500;
const EDITS = 30;
const TARGET_MS = 50;

/** Pandas-style cells: frames read, columns added in place, shown, filtered in loops and branches, helpers. */
export function staleNotebook(): string[] {
  return Array.from({ length: CELLS }, (_, i) => {
    const k = Math.floor(i / 5) % 25;
    switch (i % 5) {
      case 0:
        return `df${k} = pd.read_csv('part${k}.csv')\nrows${k} = []`;
      case 1:
        return `df${k}['c${i}'] = df${k}['a'] * ${i}\ndf${k}.drop(columns=['tmp'], inplace=True)`;
      case 2:
        return `df${k}.dtypes`;
      case 3:
        return `for r in df${k}.itertuples():\n    if r.a > ${i}:\n        rows${k}.append(r)\ntotal${k} = len(rows${k})`;
      default:
        return `def f${i}(x):\n    return x * ${i} + total${k}\nresult${i} = f${i}(df${k})`;
    }
  });
}

async function timeEdits(analyzer: PythonAnalyzer, codes: string[]): Promise<number[]> {
  const cells: GraphCell[] = codes.map((_, i) => ({ id: `c${i}`, python: true, endedAt: i + 1, editedSinceRun: false }));
  const current = [...codes];
  await analyzer.analyze(
    'file:///stale.ipynb',
    current.map((code, i) => ({ id: `c${i}`, code })),
  ); // the notebook as opened
  const samples: number[] = [];
  for (let n = 0; n < EDITS; n++) {
    const at = (n * 37) % CELLS;
    current[at] = `${codes[at]}\n# edit ${n}`;
    const start = performance.now();
    const analyses = await analyzer.analyze(
      'file:///stale.ipynb',
      current.map((code, i) => ({ id: `c${i}`, code })),
    );
    if (!analyses) throw new Error('no analysis');
    const edited = cells.map((c, i) => (i === at ? { ...c, editedSinceRun: true } : c));
    const graph = cellGraph(edited, new Map(analyses.map((a) => [a.id, a])));
    staleDownstream(edited, graph, [`c${at}`]);
    samples.push(performance.now() - start);
  }
  return samples;
}

export async function staleAnalysis(ctx: Ctx, inspectPy: string): Promise<void> {
  ctx.say(`stale analysis: ${EDITS} edits of a ${CELLS}-cell notebook, each analysed and graphed`);
  const codes = staleNotebook();
  const kernel = (process: KernelProcess) => ({ inspect: (query: never) => process.inspect(query) }) as unknown as Kernel;
  for (const [how, builtinKernel] of [
    ['by the builtin kernel', async () => kernel(ctx.kernels.ipython)],
    ['by python kernel_inspect.py', async () => undefined],
  ] as const) {
    const analyzer = new PythonAnalyzer({
      python: () => ctx.plainPython,
      script: inspectPy,
      builtinKernel,
      log: { debug() {}, info() {}, warn: (m) => ctx.problems.push(m), error: (m) => ctx.problems.push(m) },
    });
    const samples = await timeEdits(analyzer, codes).finally(() => analyzer.dispose());
    const median = p50(samples);
    ctx.rows.push(
      row('stale', `edit of a ${CELLS}-cell notebook: analysis + graph, ${how}, p50`, median, 'ms', {
        target: goal(`≤ ${TARGET_MS} ms`, median <= TARGET_MS),
      }),
      row('stale', `  p95`, percentile(samples, 95), 'ms'),
    );
  }
}

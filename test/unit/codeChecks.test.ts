import { strict as assert } from 'node:assert';
import * as path from 'node:path';
import { codeWarnings } from '../../src/core/model/codeChecks';
import { PythonAnalyzer } from '../../src/kernels/pythonAnalyzer';
import type { InspectQuery } from '../../src/core/model/kernelPort';
import type { RunningServer } from '../../src/server/app';
import { silentLog, startTestServer, TEST_TOKEN } from './fakes/app';
import { jsonRequest } from './fakes/http';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';
import { inspectAnalyzer } from './support/kernelRuns';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- test bodies are read loosely
type Json = any;

/** The check of an agent's Python before it is written, with a real Python (kernel_inspect.py as a subprocess) over fake notebooks. */
describe('checks before code is written into a cell', function () {
  this.timeout(30_000);
  let server: RunningServer;
  let docs: FakeNotebooks;
  let analyzer: PythonAnalyzer;
  let ids: string[];

  const api = (method: string, route: string, body?: unknown) => jsonRequest(server.port, TEST_TOKEN, method, route, body);
  const code = async () => (await api('GET', '/notebooks/cells')).body.cells.map((c: Json) => c.code);

  beforeEach(async () => {
    docs = new FakeNotebooks();
    ids = docs.add(NOTEBOOK_A, [{ code: 'x = 1' }, { code: 'y = x + 1' }, { kind: 'markup', code: '# notes' }]);
    analyzer = inspectAnalyzer();
    server = await startTestServer({ notebooks: docs, analyzer });
  });
  afterEach(() => {
    analyzer.dispose();
    return server.close();
  });

  it('treats marimo\'s mo-python cells as Python: checked, and an agent\'s "python" there becomes mo-python', async () => {
    const marimo = {
      ...NOTEBOOK_A,
      sessionId: 's_mmmmmm',
      uri: 'file:///work/m.py',
      path: '/work/m.py',
      notebookType: 'marimo-notebook',
      kernel: 'marimo',
    };
    docs.add(marimo, [{ code: 'x = 1' }], 'mo-python');
    const bad = await api('POST', '/notebooks/cells', { notebook: 's_mmmmmm', code: 'def (' });
    assert.equal(bad.status, 400, 'a syntax error in a marimo Python cell is refused');
    assert.match(bad.body.detail, /Syntax error/);
    const asked = await api('POST', '/notebooks/cells', { notebook: 's_mmmmmm', code: 'y = x + 1', language: 'python' });
    assert.equal(asked.status, 201);
    assert.equal(asked.body.cell.language, 'mo-python', "the notebook's own id for Python");
    const undefinedName = await api('POST', '/notebooks/cells', { notebook: 's_mmmmmm', code: 'print(nowhere)' });
    assert.match(undefinedName.body.cell.warnings.join(), /uses nowhere, defined in no cell/);
  });

  it('refuses a syntax error with its line and column and leaves the cell as it was', async () => {
    const r = await api('PATCH', `/notebooks/cells/${ids[1]}`, { code: 'y = x + 1\nif y:\nprint(y)', force: true });
    assert.equal(r.status, 400);
    assert.equal(r.body.line, 3);
    assert.equal(typeof r.body.column, 'number');
    assert.match(r.body.detail, /line 3, column \d+: expected an indented block/);
    assert.deepEqual(await code(), ['x = 1', 'y = x + 1', '# notes']);
    const batch = await api('POST', '/notebooks/edits', {
      ops: [
        { op: 'create', code: 'ok = 1' },
        { op: 'create', code: 'def (' },
      ],
    });
    assert.equal(batch.status, 400, 'one bad cell refuses the whole batch');
    assert.equal((await code()).length, 3);
  });

  it("accepts IPython's magics and shell escapes (IPython's own input transformer)", async () => {
    const r = await api('POST', '/notebooks/cells', { code: '%timeit x\n!echo hi\nfiles = !ls' });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  });

  it('a cell too deeply nested to check leaves the other cells checked; writing one is a 400 unless strict is false', async () => {
    const deep = `total = ${Array.from({ length: 5000 }, () => 'x').join(' + ')}`;
    docs.type(NOTEBOOK_A.uri, 1, deep); // a cloned notebook can ship such a cell
    const broken = await api('POST', '/notebooks/cells', { code: 'def broken(:' });
    assert.equal(broken.status, 400, JSON.stringify(broken.body).slice(0, 300));
    assert.match(broken.body.detail, /Syntax error/);
    const warned = await api('POST', '/notebooks/cells', { code: 'print(nowhere)' });
    assert.equal(warned.status, 201);
    assert.match(warned.body.cell.warnings.join(), /uses nowhere, defined in no cell \(cell .* could not be checked\)/);
    const written = await api('POST', '/notebooks/cells', { code: deep });
    assert.equal(written.status, 400, JSON.stringify(written.body).slice(0, 300));
    assert.match(written.body.detail, /could not be checked: too deeply nested to check.*"strict": false/);
    assert.equal((await code()).length, 4, 'nothing was written');
    const unchecked = await api('POST', '/notebooks/cells', { code: deep, strict: false });
    assert.equal(unchecked.status, 201, JSON.stringify(unchecked.body).slice(0, 300));
    assert.match(unchecked.body.cell.warnings.join(), /not checked: too deeply nested to check/);
  });

  it('warns about names defined nowhere and names defined twice; strict refuses them', async () => {
    const r = await api('POST', '/notebooks/cells', { code: 'x = 2\nprint(zz)' });
    assert.equal(r.status, 201);
    assert.deepEqual(r.body.cell.warnings, ['uses zz, defined in no cell', `defines x, also defined in cell ${ids[0]}`]);
    const strict = await api('POST', '/notebooks/cells', { code: 'print(qq)', strict: true });
    assert.equal(strict.status, 400);
    assert.deepEqual(Object.values(strict.body.warnings), [['uses qq, defined in no cell']]);
    assert.equal((await code()).length, 4, 'the strict write changed nothing');
    const clean = await api('POST', '/notebooks/cells', { code: 'print(x + y)', strict: true });
    assert.equal(clean.status, 201);
    assert.equal(clean.body.cell.warnings, undefined);
  });
});

/**
 * A PythonAnalyzer over a fake of the builtin kernel's inspect channel: each cell analysed defines
 * nothing; `asked` gets the texts of each query.
 */
function fakeKernelAnalyzer(asked: (codes: string[]) => void): PythonAnalyzer {
  const kernel = {
    kind: 'builtin',
    executeScratchpad: () => Promise.reject(new Error('not used')),
    status: () => ({ state: 'idle' as const }),
    inspect: (query: InspectQuery) => {
      const cells = query.kind === 'analyze' ? query.cells : [];
      asked(cells.map((c) => c.code));
      return Promise.resolve({ cells: cells.map((c) => ({ id: c.id, defines: [], uses: [] })) });
    },
  };
  return new PythonAnalyzer({
    python: () => 'python3',
    script: path.resolve(__dirname, '../../src/kernels/builtin/kernel_inspect.py'),
    builtinKernel: async () => kernel,
    log: silentLog,
  });
}

describe('the code-check cache', () => {
  it('is bounded in characters: texts past the bound are analysed again, not kept', async () => {
    const asked: string[] = [];
    const analyzer = fakeKernelAnalyzer((codes) => asked.push(...codes));
    const text = (k: number) => `x_${k} = ${'1 + '.repeat(1_000_000)}1`; // 4 M characters each
    for (let k = 0; k < 12; k++) await analyzer.analyze('file:///nb.ipynb', [{ id: 'a', code: text(k) }]);
    asked.length = 0;
    await analyzer.analyze('file:///nb.ipynb', [{ id: 'a', code: text(0) }]);
    assert.ok(asked.length === 1 && asked[0] === text(0), 'the first text (48 M characters ago) was let go, and analysed again');
    await analyzer.analyze('file:///nb.ipynb', [{ id: 'a', code: text(0) }]);
    assert.equal(asked.length, 1, 'and is kept again');
  });

  it('an edit sends the edited cell alone, and the cells it knows get the same analysis objects as before', async () => {
    const asked: string[][] = [];
    const analyzer = fakeKernelAnalyzer((codes) => asked.push(codes));
    const codes = Array.from({ length: 500 }, (_, i) => `x${i} = ${i}`);
    const cells = () => codes.map((code, i) => ({ id: `c${i}`, code }));
    const opened = (await analyzer.analyze('file:///nb.ipynb', cells()))!;
    assert.equal(asked.length, 1);
    codes[7] = 'x7 = 700';
    const edited = (await analyzer.analyze('file:///nb.ipynb', cells()))!;
    assert.deepEqual(asked[1], ['x7 = 700'], 'the edit sent its cell alone');
    assert.ok(
      edited.every((a, i) => (i === 7 ? a !== opened[i] : a === opened[i])),
      'the other cells got the analyses handed out before',
    );
  });
});

describe('code warnings', () => {
  it('name at most 5 other cells, then how many more: 1,000 cells defining one name answer in linear size', () => {
    const analyses = Array.from({ length: 1000 }, (_, i) => ({ id: `c${i}`, defines: ['y'], uses: [] }));
    const warnings = codeWarnings(analyses, new Set(analyses.map((a) => a.id)));
    assert.deepEqual(warnings.get('c0'), ['defines y, also defined in cell c1, c2, c3, c4, c5 and 994 more']);
    assert.deepEqual(warnings.get('c3'), ['defines y, also defined in cell c0, c1, c2, c4, c5 and 994 more']);
    const chars = [...warnings.values()].flat().join('').length;
    assert.ok(chars < 1000 * 80, `${chars} characters of warnings for 1,000 cells`);
    const two = codeWarnings(analyses.slice(0, 3), new Set(['c0']));
    assert.deepEqual(two.get('c0'), ['defines y, also defined in cell c1, c2']);
  });
});

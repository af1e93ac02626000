import { strict as assert } from 'node:assert';
import type { RunningServer } from '../../src/server/app';
import { startTestServer, TEST_TOKEN } from './fakes/app';
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
  let ids: string[];

  const api = (method: string, route: string, body?: unknown) => jsonRequest(server.port, TEST_TOKEN, method, route, body);
  const code = async () => (await api('GET', '/notebooks/cells')).body.cells.map((c: Json) => c.code);

  beforeEach(async () => {
    docs = new FakeNotebooks();
    ids = docs.add(NOTEBOOK_A, [{ code: 'x = 1' }, { code: 'y = x + 1' }, { kind: 'markup', code: '# notes' }]);
    const analyzer = inspectAnalyzer();
    server = await startTestServer({ notebooks: docs, analyzer });
  });
  afterEach(() => server.close());

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

import { strict as assert } from 'node:assert';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { sleep } from '../../src/core/sleep';
import type { RunningServer } from '../../src/server/app';
import { startTestServer, TEST_TOKEN } from './fakes/app';
import { jsonRequest } from './fakes/http';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';
import type { PythonAnalyzer } from '../../src/kernels/pythonAnalyzer';
import { inspectAnalyzer } from './support/kernelRuns';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are read loosely
type Json = any;

const CODES = ["df = pd.read_csv('popcon.csv')", "df['c'] = df['a'] * 2", 'df.dtypes', 'other = 5'];

/**
 * What the answers say about staleness (fake notebooks, kernel_inspect.py's analysis in a real
 * Python): the cells an edit or a run left stale, run-stale's detail and output detail, and the
 * cells after a kernel restart.
 */
describe('answers that name the stale cells they caused', function () {
  this.timeout(30_000);
  let server: RunningServer;
  let docs: FakeNotebooks;
  let analyzer: PythonAnalyzer;
  let ids: string[];

  const api = (method: string, route: string, body?: unknown) => jsonRequest(server.port, TEST_TOKEN, method, route, body);
  const cells = async () => (await api('GET', '/notebooks/cells')).body.cells as Json[];
  const staleIds = (list: Json[]) => list.map((s: Json) => s.id);

  beforeEach(async () => {
    docs = new FakeNotebooks({ 'df.dtypes': { steps: [{ stdout: 'a int64\nc int64\n' }] } });
    ids = docs.add(
      NOTEBOOK_A,
      CODES.map((code) => ({ code })),
    );
    analyzer = inspectAnalyzer();
    server = await startTestServer({ notebooks: docs, analyzer });
    const ran = await api('POST', '/notebooks/run', { all: true, wait: true });
    assert.equal(ran.body.status, 'succeeded');
    assert.deepEqual(ran.body.stale, [], 'a run of all leaves nothing stale');
  });
  afterEach(() => {
    analyzer.dispose();
    return server.close();
  });

  it('an edit answers with the cells it left stale (id, index, reason): the changed cell and its readers', async () => {
    const [, change, show] = ids;
    await cells(); // read, so the edit is allowed
    const edited = await api('PATCH', `/notebooks/cells/${change}`, { code: "df['c'] = df['a'] * 3" });
    assert.equal(edited.status, 200);
    assert.equal(edited.body.cell.id, change);
    assert.deepEqual(edited.body.stale, [
      { id: change, index: 1, reason: 'its code was edited after it last ran' },
      {
        id: show,
        index: 2,
        reason: `cell ${change} (index 1), which changes df in place (df['c'] = …), is stale (cell ${change} (index 1): its code was edited after it last ran)`,
      },
    ]);
    const listed = await cells();
    assert.deepEqual(listed[2].dependsOn, [change, ids[0]]);
    assert.deepEqual(listed[2].dataflow, { from: 'code', reads: ['df'] });
    assert.equal(listed[2].stale.from, 'code');
  });

  it('a batch that edits and runs the changing cell answers with its readers stale; run-stale runs exactly them, honouring outputs', async () => {
    const [, change, show, other] = ids;
    await cells();
    const batch = await api('POST', '/notebooks/edits', {
      ops: [{ op: 'edit', ref: change, code: "df['c'] = df['a'] * 3" }],
      run: [change],
      wait: true,
    });
    assert.equal(batch.status, 200);
    assert.deepEqual(staleIds(batch.body.stale), [show]);
    assert.match(batch.body.stale[0].reason, /changes df in place \(df\['c'\] = …\), ran again after this cell last ran/);
    const rerun = await api('POST', '/notebooks/run-stale', { wait: true, outputs: 'none' });
    assert.equal(rerun.status, 200);
    assert.equal(rerun.body.detail, 'Runs 1 stale cell, in notebook order');
    assert.deepEqual(rerun.body.needs, []);
    assert.deepEqual(
      rerun.body.runs.map((r: Json) => r.cell.id),
      [show],
    );
    assert.equal('outputs' in rerun.body.runs[0].cell, false, 'outputs "none": no outputs key');
    assert.deepEqual(rerun.body.stale, []);
    assert.ok(!(await cells()).some((c) => c.stale), `nothing stale after run-stale; ${other} never was`);
    const nothing = await api('POST', '/notebooks/run-stale', { wait: true });
    assert.match(nothing.body.detail, /^Nothing is stale in /);
  });

  it('a run answers with the cells it left stale', async () => {
    const [, change, show] = ids;
    const run = await api('POST', `/notebooks/cells/${change}/run`, { wait: true, outputs: 'none' });
    assert.equal(run.status, 200);
    assert.deepEqual(staleIds(run.body.stale), [show]);
  });

  it('after a restart no cell is stale: their outputs are from an earlier kernel; run-stale names the cells a stale one needs, and rebuilds them when asked', async () => {
    const [load, change, show] = ids;
    await sleep(5);
    assert.equal((await api('POST', '/notebooks/restart', {})).status, 200);
    let listed = await cells();
    assert.deepEqual(
      listed.map((c) => [c.execution.inKernel, c.stale]),
      CODES.map(() => [false, null]),
    );
    assert.equal(listed[2].execution.outputsFrom, 'earlier kernel');
    assert.equal(listed[0].execution.outputsFrom, undefined, 'a cell without outputs has none from anywhere');
    // The display cell alone runs in the new kernel: it needs the two cells above.
    await api('POST', `/notebooks/cells/${show}/run`, { wait: true });
    listed = await cells();
    assert.match(listed[2].stale.reason, /has not run in this kernel/);
    const offered = await api('POST', '/notebooks/run-stale', { wait: false });
    assert.equal(offered.status, 202);
    assert.deepEqual(offered.body.queued, [show]);
    assert.deepEqual(staleIds(offered.body.needs), [load, change]);
    assert.match(offered.body.detail, /pass "rebuild": true/);
    await api('POST', `/notebooks/cells/${show}/wait`, {});
    const rebuilt = await api('POST', '/notebooks/run-stale', { wait: true, rebuild: true });
    assert.deepEqual(
      rebuilt.body.runs.map((r: Json) => r.cell.id),
      [load, change, show],
    );
    assert.ok(!(await cells()).some((c) => c.stale));
  });

  it('MCP run_stale honours "outputs" and says what it runs', async () => {
    const [, change, show] = ids;
    await api('POST', `/notebooks/cells/${change}/run`, { wait: true });
    const client = new Client({ name: 'stale-test', version: '0.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${server.port}/mcp/server`), {
        requestInit: { headers: { authorization: `Bearer ${TEST_TOKEN}` } },
      }),
    );
    try {
      const result = (await client.callTool({ name: 'run_stale', arguments: { outputs: 'none' } })) as CallToolResult;
      const body = (result.structuredContent ?? JSON.parse((result.content[0] as { text: string }).text)) as Json;
      assert.equal(body.detail, 'Runs 1 stale cell, in notebook order');
      assert.deepEqual(
        body.runs.map((r: Json) => r.cell.id),
        [show],
      );
      assert.equal('outputs' in body.runs[0].cell, false, 'outputs "none": no outputs key');
    } finally {
      await client.close();
    }
  });
});

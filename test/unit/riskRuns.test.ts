import { strict as assert } from 'node:assert';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Gate, type AccessMode, type AgentAction, type Answer, type RiskQuestion } from '../../src/core/agents/accessPolicy';
import { ClientRegistry, CREDENTIAL_HEADER } from '../../src/core/agents/clients';
import { RunHistory, type AgentRun } from '../../src/core/runs/runHistory';
import type { RunningServer } from '../../src/server/app';
import { startTestServer, TEST_TOKEN } from './fakes/app';
import { executeAsTester, request } from './fakes/http';
import { FakeKernel, FakeNotebookHost } from './fakes/notebookHost';
import { testScanner } from './riskScan.test';
import type { RiskScanner } from '../../src/core/model/riskScan';
import { renderSession, runSteps } from '../../src/access/export';

/** The person: a mode, and answers given in turn to what they are asked (with the findings shown). */
class FakePerson {
  current: AccessMode = 'ask-risky';
  answers: Answer[] = [];
  asked: { action: AgentAction; risk: RiskQuestion | undefined }[] = [];
  mode = () => this.current;
  maxRunMs = () => 0;
  ask = async (action: AgentAction, _left?: AbortSignal, risk?: RiskQuestion): Promise<Answer> => {
    this.asked.push({ action, risk });
    return this.answers.shift() ?? 'no-answer';
  };
}

const auth = { authorization: `Bearer ${TEST_TOKEN}` };
const done = (body: string) => JSON.parse(body.split('event: done\ndata: ')[1]!.split('\n')[0]!) as Record<string, unknown>;
const ok = { success: true, status: 'succeeded' as const, output: { mimetype: 'text/plain', data: '' } };

describe('runs by risk: the ask-risky mode, dry runs and the run history', function () {
  this.timeout(60_000);
  let server: RunningServer;
  let person: FakePerson;
  let kernel: FakeKernel;
  let saved: readonly AgentRun[];
  let history: RunHistory;
  const scanner = testScanner();
  /** While set, each scan's answer (from the real scanner) is held until it settles: a flood stays pending without racing a timer. */
  let held: Promise<void> | undefined;
  const heldScanner: RiskScanner = { scan: (...args) => scanner.scan(...args).then(async (found) => (await held, found)) };
  const waiting: (() => void)[] = [];
  /** Until the history holds `n` runs (an SSE answer can reach the client before its run is recorded). */
  const recorded = async (n: number) => {
    while (saved.length < n) await new Promise<void>((resolve) => waiting.push(resolve));
  };

  const execute = (code: string, headers: Record<string, string> = {}, body: object = {}) =>
    executeAsTester(server.port, code, { token: TEST_TOKEN, headers, body });
  const get = (path: string, headers: Record<string, string> = {}) =>
    request(server.port, { path, headers: { ...auth, 'x-agent-bridge-client': 'tester', ...headers } });

  beforeEach(async () => {
    person = new FakePerson();
    saved = [];
    history = new RunHistory({
      load: () => [],
      save: (runs) => {
        saved = [...runs];
        for (const wake of waiting.splice(0)) wake();
      },
    });
    const gate = new Gate(person, [history], new ClientRegistry());
    kernel = new FakeKernel({ 'print(1)': { steps: [{ name: 'stdout', text: '1\n' }], result: ok } });
    const host = new FakeNotebookHost([
      {
        info: {
          id: 's_aaaaaa',
          path: '/home/agent-test/project/a.ipynb',
          uri: 'file:///home/agent-test/project/a.ipynb',
          notebookType: 'jupyter-notebook',
        },
        kernel,
      },
    ]);
    server = await startTestServer({ host, access: gate, scanner: heldScanner, history });
  });
  afterEach(() => server.close());
  after(() => scanner.dispose());

  it('ask-risky: print(1) runs unasked; subprocess.run asks with its finding and line, and a denial runs nothing', async () => {
    const quiet = await execute('print(1)');
    assert.equal(quiet.status, 200);
    assert.equal(done(quiet.body)['risk'], undefined);
    assert.equal(person.asked.length, 0);

    person.answers = ['deny'];
    const risky = await execute('x = 1\nimport subprocess; subprocess.run(["true"])');
    assert.equal(risky.status, 403);
    const body = JSON.parse(risky.body) as {
      detail: string;
      risk: { findings: { pattern: string; line: number; tier: string }[] };
    };
    assert.match(body.detail, /denied this run.*line 2: subprocess\.run \(critical\)/);
    assert.deepEqual(
      body.risk.findings.map((f) => [f.pattern, f.line, f.tier]),
      [['subprocess.run', 2, 'critical']],
    );
    assert.equal(person.asked.length, 1);
    assert.equal(person.asked[0]!.risk!.report.findings[0]!.pattern, 'subprocess.run');
    assert.deepEqual(
      kernel.calls.map((c) => c.code),
      ['print(1)'],
      'the denied code never reached the kernel',
    );
    await recorded(2);
    assert.equal(saved.at(-1)!.status, 'refused', 'the refused run is in the history, with its risk');
    assert.equal(saved.at(-1)!.risk!.level, 'critical');
  });

  it('ask-risky: obfuscated process spawning still asks; medium findings (a workspace write, %pip) do not', async () => {
    for (const code of [
      '__import__("subprocess").call("id")',
      'getattr(__import__("os"), "sys" + "tem")("id")',
      '!ls ~',
      'exec(input())',
    ]) {
      person.answers = ['deny'];
      assert.equal((await execute(code)).status, 403, code);
    }
    assert.equal(person.asked.length, 4);
    person.asked = [];
    const medium = await execute('open("out.txt", "w").write("x")\n%pip install rich');
    assert.equal(medium.status, 200);
    assert.equal(person.asked.length, 0);
    assert.equal((done(medium.body)['risk'] as { level: string }).level, 'medium');
  });

  it('ask-risky: "allow this kind for 10 minutes" binds to the credential it hands out, and to that kind only', async () => {
    person.answers = ['allow-10-minutes'];
    const first = await execute('import subprocess; subprocess.run(["true"])');
    assert.equal(first.status, 200);
    const credential = first.headers[CREDENTIAL_HEADER] as string;
    assert.ok(credential);
    assert.equal((await execute('import subprocess; subprocess.run(["ls"])', { [CREDENTIAL_HEADER]: credential })).status, 200);
    assert.equal(person.asked.length, 1, 'the same kind with the credential is not asked about again');
    person.answers = ['deny', 'deny'];
    assert.equal(
      (await execute('import os; os.system("id")', { [CREDENTIAL_HEADER]: credential })).status,
      403,
      'another kind asks',
    );
    assert.equal(
      (await execute('import subprocess; subprocess.run(["ls"])')).status,
      403,
      'the same name without the credential asks',
    );
    assert.equal(person.asked.length, 3);
  });

  it('dryRun answers the findings and runs nothing, even where the mode would ask', async () => {
    const res = await execute('import subprocess; subprocess.run(["true"])', {}, { dryRun: true });
    assert.equal(res.status, 200);
    const body = JSON.parse(res.body) as { dryRun: boolean; risk: { level: string } };
    assert.deepEqual([body.dryRun, body.risk.level], [true, 'critical']);
    assert.equal(kernel.calls.length, 0);
    assert.equal(person.asked.length, 0);
    assert.equal(saved.length, 0, 'a dry run is not a run');
  });

  it('run history over HTTP: list, get and rerun (with changed code); another client sees none of them', async () => {
    person.current = 'full';
    // The credential its first run was answered with is what makes the runs its own.
    const mine = { [CREDENTIAL_HEADER]: (await execute('print(1)')).headers[CREDENTIAL_HEADER] as string };
    await execute('import subprocess; subprocess.run(["true"])', mine);
    await recorded(2);
    const listed = JSON.parse((await get('/notebooks/runs?notebook=s_aaaaaa', mine)).body) as {
      runs: (AgentRun & Record<string, unknown>)[];
    };
    assert.equal(listed.runs.length, 2);
    const [newest, oldest] = listed.runs;
    assert.equal(newest!.risk!.findings[0]!.pattern, 'subprocess.run');
    assert.equal(oldest!.status, 'succeeded');
    assert.equal(oldest!.code, undefined, 'a list carries no code');
    assert.deepEqual(Object.keys(oldest!).sort(), [
      'client',
      'codeHash',
      'detail',
      'durationMs',
      'id',
      'label',
      'notebook',
      'risk',
      'startedAt',
      'status',
      'transport',
    ]);

    const one = JSON.parse((await get(`/notebooks/runs/${oldest!.id}`, mine)).body) as AgentRun;
    assert.deepEqual([one.code, one.output], ['print(1)', '1\n']);

    const rerun = await request(server.port, {
      method: 'POST',
      path: `/notebooks/runs/${oldest!.id}/rerun`,
      headers: { ...auth, 'content-type': 'application/json', 'x-agent-bridge-client': 'tester', ...mine },
      body: JSON.stringify({}),
    });
    assert.equal(rerun.status, 200, rerun.body);
    const again = JSON.parse(rerun.body) as { success: boolean; stdout: string[]; run: string; rerunOf: string };
    assert.deepEqual([again.success, again.stdout, again.rerunOf], [true, ['1\n'], oldest!.id]);
    await recorded(3);
    assert.equal(saved.at(-1)!.id, again.run);
    const changed = await request(server.port, {
      method: 'POST',
      path: `/notebooks/runs/${oldest!.id}/rerun`,
      headers: { ...auth, 'content-type': 'application/json', 'x-agent-bridge-client': 'tester', ...mine },
      body: JSON.stringify({ code: 'print(2)' }),
    });
    assert.equal(changed.status, 200);
    assert.deepEqual(
      kernel.calls.map((c) => c.code),
      ['print(1)', 'import subprocess; subprocess.run(["true"])', 'print(1)', 'print(2)'],
    );

    // The same name without the credential, and another client: neither sees them.
    assert.deepEqual(JSON.parse((await get('/notebooks/runs')).body), { runs: [] });
    const other = { 'x-agent-bridge-client': 'someone-else' };
    assert.deepEqual(JSON.parse((await get('/notebooks/runs', other)).body), { runs: [] });
    assert.equal((await get(`/notebooks/runs/${oldest!.id}`, other)).status, 404);
  });

  it("run history over MCP: list_runs, get_run and rerun see the MCP client's own runs only", async () => {
    person.current = 'full';
    await execute('print(1)'); // another client's (HTTP, no credential)
    const client = new Client({ name: 'unit-agent', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${server.port}/mcp/server`), {
        requestInit: { headers: auth },
      }),
    );
    try {
      const ran = (await client.callTool({
        name: 'execute_code',
        arguments: { session_id: 's_aaaaaa', code: 'print(1)' },
      })) as CallToolResult;
      assert.equal((ran.structuredContent as { success: boolean }).success, true);
      const list = (await client.callTool({ name: 'list_runs', arguments: { notebook: 's_aaaaaa' } })) as CallToolResult;
      const runs =
        (list.structuredContent as { runs: AgentRun[] } | undefined)?.runs ??
        (JSON.parse((list.content[0] as { text: string }).text) as { runs: AgentRun[] }).runs;
      assert.equal(runs.length, 1, 'only its own run');
      assert.equal(runs[0]!.label, 'mcp execute_code');
      const got = (await client.callTool({ name: 'get_run', arguments: { run_id: runs[0]!.id } })) as CallToolResult;
      assert.match((got.content[0] as { text: string }).text, /"code":"print\(1\)"/);
      const again = (await client.callTool({
        name: 'rerun',
        arguments: { run_id: runs[0]!.id, code: 'print(1)' },
      })) as CallToolResult;
      assert.equal(again.isError, undefined, JSON.stringify(again.content));
      assert.equal(kernel.calls.length, 3);
    } finally {
      await client.close();
    }
  });

  it('a flood of scans does not hold the bridge: /health answers while 24 scans (fewer than one client may hold at once) are still being read', async () => {
    person.current = 'full';
    // Distinct code (no answer is kept for another), each long enough to take the scanner a while.
    const big = (i: number) =>
      `${Array.from({ length: 1500 }, (_, j) => `v${j} = ${i} + ${j}`).join('\n')}\nimport subprocess\nsubprocess.run(["x${i}"])`;
    let answered = 0;
    let release!: () => void;
    held = new Promise((resolve) => (release = resolve));
    const flood = Array.from({ length: 24 }, (_, i) => execute(big(i), {}, { dryRun: true }).then((r) => (answered++, r)));
    try {
      const health = await get('/health');
      assert.equal(health.status, 200);
      assert.equal(answered, 0, 'no scan was answered before /health');
    } finally {
      release();
      held = undefined;
    }
    const results = await Promise.all(flood);
    assert.ok(
      results.every((r) => r.status === 200 && (JSON.parse(r.body) as { risk: { level: string } }).risk.level === 'critical'),
    );
  });
});

describe('agent runs as a notebook', () => {
  it('each run is a markdown cell (client, time, status, risk) and a code cell with its code and output, oldest first', () => {
    const run = (id: string, startedAt: string, code: string, risk: AgentRun['risk']): AgentRun => ({
      id,
      client: 'agent #1 (says it is tester)',
      owner: 'x',
      transport: 'http',
      label: 'scratchpad run',
      notebook: 's_aaaaaa',
      code,
      codeHash: 'h',
      status: 'succeeded',
      durationMs: 12,
      startedAt,
      detail: '',
      output: 'out\n',
      risk,
    });
    const finding = {
      tier: 'critical' as const,
      kind: 'process',
      pattern: 'subprocess.run',
      line: 2,
      reason: 'starts a program: ls',
    };
    const nb = JSON.parse(
      renderSession(
        runSteps([
          run('run_b', '2026-01-01T00:00:02.000Z', 'import subprocess\nsubprocess.run(["ls"])', {
            level: 'critical',
            findings: [finding],
          }),
          run('run_a', '2026-01-01T00:00:01.000Z', 'print(1)', null),
        ]),
        'ipynb',
        'agent runs',
      ),
    ) as { nbformat: number; cells: { cell_type: string; source: string[]; outputs?: { text: string[] }[] }[] };
    assert.equal(nb.nbformat, 4);
    assert.deepEqual(
      nb.cells.map((c) => c.cell_type),
      ['markdown', 'code', 'markdown', 'code'],
    );
    assert.match(
      nb.cells[0]!.source.join(''),
      /by agent #1 \(says it is tester\), 2026-01-01T00:00:01.000Z — succeeded.*risk: nothing found/s,
    );
    assert.equal(nb.cells[1]!.source.join(''), 'print(1)');
    assert.deepEqual(nb.cells[1]!.outputs![0]!.text, ['out\n']);
    assert.match(nb.cells[2]!.source.join(''), /risk: line 2: subprocess\.run \(critical\): starts a program: ls/);
    assert.equal(nb.cells[3]!.source.join(''), 'import subprocess\nsubprocess.run(["ls"])');
  });
});

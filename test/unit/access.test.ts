import { strict as assert } from 'node:assert';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { actionCode, Gate, rule, summarize, type ActionEnd, type AgentAction } from '../../src/core/agents/accessPolicy';
import { ClientRegistry } from '../../src/core/agents/clients';
import { ended as endedWith } from '../../src/server/guardRoutes';
import type { RunningServer } from '../../src/server/app';
import { startTestServer, TEST_TOKEN } from './fakes/app';
import { executeAsTester, request } from './fakes/http';
import { FakeKernel, FakeNotebookHost } from './fakes/notebookHost';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';
import { sleep } from '../../src/core/sleep';
import { FakePerson } from './fakes/person';

const request$ = {
  transport: 'http' as const,
  ...new ClientRegistry().identify(undefined, 'agent-1'),
  label: 'scratchpad run',
  notebook: 's_aaaaaa',
  code: 'print(1)',
};

describe('access policy (pure rules)', () => {
  it('full allows all; off refuses all but open; read-only allows reads; ask asks for the rest', () => {
    assert.equal(rule('full', 'execute'), 'allow');
    assert.equal(rule('off', 'open'), 'allow');
    for (const kind of ['read', 'gateway', 'edit', 'save', 'execute', 'run'] as const) {
      const off = rule('off', kind);
      assert.ok(typeof off === 'object' && off.refuse.includes('off'), kind);
    }
    assert.equal(rule('read-only', 'read'), 'allow');
    assert.equal(rule('read-only', 'gateway'), 'allow');
    const ro = rule('read-only', 'edit');
    assert.ok(typeof ro === 'object' && ro.refuse.includes('person chose read-only'));
    assert.equal(rule('ask', 'read'), 'allow');
    assert.equal(rule('ask', 'run'), 'ask');
  });

  it("takes an action's code, else its inputs as JSON, else nothing (a bare interrupt is summarized by its label)", () => {
    assert.equal(actionCode('print(1)', { timeout: 5 }), 'print(1)');
    assert.equal(actionCode(undefined, { ref: 'c1' }), '{"ref":"c1"}');
    assert.equal(actionCode(undefined, {}), '');
    assert.equal(summarize('interrupt', actionCode(undefined, {})), 'interrupt');
  });

  it('summarizes code as its first line, cut, with the rest counted', () => {
    assert.equal(summarize('x', '\n\nimport os\nos.getcwd()\n'), 'import os (2 lines)');
    assert.equal(summarize('x', '# load the data\n  # quietly\nimport pandas as pd\n'), 'import pandas as pd (3 lines)');
    assert.equal(summarize('x', '# only a comment'), '# only a comment');
    assert.equal(summarize('cell run', ''), 'cell run');
    assert.ok(summarize('x', 'a'.repeat(300)).length <= 100);
  });
});

describe('Gate', () => {
  let person: FakePerson;
  let ended: { action: AgentAction; end: ActionEnd }[];
  let started: AgentAction[];
  let gate: Gate;
  beforeEach(() => {
    person = new FakePerson();
    ended = [];
    started = [];
    gate = new Gate(
      person,
      [{ started: (a) => started.push(a), ended: (action, end) => ended.push({ action, end }) }],
      new ClientRegistry(),
    );
  });

  it('lets reads through unrecorded, but remembers their client', async () => {
    person.current = 'ask';
    assert.equal(await gate.enter({ ...request$, kind: 'read' }), null);
    assert.equal(started.length, 0);
    assert.ok(gate.clients.has('agent-1 (unverified)'));
  });

  it('records an allowed action with its outcome and duration', async () => {
    const activity = await gate.enter({ ...request$, kind: 'execute' });
    assert.ok(activity);
    activity.note('1\n');
    activity.settle('ok');
    activity.end('failed');
    assert.equal(ended.length, 1);
    assert.equal(ended[0]!.end.outcome, 'succeeded', 'the settled outcome wins over the derived one');
    assert.equal(ended[0]!.end.output, '1\n');
    assert.equal(ended[0]!.action.summary, 'print(1)');
  });

  it('refuses with a 403 and records the refusal', async () => {
    person.current = 'read-only';
    await assert.rejects(gate.enter({ ...request$, kind: 'edit' }), (e: { status: number; detail: string }) => {
      assert.equal(e.status, 403);
      assert.match(e.detail, /read-only/);
      return true;
    });
    assert.equal(ended[0]!.end.outcome, 'refused');
  });

  it('asks in ask mode: deny and no answer refuse; allow for 10 minutes binds to a credential minted for that client', async () => {
    person.current = 'ask';
    person.answers = ['deny', 'no-answer', 'allow-10-minutes'];
    await assert.rejects(gate.enter({ ...request$, kind: 'execute' }), /denied/);
    await assert.rejects(gate.enter({ ...request$, kind: 'execute' }), /did not answer in time/);
    const issued: string[] = [];
    assert.ok(await gate.enter({ ...request$, kind: 'execute', issue: (c) => issued.push(c) }));
    assert.equal(issued.length, 1, 'the allowed client is handed a credential');
    const holder = gate.identities.identify(issued[0], 'agent-1');
    assert.ok(await gate.enter({ ...request$, ...holder, kind: 'execute' }));
    assert.ok(await gate.enter({ ...request$, ...holder, kind: 'run' }));
    assert.equal(person.asked.length, 3, 'the grant covers the next actions of the client holding the credential');
    person.answers = ['deny', 'deny'];
    await assert.rejects(gate.enter({ ...request$, kind: 'execute' }), /denied/, 'the same name without the credential is asked');
    const forged = gate.identities.identify('made-up-credential', 'agent-1');
    assert.equal(forged.credential, undefined, 'a credential the bridge never minted counts for nothing');
    await assert.rejects(gate.enter({ ...request$, ...forged, kind: 'execute' }), /denied/);
    assert.equal(person.asked.length, 5);
  });

  it("keeps the head of a batch's answer without reading the whole answer", async () => {
    const activity = await gate.enter({ ...request$, kind: 'edit' });
    let reads = 0;
    // 1,000 cells of 10,000 characters each (10 MB as JSON); each field read is counted.
    const cell = (i: number) =>
      Object.defineProperties(
        {},
        {
          id: { enumerable: true, get: () => (reads++, `c${i}`) },
          code: { enumerable: true, get: () => (reads++, 'x'.repeat(10_000)) },
        },
      );
    const answer = { cells: Array.from({ length: 1000 }, (_, i) => cell(i)), cellCount: 1000 };
    assert.equal(await endedWith(activity!, () => answer), answer);
    const output = ended[0]!.end.output;
    assert.equal(output, JSON.stringify(answer).slice(0, output.length), 'the head of the answer as JSON');
    assert.ok(output.length >= 1000 && output.length <= 2000, `${output.length} characters kept`);
    reads = 0;
    await endedWith((await gate.enter({ ...request$, kind: 'edit' }))!, () => answer);
    assert.ok(reads <= 4, `${reads} fields of 2,000 read to keep the head`);
  });

  it('names clients short and honestly: "name (unverified)", "name ✓" once the person allowed that very client; the long form says the rest', async () => {
    person.current = 'ask';
    person.answers = ['allow-10-minutes'];
    const issued: string[] = [];
    await gate.enter({ ...request$, kind: 'execute', issue: (c) => issued.push(c) });
    const approved = gate.identities.identify(issued[0], 'agent-1');
    assert.equal(approved.client, 'agent-1 ✓');
    assert.match(
      approved.about,
      /^an agent that says it is agent-1, holding credential #\d+ the bridge minted for it; you allowed it for 10 minutes at /,
    );
    assert.equal(gate.identities.identify(undefined, 'agent-1').client, 'agent-1 (unverified)', 'the same name without it');
    const long = gate.identities.identify(undefined, 'agent-bridge-harness-with-a-long-name');
    assert.equal(long.client, 'agent-bridge-harness-wi… (unverified)');
    assert.match(long.about, /agent-bridge-harness-with-a-long-name/);
    assert.equal(gate.identities.identify(undefined, undefined).client, 'unnamed agent (unverified)');
  });

  it('stopAll stops every action under way, which then ends as interrupted', async () => {
    const a = await gate.enter({ ...request$, kind: 'execute' });
    let heard = false;
    a!.onStop(() => (heard = true));
    assert.equal(gate.stopAll().length, 1);
    assert.ok(heard);
    a!.end('ok');
    assert.equal(ended[0]!.end.outcome, 'interrupted');
  });
});

describe('access over HTTP and MCP (fake kernel)', () => {
  let server: RunningServer;
  let port = 0;
  let person: FakePerson;
  let ended: { action: AgentAction; end: ActionEnd }[];
  let gate: Gate;
  let kernel: FakeKernel;
  let docs: FakeNotebooks;
  const auth = { authorization: `Bearer ${TEST_TOKEN}` };
  const execute = (code: string, abortAfterMs?: number) =>
    executeAsTester(port, code, { token: TEST_TOKEN, ...(abortAfterMs !== undefined && { abortAfterMs }) });
  const done = (body: string) => JSON.parse(body.split('event: done\ndata: ')[1]!.split('\n')[0]!) as Record<string, unknown>;

  beforeEach(async () => {
    person = new FakePerson();
    ended = [];
    gate = new Gate(person, [{ started() {}, ended: (action, end) => ended.push({ action, end }) }], new ClientRegistry());
    kernel = new FakeKernel({
      'print(1)': {
        steps: [{ name: 'stdout', text: '1\n' }],
        result: { success: true, status: 'succeeded', output: { mimetype: 'text/plain', data: '' } },
      },
      forever: {
        steps: [{ name: 'stdout', text: 'started\n' }, { waitForAbort: true }],
        result: { success: true, status: 'succeeded', output: { mimetype: 'text/plain', data: '' } },
      },
    });
    const host = new FakeNotebookHost([
      { info: { id: 's_aaaaaa', path: '/work/a.ipynb', uri: 'file:///work/a.ipynb', notebookType: 'jupyter-notebook' }, kernel },
    ]);
    docs = new FakeNotebooks();
    docs.add(NOTEBOOK_A, [{ code: 'a = 1' }]);
    server = await startTestServer({ host, access: gate, notebooks: docs });
    port = server.port;
  });
  afterEach(() => server.close());

  it('records a scratchpad run with its client, code and outcome', async () => {
    const res = await execute('print(1)');
    assert.equal(res.status, 200);
    assert.equal(done(res.body)['success'], true);
    assert.equal(ended.length, 1);
    const { action, end } = ended[0]!;
    assert.deepEqual(
      [action.client, action.label, action.notebook, action.code],
      ['tester (unverified)', 'scratchpad run', 's_aaaaaa', 'print(1)'],
    );
    assert.equal(end.outcome, 'succeeded');
    assert.equal(end.output, '1\n');
  });

  it('an HTTP client is handed a credential with its first write; undo binds to it, never to the name it sends', async () => {
    const bob = { ...auth, 'content-type': 'application/json', 'x-agent-bridge-client': 'bob', 'user-agent': 'curl/7.88.1' };
    const post = (path: string, body: object, headers: Record<string, string> = bob) =>
      request(port, { method: 'POST', path, headers, body: JSON.stringify(body) });
    const made = await post('/notebooks/edits', { ops: [{ op: 'create', code: 'mine = 1' }] });
    assert.equal(made.status, 200, made.body);
    const credential = made.headers['x-agent-bridge-credential'];
    assert.ok(typeof credential === 'string' && credential.length >= 20);
    const sameName = await post('/notebooks/undo', {});
    assert.equal(sameName.status, 403, sameName.body);
    assert.match(JSON.parse(sameName.body).detail, /X-Agent-Bridge-Credential/);
    assert.deepEqual(docs.codes(NOTEBOOK_A.uri), ['a = 1', 'mine = 1']);
    const own = await post('/notebooks/undo', {}, { ...bob, 'x-agent-bridge-credential': credential });
    assert.equal(own.status, 200, own.body);
    assert.equal(own.headers['x-agent-bridge-credential'], undefined, 'a client that sent its credential gets no new one');
    assert.deepEqual(docs.codes(NOTEBOOK_A.uri), ['a = 1']);
  });

  it("two plain curl clients (no name, curl's User-Agent) cannot undo each other's changes", async () => {
    const curl = { ...auth, 'content-type': 'application/json', 'user-agent': 'curl/7.88.1' };
    const post = (path: string, body: object, credential?: string) =>
      request(port, {
        method: 'POST',
        path,
        headers: { ...curl, ...(credential && { 'x-agent-bridge-credential': credential }) },
        body: JSON.stringify(body),
      });
    const first = await post('/notebooks/edits', { ops: [{ op: 'create', code: 'first = 1' }] });
    assert.equal(first.status, 200, first.body);
    // The second process sends what the first sends, but the credential it was handed.
    const borrowed = await post('/notebooks/undo', {});
    assert.equal(borrowed.status, 403, borrowed.body);
    assert.deepEqual(docs.codes(NOTEBOOK_A.uri), ['a = 1', 'first = 1']);
    const second = await post('/notebooks/edits', { ops: [{ op: 'create', code: 'second = 2' }] });
    const mine = second.headers['x-agent-bridge-credential'] as string;
    assert.notEqual(mine, first.headers['x-agent-bridge-credential'], 'each client is handed a credential of its own');
    assert.equal((await post('/notebooks/undo', {}, mine)).status, 200);
    const more = await post('/notebooks/undo', {}, mine);
    assert.equal(more.status, 404, more.body);
    assert.deepEqual(docs.codes(NOTEBOOK_A.uri), ['a = 1', 'first = 1'], "the first client's change is not the second's to undo");
  });

  it('read-only: reads answer, execute is a 403 that says the person chose read-only', async () => {
    person.current = 'read-only';
    assert.equal((await request(port, { path: '/api/sessions', headers: auth })).status, 200);
    const res = await execute('print(1)');
    assert.equal(res.status, 403);
    assert.match(JSON.parse(res.body).detail, /person chose read-only/);
    assert.equal(ended[0]!.end.outcome, 'refused');
  });

  it('off: only /health answers', async () => {
    person.current = 'off';
    assert.equal((await request(port, { path: '/health' })).status, 200);
    assert.equal((await request(port, { path: '/api/sessions', headers: auth })).status, 403);
    const mcp = await request(port, {
      method: 'POST',
      path: '/mcp/server',
      headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    assert.equal(mcp.status, 403);
  });

  it('ask: the person allows, then denies; a denial is a 403 and the kernel never sees the code', async () => {
    person.current = 'ask';
    person.answers = ['allow', 'deny'];
    assert.equal((await execute('print(1)')).status, 200);
    const denied = await execute('print(1)');
    assert.equal(denied.status, 403);
    assert.match(JSON.parse(denied.body).detail, /denied/);
    assert.equal(person.asked[0]!.code, 'print(1)');
  });

  it('ask: run many is asked about as a run, a save as a save, clear outputs as an edit', async () => {
    person.current = 'ask';
    person.answers = ['deny', 'deny', 'deny'];
    for (const path of ['/notebooks/run', '/notebooks/save', '/notebooks/clear-outputs']) {
      const res = await request(port, {
        method: 'POST',
        path,
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ all: true }),
      });
      assert.equal(res.status, 403, path);
    }
    assert.deepEqual(
      person.asked.map((a) => [a.kind, a.label]),
      [
        ['run', 'cells run'],
        ['save', 'notebook save'],
        ['edit', 'clear outputs'],
      ],
    );
  });

  it('a run that reaches the limit is interrupted and reported as timed out', async () => {
    person.limitMs = 200;
    const res = await execute('forever');
    const body = done(res.body);
    assert.equal(body['success'], false);
    assert.equal(body['status'], 'timed_out');
    assert.match(res.body, /limit the person set/);
    assert.equal(ended[0]!.end.outcome, 'timed_out');
  });

  it('a client that leaves while the person is asked withdraws its request: the prompt is told, nothing runs', async () => {
    person.current = 'ask';
    let heard: AbortSignal | undefined;
    person.ask = (action, left) => {
      person.asked.push(action);
      heard = left;
      return new Promise((resolve) => left!.addEventListener('abort', () => resolve('withdrawn')));
    };
    await execute('print(1)', 150).catch(() => undefined);
    await sleep(100);
    assert.equal(heard?.aborted, true, 'the prompt heard the client leave');
    assert.equal(ended[0]!.end.outcome, 'refused');
    assert.match(ended[0]!.end.detail, /withdrawn/);
    assert.equal(kernel.calls.length, 0, 'nothing ran');
  });

  it('an approval that lands after the client left starts nothing', async () => {
    person.current = 'ask';
    person.ask = async (action) => {
      person.asked.push(action);
      await sleep(300); // the person clicks Allow late, whatever happened
      return 'allow';
    };
    await execute('print(1)', 100).catch(() => undefined);
    await sleep(400);
    assert.equal(person.asked.length, 1);
    assert.match(ended[0]!.end.detail, /withdrawn/);
    assert.equal(kernel.calls.length, 0, 'nothing ran');
  });

  it('a batch that also runs cells is asked about as an edit and a run, and says so', async () => {
    person.current = 'ask';
    person.answers = ['deny'];
    const res = await request(port, {
      method: 'POST',
      path: '/notebooks/edits',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ notebook: 's_aaaaaa', ops: [{ op: 'create', code: 'x = 1' }], run: [0] }),
    });
    assert.equal(res.status, 403);
    assert.deepEqual(
      person.asked.map((a) => [a.kind, a.also, a.label]),
      [['edit', ['run'], 'batch (edit and run)']],
    );
  });

  it('Stop Agents interrupts a run under way', async () => {
    const pending = execute('forever');
    await sleep(150);
    assert.equal(gate.stopAll().length, 1);
    const body = done((await pending).body);
    assert.equal(body['success'], false);
    assert.equal(body['status'], 'interrupted');
    assert.equal(ended[0]!.end.outcome, 'interrupted');
  });

  describe('MCP tools', () => {
    let client: Client;
    const call = async (name: string, args: Record<string, unknown> = {}) =>
      (await client.callTool({ name, arguments: args })) as CallToolResult & { structuredContent?: Record<string, unknown> };
    beforeEach(async () => {
      client = new Client({ name: 'unit-agent', version: '1.2.3' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp/server`), { requestInit: { headers: auth } }),
      );
    });
    afterEach(() => client.close());

    it('read-only: list_sessions answers, execute_code is refused with the same sentence', async () => {
      person.current = 'read-only';
      assert.equal((await call('list_sessions')).isError, undefined);
      const refused = await call('execute_code', { session_id: 's_aaaaaa', code: 'print(1)' });
      assert.equal(refused.isError, true);
      assert.match(JSON.stringify(refused.content), /person chose read-only/);
    });

    it('ask: run_cells is asked about as a run, save_notebook as a save; list_cells is not asked about', async () => {
      person.current = 'ask';
      person.answers = ['deny', 'deny'];
      assert.equal((await call('run_cells', { all: true })).isError, true);
      assert.equal((await call('save_notebook', { all: true })).isError, true);
      await call('list_cells');
      assert.deepEqual(
        person.asked.map((a) => [a.kind, a.label]),
        [
          ['run', 'mcp run_cells'],
          ['save', 'mcp save_notebook'],
        ],
      );
    });

    it('records tool calls under the client that initialized, with their outcome', async () => {
      await call('execute_code', { session_id: 's_aaaaaa', code: 'print(1)' });
      assert.equal(ended.length, 1);
      assert.equal(ended[0]!.action.client, 'unit-agent/1.2.3 (unverified)');
      assert.match(
        ended[0]!.action.about,
        /^an agent that says it is unit-agent\/1\.2\.3, holding MCP session #\d+ the bridge minted for it$/,
      );
      assert.equal(ended[0]!.action.label, 'mcp execute_code');
      assert.equal(ended[0]!.end.outcome, 'succeeded');
    });

    it('a clientInfo the SDK rejected names no one: the session it was offered stays unknown', async () => {
      const post = (message: unknown, session?: string) =>
        request(port, {
          method: 'POST',
          path: '/mcp/server',
          headers: {
            ...auth,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            ...(session ? { 'mcp-session-id': session } : {}),
          },
          body: JSON.stringify(message),
        });
      // No protocolVersion: the SDK refuses this initialize.
      const init = await post({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { clientInfo: { name: 'claude-code', version: '1' } },
      });
      const offered = init.headers['mcp-session-id'];
      assert.equal(typeof offered, 'string');
      assert.match(init.body, /error/);
      const tool = {
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'execute_code', arguments: { session_id: 's_aaaaaa', code: 'print(1)' } },
      };
      await post(tool, offered as string);
      assert.equal(ended.length, 1);
      assert.doesNotMatch(ended[0]!.action.client, /claude-code/);
      assert.equal(ended[0]!.action.credential, undefined);
    });

    /** A raw `initialize`, as any process can send, naming itself `name`. */
    const initialize = (name: string) =>
      request(port, {
        method: 'POST',
        path: '/mcp/server',
        headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name, version: '1' } },
        }),
      });

    it('600 initializes leave a granted client and a client with checkpoints intact', async () => {
      person.current = 'ask';
      person.answers = ['allow-10-minutes'];
      await call('execute_code', { session_id: 's_aaaaaa', code: 'print(1)' });
      assert.equal(person.asked.length, 1);
      person.current = 'full';
      const editor = new Client({ name: 'editor', version: '1' });
      await editor.connect(
        new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp/server`), { requestInit: { headers: auth } }),
      );
      try {
        const made = (await editor.callTool({ name: 'create_cell', arguments: { code: 'mine = 1' } })) as CallToolResult;
        assert.equal(made.isError, undefined, JSON.stringify(made.content));
        // Another process floods the registry, each initialize under a new name (so no per-client bound stops it).
        for (let i = 0; i < 600; i++) assert.equal((await initialize(`flood-${i}`)).status, 200);
        person.current = 'ask';
        await call('execute_code', { session_id: 's_aaaaaa', code: 'print(1)' });
        assert.equal(person.asked.length, 1, 'the granted client was asked again: its grant is gone');
        person.current = 'full';
        const undone = (await editor.callTool({ name: 'undo_last_change', arguments: {} })) as CallToolResult;
        assert.equal(undone.isError, undefined, JSON.stringify(undone.content));
        assert.deepEqual(docs.codes(NOTEBOOK_A.uri), ['a = 1'], "the editor's change is undone");
      } finally {
        await editor.close();
      }
    }).timeout(60_000);

    it('bounds initialize per client and per minute with a 429 that says what to do', async () => {
      let answer = await initialize('eager');
      for (let i = 0; i < 100 && answer.status === 200; i++) answer = await initialize('eager');
      assert.equal(answer.status, 429, answer.body);
      assert.match(JSON.parse(answer.body).detail, /Mcp-Session-Id/);
      assert.ok(Number(answer.headers['retry-after']) > 0, 'Retry-After');
      assert.equal((await initialize('another')).status, 200, 'another client is not held back');
    });

    it('a capped run is reported as timed out', async () => {
      person.limitMs = 200;
      const result = await call('execute_code', { session_id: 's_aaaaaa', code: 'forever' });
      assert.equal(result.structuredContent?.['success'], false);
      assert.equal(ended[0]!.end.outcome, 'timed_out');
    });
  });
});

import { strict as assert } from 'node:assert';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Gate, type AgentAction } from '../../src/core/agents/accessPolicy';
import { ClientRegistry } from '../../src/core/agents/clients';
import {
  ACTIVE_MS,
  type ForcedWrite,
  MARK_FADE_MS,
  PERSON_EDITING_MS,
  PERSON_RECENT_MS,
  Presence,
} from '../../src/core/agents/presence';
import { Ticket } from '../../src/core/model/runTicket';
import { KERNEL_READER } from '../../src/core/model/versions';
import { sleep } from '../../src/core/sleep';
import type { RunningServer } from '../../src/server/app';
import { startTestServer, TEST_TOKEN } from './fakes/app';
import { FakeKernel, FakeNotebookHost } from './fakes/notebookHost';
import { request } from './fakes/http';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- answers are read loosely
type Json = any;

const NB = 'file:///work/a.ipynb';
const bob = { key: 'claim:bob', label: 'bob' };
const alice = { key: 'claim:alice', label: 'alice' };
const cells = (...ids: string[]) => ids.map((id) => ({ id, execution: { status: 'idle' as const } }));
const notebook = { uri: NB, sessionId: 's_a', path: '/work/a.ipynb' };

describe('presence (who is where in a notebook)', () => {
  let clock: number;
  let presence: Presence;
  beforeEach(() => {
    clock = 1_000_000;
    presence = new Presence(
      (named) => (named === undefined || named === 's_a' ? NB : undefined),
      () => clock,
    );
  });

  it('a read or an edit shows on its cell for a few seconds, then fades; its agent stays active for 30 s', () => {
    presence.read(bob, NB, 'c1');
    presence.wrote(alice, NB, ['c2', 'c3']);
    assert.deepEqual(presence.marks(NB), [
      { cell: 'c1', agent: 'bob', verb: 'reading' },
      { cell: 'c3', agent: 'alice', verb: 'editing' },
    ]);
    assert.deepEqual(
      presence.agents(NB).map((a) => [a.name, a.verb, a.cell, a.now]),
      [
        ['alice', 'editing', 'c3', true],
        ['bob', 'reading', 'c1', true],
      ],
    );
    clock += MARK_FADE_MS;
    assert.deepEqual(presence.marks(NB), [], 'faded');
    assert.deepEqual(
      presence.agents(NB).map((a) => [a.name, a.verb, a.cell, a.now, a.secondsAgo]),
      [
        ['alice', 'editing', 'c3', false, 5],
        ['bob', 'reading', 'c1', false, 5],
      ],
      'what each did last',
    );
    clock += ACTIVE_MS - MARK_FADE_MS;
    assert.deepEqual(presence.agents(NB), [], 'idle agents are gone');
    assert.equal(presence.nextExpiry(), undefined);
  });

  it('a run shows while its ticket is open, however long, and goes when it ends', async () => {
    const ticket = new Ticket('run_1', 'c2');
    presence.ran(bob, NB, [ticket]);
    assert.deepEqual(presence.marks(NB), [{ cell: 'c2', agent: 'bob', verb: 'running', phase: 'queued' }]);
    ticket.step('running');
    presence.read(bob, NB, 'c5'); // reading elsewhere meanwhile
    clock += ACTIVE_MS * 10;
    assert.deepEqual(presence.marks(NB), [{ cell: 'c2', agent: 'bob', verb: 'running', phase: 'running' }]);
    assert.deepEqual(
      presence.agents(NB).map((a) => [a.verb, a.cell, a.running]),
      [['running', 'c2', ['c2']]],
      'a read that faded while the run goes on: the run is what it works on',
    );
    ticket.step('ended');
    await ticket.ended;
    assert.deepEqual(presence.marks(NB), []);
    assert.deepEqual(presence.agents(NB), []);
  });

  it('tells the person views of starts and ends of runs, not of every output', async () => {
    const heard: string[] = [];
    presence.onDidChange((uri) => heard.push(uri));
    const ticket = new Ticket('run_1', 'c2');
    presence.ran(bob, NB, [ticket]);
    ticket.step('running');
    for (let k = 0; k < 50; k++) ticket.step('running'); // outputs
    ticket.step('ended');
    await ticket.ended;
    assert.equal(heard.length, 3, `heard ${heard.length} changes`);
  });

  it("the person's keystrokes: editing for 10 s, reported for 30 s; selections with their age", () => {
    presence.selected(NB, ['c1']);
    clock += 2_000;
    presence.typed(NB, 'c2');
    presence.selected(NB, ['c2']);
    assert.equal(presence.personTyping(NB, 'c2'), 0);
    assert.equal(presence.personTyping(NB, 'c1'), undefined);
    clock += 3_000;
    let answer = presence.answer(notebook, cells('c1', 'c2'), bob);
    assert.deepEqual(answer.person.cells, [
      { id: 'c1', index: 0, selected: false, secondsSinceSelected: 5, editing: false },
      { id: 'c2', index: 1, selected: true, secondsSinceSelected: 3, secondsSinceKeystroke: 3, editing: true },
    ]);
    clock += PERSON_EDITING_MS - 3_000;
    assert.equal(presence.personTyping(NB, 'c2'), undefined, '10 s after the last keystroke');
    answer = presence.answer(notebook, cells('c1', 'c2'), bob);
    assert.deepEqual(
      answer.person.cells.map((c) => [c.id, c.editing, c.secondsSinceKeystroke]),
      [
        ['c1', false, undefined],
        ['c2', false, 10],
      ],
    );
    clock += PERSON_RECENT_MS;
    assert.deepEqual(presence.answer(notebook, cells('c1', 'c2'), bob).person.cells, []);
  });

  it("the bridge's own requests (code mode, the person's commands) are no agent's whereabouts", () => {
    presence.read(KERNEL_READER, NB, 'c1');
    presence.wrote(KERNEL_READER, NB, ['c1']);
    presence.ran(KERNEL_READER, NB, [new Ticket('run_1', 'c1')]);
    assert.deepEqual(presence.agents(NB), []);
  });

  it("an agent's scratchpad run (from the activity record) shows it running code in the notebook until it ends", () => {
    const action = {
      id: 7,
      kind: 'execute',
      notebook: 's_a',
      client: 'bob',
      claim: 'bob',
      credential: undefined,
      reader: bob,
    } as unknown as AgentAction;
    presence.started(action);
    clock += ACTIVE_MS * 2;
    const answer = presence.answer(notebook, cells('c1'), alice);
    assert.deepEqual(answer.agents, [{ name: 'bob', you: false, verb: 'running', cell: null, now: true, secondsAgo: 60 }]);
    assert.deepEqual(answer.running, [{ cell: null, for: 'bob', you: false, phase: 'running', scratchpad: true }]);
    presence.ended(action, { outcome: 'succeeded', durationMs: 1, detail: '', output: '' });
    assert.deepEqual(presence.agents(NB), [], 'it ended long after its start');
  });

  it('a client handed a credential stays one agent: what it did under its name is carried over', () => {
    presence.ran(bob, NB, [new Ticket('run_1', 'c2')]);
    presence.read({ key: 'credential-of-bob', label: 'bob', earlier: bob.key }, NB, 'c1');
    assert.deepEqual(
      presence.agents(NB).map((a) => [a.key, a.verb, a.cell, a.running]),
      [['credential-of-bob', 'reading', 'c1', ['c2']]],
    );
  });

  it('what runs: an agent run for its agent, a run started in the editor for nobody (null)', () => {
    presence.ran(bob, NB, [new Ticket('run_1', 'c1')]);
    const answer = presence.answer(
      notebook,
      [
        { id: 'c1', execution: { status: 'queued' } },
        { id: 'c2', execution: { status: 'running' } },
      ],
      bob,
    );
    assert.deepEqual(answer.running, [
      { cell: { id: 'c1', index: 0 }, for: 'bob', you: true, phase: 'queued' },
      { cell: { id: 'c2', index: 1 }, for: null, you: false, phase: 'running' },
    ]);
  });
});

describe('presence over HTTP and MCP (fake notebooks)', () => {
  let server: RunningServer;
  let docs: FakeNotebooks;
  let ids: string[];
  let clock: number;
  let presence: Presence;
  let clients: Client[];

  async function api(method: string, path: string, body?: unknown, agent = 'bob'): Promise<{ status: number; body: Json }> {
    const res = await request(server.port, {
      method,
      path,
      headers: {
        authorization: `Bearer ${TEST_TOKEN}`,
        'x-agent-bridge-client': agent,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: res.body ? JSON.parse(res.body) : undefined };
  }
  const read = (ref: string, agent = 'bob') => api('GET', `/notebooks/cells/${ref}?notebook=s_aaaaaa`, undefined, agent);
  /** The person types in cell `index`: the editor's text changes and the keystroke is noted (PersonCursor's job). */
  const type = (index: number, code: string) => {
    docs.type(NOTEBOOK_A.uri, index, code);
    presence.typed(NOTEBOOK_A.uri, ids[index]!);
  };

  beforeEach(async () => {
    clients = [];
    clock = Date.now();
    presence = new Presence(
      (named) => (named === NOTEBOOK_A.sessionId ? NOTEBOOK_A.uri : undefined),
      () => clock,
    );
    docs = new FakeNotebooks({ 'sleep()': { steps: [{ waitMs: 400 }] } });
    ids = docs.add(NOTEBOOK_A, [{ code: 'x = 1' }, { code: 'y = 2' }, { code: 'sleep()' }]);
    // Presence hears of scratchpad runs from the activity record, as in the extension.
    const full = { mode: () => 'full' as const, ask: () => Promise.resolve('allow' as const), maxRunMs: () => 0 };
    const kernel = new FakeKernel({});
    const { sessionId: id, path, uri, notebookType } = NOTEBOOK_A;
    const host = new FakeNotebookHost([{ info: { id, path, uri, notebookType }, kernel }]);
    server = await startTestServer({ notebooks: docs, presence, host, access: new Gate(full, [presence], new ClientRegistry()) });
  });
  afterEach(async () => {
    for (const c of clients) await c.close();
    await server.close();
  });

  it('GET /notebooks/presence lists two agents with their verbs, and what runs for whom', async () => {
    assert.equal((await read(ids[0]!, 'bob')).status, 200);
    const run = await api('POST', `/notebooks/cells/${ids[2]}/run`, { notebook: 's_aaaaaa' }, 'alice');
    assert.equal(run.status, 202, JSON.stringify(run.body));
    const r = await api('GET', '/notebooks/presence?notebook=s_aaaaaa', undefined, 'bob');
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.notebook, { sessionId: 's_aaaaaa', path: NOTEBOOK_A.path });
    assert.deepEqual(
      r.body.agents.map((a: Json) => [a.name, a.you, a.verb, a.cell]),
      [
        ['alice (unverified)', false, 'running', { id: ids[2], index: 2 }],
        ['bob (unverified)', true, 'reading', { id: ids[0], index: 0 }],
      ],
    );
    assert.equal(r.body.running.length, 1);
    assert.deepEqual(r.body.running[0].cell, { id: ids[2], index: 2 });
    assert.equal(r.body.running[0].for, 'alice (unverified)');
  });

  it('an HTTP agent that does not send back the credential it was handed counts once (its scratchpad run and its reads)', async () => {
    const res = await request(server.port, {
      method: 'POST',
      path: '/api/kernel/execute',
      headers: {
        authorization: `Bearer ${TEST_TOKEN}`,
        'content-type': 'application/json',
        'marimo-session-id': 's_aaaaaa',
        'x-agent-bridge-client': 'bob',
      },
      body: JSON.stringify({ code: 'None' }),
    });
    assert.equal(res.status, 200, res.body);
    assert.ok(res.headers['x-agent-bridge-credential'], 'the run was handed a credential (bob keeps it to himself)');
    assert.equal((await read(ids[0]!)).status, 200);
    const r = await api('GET', '/notebooks/presence?notebook=s_aaaaaa');
    assert.deepEqual(
      r.body.agents.map((a: Json) => [a.name, a.you, a.verb]),
      [['bob (unverified)', true, 'reading']],
    );
  });

  it('a write to a cell the person typed in within 10 s is refused (409, nothing changed); force writes; after 10 s it goes', async () => {
    assert.equal((await read(ids[0]!)).status, 200);
    type(0, 'x = "person"');
    const seen = await read(ids[0]!); // the agent has read what the person typed: the version check passes
    assert.equal(seen.body.cell.personEditing, true, 'the cell view says the person is editing it');
    assert.equal((await read(ids[1]!)).body.cell.personEditing, undefined, 'only that cell');
    clock += 2_000;
    const refused = await api('PATCH', `/notebooks/cells/${ids[0]}`, { notebook: 's_aaaaaa', code: 'x = "agent"' });
    assert.equal(refused.status, 409, JSON.stringify(refused.body));
    assert.match(refused.body.detail, /the person is editing this cell right now/);
    assert.deepEqual(refused.body.personEditing, [{ id: ids[0], index: 0, secondsSinceKeystroke: 2 }]);
    assert.equal(docs.codes(NOTEBOOK_A.uri)[0], 'x = "person"', 'nothing changed');
    const deleted = await api('DELETE', `/notebooks/cells/${ids[0]}?notebook=s_aaaaaa`);
    assert.equal(deleted.status, 409, 'a delete is a write too');
    const told: ForcedWrite[] = [];
    presence.onForcedWrite((f) => told.push(f));
    const forced = await api('PATCH', `/notebooks/cells/${ids[0]}`, { notebook: 's_aaaaaa', code: 'x = "agent"', force: true });
    assert.equal(forced.status, 200, JSON.stringify(forced.body));
    assert.deepEqual(
      told,
      [{ notebook: NOTEBOOK_A.uri, agent: 'bob (unverified)', cells: [{ id: ids[0], index: 0, ms: 2_000 }] }],
      'the person is told of the forced write, who and where',
    );
    type(1, 'y = "person"');
    await read(ids[1]!);
    clock += PERSON_EDITING_MS;
    const later = await api('PATCH', `/notebooks/cells/${ids[1]}`, { notebook: 's_aaaaaa', code: 'y = 3' });
    assert.equal(later.status, 200, JSON.stringify(later.body));
    await read(ids[2]!);
    const elsewhere = await api('PATCH', `/notebooks/cells/${ids[2]}`, { notebook: 's_aaaaaa', code: 'z = 1', force: true });
    assert.equal(elsewhere.status, 200, JSON.stringify(elsewhere.body));
    assert.equal(told.length, 1, 'a write after 10 s, or forced where the person is not typing, is no news to them');
  });

  it('a batch writing cells the person is typing in names them all and changes nothing', async () => {
    await api('GET', '/notebooks/cells?notebook=s_aaaaaa');
    type(0, 'x = "p"');
    type(1, 'y = "p"');
    await api('GET', '/notebooks/cells?notebook=s_aaaaaa');
    const before = docs.codes(NOTEBOOK_A.uri);
    const r = await api('POST', '/notebooks/edits', {
      notebook: 's_aaaaaa',
      ops: [
        { op: 'create', code: 'z = 0' },
        { op: 'edit', ref: ids[0], code: 'x = 9' },
        { op: 'edit', ref: ids[1], code: 'y = 9' },
      ],
    });
    assert.equal(r.status, 409, JSON.stringify(r.body));
    assert.match(r.body.detail, /^ops\.1, ops\.2: the person is editing these cells right now/);
    assert.deepEqual(
      r.body.personEditing.map((c: Json) => c.id),
      [ids[0], ids[1]],
    );
    assert.deepEqual(docs.codes(NOTEBOOK_A.uri), before, 'nothing changed, the create neither');
  });

  it('MCP get_presence answers as the route does; edit_cell is refused the same way', async () => {
    const client = new Client({ name: 'carol', version: '1' });
    clients.push(client);
    const url = new URL(`http://127.0.0.1:${server.port}/mcp/server`);
    await client.connect(
      new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${TEST_TOKEN}` } } }),
    );
    const call = async (name: string, args: Record<string, unknown>) => {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      return { isError: result.isError, body: JSON.parse((result.content[0] as { text: string }).text) as Json };
    };
    await call('get_cell', { notebook: 's_aaaaaa', ref: ids[1] });
    await read(ids[0]!, 'bob');
    type(1, 'y = "person"');
    await call('get_cell', { notebook: 's_aaaaaa', ref: ids[1] });
    const answer = await call('get_presence', { notebook: 's_aaaaaa' });
    assert.equal(answer.isError, undefined);
    assert.deepEqual(
      answer.body.agents.map((a: Json) => [a.you, a.verb, a.cell.index]),
      [
        [true, 'reading', 1],
        [false, 'reading', 0],
      ],
    );
    assert.deepEqual(
      answer.body.person.cells.map((c: Json) => [c.index, c.editing]),
      [[1, true]],
    );
    const refused = await call('edit_cell', { notebook: 's_aaaaaa', ref: ids[1], code: 'y = 0' });
    assert.equal(refused.isError, true);
    assert.match(refused.body.detail, /the person is editing this cell right now/);
    await sleep(0);
  });
});

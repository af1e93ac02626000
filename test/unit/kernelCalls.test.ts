import { strict as assert } from 'node:assert';
import { Activity, Gate, type ActionEnd, type AgentAction } from '../../src/core/agents/accessPolicy';
import { BridgeError } from '../../src/core/bridgeError';
import { ClientRegistry } from '../../src/core/agents/clients';
import { KernelCalls, type KernelCall } from '../../src/core/runs/kernelCalls';
import { FakePerson } from './fakes/person';
import { Checkpoints } from '../../src/core/cells/checkpoints';
import { NotebookCells } from '../../src/core/cells/notebookCells';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';

/** What the handler saw when a call went through: whose action it ran in. */
const answered = () => ({ activity: Activity.current()?.action.id });

describe('calls into the bridge from code in a kernel (kernelCalls.ts)', () => {
  let person: FakePerson;
  let gate: Gate;
  let records: { action: AgentAction; end: ActionEnd }[];
  let inCells: boolean;
  let now: number;
  let calls: KernelCalls;
  const flush: Omit<KernelCall, 'run'> = {
    method: 'cells.flush',
    kind: 'edit',
    also: ['run'],
    notebook: 'file:///nb.ipynb',
    code: '{"ops":[]}',
  };
  const read: Omit<KernelCall, 'run'> = { ...flush, method: 'cells.list', kind: 'read', also: [] };
  const agentRun = async () => {
    const activity = await gate.enter({
      transport: 'http',
      client: 'an agent that says it is agent-1',
      about: 'agent-1, a name no credential backs',
      claim: 'agent-1',
      credential: undefined,
      owner: undefined,
      kind: 'execute',
      label: 'scratchpad run',
      notebook: 'nb',
      code: 'import agent_bridge',
    });
    assert.ok(activity);
    return activity;
  };
  const call = (base: Omit<KernelCall, 'run'>, run: KernelCall['run'], signal = new AbortController().signal) =>
    calls.answer({ ...base, run }, signal, async () => answered());
  const refused = async (promise: Promise<unknown>, detail: RegExp) => {
    await assert.rejects(promise, (e: unknown) => e instanceof BridgeError && e.kind === 'refused' && detail.test(e.detail));
    const last = records.at(-1);
    assert.equal(last?.end.outcome, 'refused', 'the refusal is recorded');
    assert.match(last?.end.detail ?? '', detail);
    assert.equal(last?.action.transport, 'kernel');
    return last!;
  };

  beforeEach(() => {
    person = new FakePerson();
    records = [];
    inCells = false;
    gate = new Gate(person, [{ started() {}, ended: (action, end) => records.push({ action, end }) }], new ClientRegistry());
    now = 0;
    calls = new KernelCalls(
      gate,
      () => inCells,
      () => (now += 1000),
    );
  });

  it('answers a scratchpad run in flight inside its action, as its agent', async () => {
    const activity = await agentRun();
    assert.deepEqual(await call(flush, { mode: 'scratchpad', owner: activity }), { activity: activity.action.id });
    person.current = 'ask'; // the run was allowed: its calls are not asked about again
    assert.deepEqual(await call(flush, { mode: 'scratchpad', owner: activity }), { activity: activity.action.id });
    assert.equal(person.asked.length, 0);
  });

  it("what a call changes is the change of the agent whose run made it, or the person's own cell run's", async () => {
    const docs = new FakeNotebooks();
    docs.add(NOTEBOOK_A, [{ code: 'a = 1' }]);
    const checkpoints = new Checkpoints(() => cells, { load: () => [], save: () => undefined });
    const cells = new NotebookCells(docs, {
      outputTextLimit: () => 100,
      onApplied: (notebook, before, after) => checkpoints.record(notebook, before, after),
    });
    const create = (run: KernelCall['run']) =>
      calls.answer({ ...flush, run }, new AbortController().signal, () =>
        cells.batch(NOTEBOOK_A.uri, [{ op: 'create', index: 0, code: 'made = 1' }], []),
      );
    const activity = await agentRun();
    await create({ mode: 'scratchpad', owner: activity });
    assert.equal(checkpoints.pending()[0]?.client, 'an agent that says it is agent-1');
    assert.equal(checkpoints.ofAction(activity.action.id), checkpoints.pending()[0]);
    inCells = true;
    await create({ mode: 'cell', owner: undefined });
    assert.equal(checkpoints.pending()[0]?.client, 'code mode in a cell you ran');
  });

  it('refuses a call from no run in flight, and records it', async () => {
    const record = await refused(call(flush, undefined), /no run in flight/);
    assert.equal(record.action.label, 'code mode cells.flush');
    assert.match(record.action.client, /code in the kernel of file:\/\/\/nb\.ipynb/);
  });

  it('refuses a run the person stopped, and one whose request has ended, naming its agent', async () => {
    const stopped = await agentRun();
    gate.stopAll();
    const record = await refused(call(read, { mode: 'scratchpad', owner: stopped }), /Stop Agents/);
    assert.equal(record.action.client, 'an agent that says it is agent-1');
    const ended = await agentRun();
    ended.end('ok');
    await refused(call(read, { mode: 'scratchpad', owner: ended }), /already been answered/);
  });

  it('re-checks the access mode at each call: read-only lets reads through and refuses changes; off refuses all', async () => {
    const activity = await agentRun();
    person.current = 'read-only';
    assert.deepEqual(await call(read, { mode: 'scratchpad', owner: activity }), { activity: activity.action.id });
    await refused(call(flush, { mode: 'scratchpad', owner: activity }), /read-only/);
    person.current = 'off';
    await refused(call(read, { mode: 'scratchpad', owner: activity }), /turned agent access off/);
  });

  it("refuses a notebook cell unless the person allows code mode in cells; then the person's own cell acts as them", async () => {
    await refused(call(flush, { mode: 'cell', owner: undefined }), /agentBridge\.codeMode\.inCells/);
    const activity = await agentRun();
    await refused(call(flush, { mode: 'cell', owner: activity }), /agentBridge\.codeMode\.inCells/);
    inCells = true;
    assert.deepEqual(await call(flush, { mode: 'cell', owner: undefined }), { activity: undefined });
    assert.deepEqual(await call(flush, { mode: 'cell', owner: activity }), { activity: activity.action.id });
  });

  it('a caller that loops is refused every time, and recorded once a second per notebook and reason', async () => {
    now = 5_000;
    calls = new KernelCalls(
      gate,
      () => inCells,
      () => now,
    );
    await refused(call(flush, undefined), /no run in flight/);
    await assert.rejects(call(read, undefined), (e: unknown) => e instanceof BridgeError && e.kind === 'refused');
    assert.equal(records.length, 1, 'the second refusal within the second is not recorded');
    now += 1_000;
    await refused(call(flush, undefined), /no run in flight/);
    assert.equal(records.length, 2);
  });

  it('a scratchpad run no agent action queued is refused', async () => {
    await refused(call(read, { mode: 'scratchpad', owner: undefined }), /no agent action/);
  });

  it('"Stop Agents" aborts a call under way', async () => {
    const activity = await agentRun();
    let aborted = false;
    const going = calls.answer(
      { ...flush, run: { mode: 'scratchpad', owner: activity } },
      new AbortController().signal,
      (signal) => {
        return new Promise<void>((resolve) =>
          signal.addEventListener('abort', () => {
            aborted = true;
            resolve();
          }),
        );
      },
    );
    gate.stopAll();
    await going;
    assert.ok(aborted);
  });
});

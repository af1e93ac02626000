import { strict as assert } from 'node:assert';
import { NotebookCells } from '../../src/core/cells/notebookCells';
import { Ticket } from '../../src/core/model/runTicket';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';

describe('run tickets', () => {
  it('a ticket steps queued → running → ended once, and settles its waiters', async () => {
    const ticket = new Ticket('run_1', 'c1');
    const phases: string[] = [];
    ticket.onDidChange(() => phases.push(ticket.phase));
    ticket.step('running');
    ticket.step('running');
    ticket.step('ended');
    ticket.step('running');
    ticket.drop();
    assert.deepEqual(phases, ['running', 'running', 'ended']);
    assert.equal(await ticket.ended, 'ended');
  });

  it('a dropped ticket settles as gone', async () => {
    const ticket = new Ticket('run_2', 'c1');
    ticket.drop();
    assert.equal(await ticket.ended, 'gone');
    assert.equal(ticket.phase, 'ended');
  });

  it('a run waited for past a timeout can be waited again, and ends with its outputs', async () => {
    const docs = new FakeNotebooks({ 'slow()': { steps: [{ stdout: 'a' }, { waitMs: 150 }, { stdout: 'b\n' }] } });
    const [id] = docs.add(NOTEBOOK_A, [{ code: 'slow()' }]);
    const cells = new NotebookCells(docs, { outputTextLimit: () => 1000 });
    const handle = await cells.run(undefined, id!);
    const texts: string[] = [];
    const onEvent = (e: { kind: string; text?: string }) => void (e.text && texts.push(e.text));
    const first = await handle.wait({ timeoutMs: 30, onEvent });
    assert.equal(first.done, false);
    assert.equal(first.status, 'running');
    assert.equal(docs.ticket(handle.runId)?.phase, 'running', 'the run is found by its id');
    const second = await handle.wait({ timeoutMs: 2_000, onEvent });
    assert.equal(second.done, true);
    assert.equal(second.status, 'succeeded');
    assert.equal(texts.join(''), 'ab\n', 'the second wait goes on from what the first sent');
  });

  it('a run is followed again by its cell, from a new handle, and it is the same run', async () => {
    const docs = new FakeNotebooks({ 'slow()': { steps: [{ stdout: 'x\n' }, { waitMs: 100 }] } });
    const [id] = docs.add(NOTEBOOK_A, [{ code: 'slow()' }]);
    const cells = new NotebookCells(docs, { outputTextLimit: () => 1000 });
    const { runId } = await cells.run(undefined, id!);
    const again = await cells.follow(undefined, id!);
    assert.deepEqual([again.cellId, again.runId], [id, runId]);
    const result = await again.wait({ timeoutMs: 2_000 });
    assert.deepEqual([result.done, result.status], [true, 'succeeded']);
    assert.equal(result.cell.outputs[0]?.items[0]?.text, 'x\n');
  });

  it('running a cell that is already running answers the run under way', async () => {
    const docs = new FakeNotebooks({ 'slow()': { steps: [{ waitMs: 100 }] } });
    const [id] = docs.add(NOTEBOOK_A, [{ code: 'slow()' }]);
    const cells = new NotebookCells(docs, { outputTextLimit: () => 1000 });
    const a = await cells.run(undefined, id!);
    const b = await cells.run(undefined, id!);
    assert.equal(a.runId, b.runId);
    const [ra, rb] = await Promise.all([a.wait({ timeoutMs: 2_000 }), b.wait({ timeoutMs: 2_000 })]);
    assert.equal(ra.done && rb.done, true);
  });

  it('a run whose cell is deleted ends its wait with 409', async () => {
    const docs = new FakeNotebooks({ 'slow()': { steps: [{ waitMs: 300 }] } });
    const [id] = docs.add(NOTEBOOK_A, [{ code: 'slow()' }, { code: 'x = 1' }]);
    const cells = new NotebookCells(docs, { outputTextLimit: () => 1000 });
    const handle = await cells.run(undefined, id!);
    const waited = handle.wait({ timeoutMs: 2_000 });
    await cells.list(undefined);
    await cells.remove(undefined, id!, { force: true });
    await assert.rejects(waited, (e: { status?: number }) => e.status === 409);
  });
});

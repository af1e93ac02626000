import { strict as assert } from 'node:assert';
import {
  asAuthor,
  authorOf,
  Checkpoints,
  MAX_CHECKPOINTS,
  MAX_CODE_CHARS,
  UNIDENTIFIED,
  type Author,
  type Checkpoint,
} from '../../src/core/cells/checkpoints';
import { ClientRegistry } from '../../src/core/agents/clients';
import { BridgeError } from '../../src/core/bridgeError';
import type { BatchOp } from '../../src/core/model/cellService';
import { NotebookCells } from '../../src/core/cells/notebookCells';
import { FakeNotebooks, NOTEBOOK_A } from './fakes/notebooks';

const A = NOTEBOOK_A.uri;
const registry = new ClientRegistry();
/** An agent holding a credential the bridge minted (its changes are its own). */
const agent = (name: string): Author => authorOf(registry.identify(registry.mint(name, 'http'), name));
const CREDENTIAL = registry.mint('agent-1', 'http');
const AGENT = authorOf(registry.identify(CREDENTIAL, 'agent-1'));

describe('checkpoints (fake notebooks)', () => {
  let docs: FakeNotebooks;
  let cells: NotebookCells;
  let checkpoints: Checkpoints;
  let saved: readonly Checkpoint[];
  /** Each save: whether it was asked for at once, and the checkpoints then (copied). */
  let saves: { now: boolean; list: Checkpoint[] }[];
  let ids: string[];

  beforeEach(() => {
    docs = new FakeNotebooks();
    ids = docs.add(NOTEBOOK_A, [{ code: 'a = 1' }, { code: 'b = 2' }, { code: 'c = 3' }, { code: '# notes', kind: 'markup' }]);
    saved = [];
    saves = [];
    checkpoints = new Checkpoints(() => cells, {
      load: () => [],
      save: (list, now = false) => {
        saved = [...list];
        saves.push({ now, list: JSON.parse(JSON.stringify(list)) as Checkpoint[] });
      },
    });
    cells = new NotebookCells(docs, {
      outputTextLimit: () => 100,
      onApplied: (notebook, before, after) => checkpoints.record(notebook, before, after),
      onApplying: async (notebook, before, planned) => checkpoints.begin(notebook, before, planned),
    });
  });

  const batch = (ops: Parameters<NotebookCells['batch']>[1], author = AGENT) => asAuthor(author, () => cells.batch(A, ops, []));

  it('records an agent batch as one checkpoint: who, a summary, and each cell before and after', async () => {
    await batch([
      { op: 'edit', ref: ids[0]!, code: 'a = 10', force: true },
      { op: 'create', index: 1, code: 'new = 0' },
      { op: 'delete', ref: ids[2]!, force: true },
      { op: 'move', ref: ids[3]!, to: 0 },
    ]);
    const [checkpoint] = checkpoints.pending();
    assert.equal(checkpoint?.client, 'agent-1 (unverified)');
    assert.equal(checkpoint.owner, AGENT.owner, 'kept under its credential');
    assert.ok(!JSON.stringify(saved).includes(CREDENTIAL), 'the credential itself is not stored');
    assert.equal(checkpoint.summary, '1 added, 1 edited, 1 deleted, 1 moved');
    const edited = checkpoint.cells.find((d) => d.id === ids[0])!;
    assert.deepEqual([edited.before?.code, edited.after?.code], ['a = 1', 'a = 10']);
    const deleted = checkpoint.cells.find((d) => d.id === ids[2])!;
    assert.deepEqual([deleted.before?.code, deleted.before?.index, deleted.after], ['c = 3', 2, null]);
    assert.equal(saved.length, 1, 'kept in the store');
  });

  it('a revert puts back code, deleted cells and positions in one apply, leaving cells changed since', async () => {
    await batch([
      { op: 'edit', ref: ids[0]!, code: 'a = 10', force: true },
      { op: 'edit', ref: ids[1]!, code: 'b = 20', force: true },
      { op: 'delete', ref: ids[2]!, force: true },
      { op: 'create', index: 0, code: 'new = 0' },
      { op: 'move', ref: ids[3]!, to: 0 },
    ]);
    const typedAt = docs.codes(A).indexOf('b = 20');
    docs.type(A, typedAt, 'b = 20  # mine');
    const applies = docs.calls.filter((c) => c.method === 'apply').length;

    const result = await checkpoints.revert(checkpoints.pending()[0]!.id);

    assert.equal(docs.calls.filter((c) => c.method === 'apply').length, applies + 1, 'one change');
    assert.deepEqual(docs.codes(A), ['a = 1', 'b = 20  # mine', 'c = 3', '# notes']);
    assert.deepEqual(
      result.skipped.map((s) => [s.id, s.by]),
      [[ids[1], 'the person (or an edit outside the bridge)']],
    );
    assert.equal(checkpoints.pending().length, 0, 'the revert itself is no checkpoint, and the reverted one is gone');
  });

  it('a revert of one cell puts back that cell only; the rest of the change stays to review, with its own summary', async () => {
    await batch([
      { op: 'edit', ref: ids[0]!, code: 'a = 10', force: true },
      { op: 'delete', ref: ids[2]!, force: true },
      { op: 'create', index: 0, code: 'new = 0' },
    ]);
    const { id } = checkpoints.pending()[0]!;
    const result = await checkpoints.revert(id, ids[2]);
    assert.deepEqual([result.reverted, result.summary], [[ids[2]], '1 deleted']);
    assert.deepEqual(docs.codes(A), ['new = 0', 'a = 10', 'b = 2', 'c = 3', '# notes']);
    const rest = checkpoints.get(id)!;
    assert.deepEqual([rest.summary, rest.cells.length, checkpoints.pending().length], ['1 added, 1 edited', 2, 1]);
    assert.equal(saved[0]?.summary, '1 added, 1 edited', 'the store keeps what is left');

    await checkpoints.revert(id, ids[0]);
    const left = checkpoints.get(id)!.cells[0]!;
    await checkpoints.revert(id, left.id);
    assert.deepEqual(docs.codes(A), ['a = 1', 'b = 2', 'c = 3', '# notes']);
    assert.equal(checkpoints.get(id), undefined, 'its last cell reverted, the change is off the list');
    await assert.rejects(checkpoints.revert(id, left.id), /No change/);
  });

  it('random batches: a revert, whole or cell by cell in any order, gives back the notebook as it was', async () => {
    let seed = 7;
    const random = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
    for (let round = 0; round < 60; round++) {
      const book = { ...NOTEBOOK_A, uri: `${A}-${round}`, path: `${NOTEBOOK_A.path}-${round}` };
      const made = docs.add(
        book,
        Array.from({ length: 2 + random(5) }, (_, i) => ({ code: `v${round}_${i} = ${i}` })),
      );
      const was = docs.codes(book.uri);
      const ops: BatchOp[] = [];
      const alive = [...made];
      for (let k = 0; k < 1 + random(4); k++) {
        const pick = alive[random(alive.length)]!;
        const kind = random(4);
        if (kind === 0) ops.push({ op: 'create', index: random(alive.length + 1), code: `new_${k} = ${k}` });
        else if (kind === 1 && alive.length > 1) {
          ops.push({ op: 'delete', ref: pick, force: true });
          alive.splice(alive.indexOf(pick), 1);
        } else if (kind === 2) ops.push({ op: 'move', ref: pick, to: random(alive.length) });
        else ops.push({ op: 'edit', ref: pick, code: `edited_${k} = ${k}`, force: true });
      }
      await asAuthor(AGENT, () => cells.batch(book.uri, ops, []));
      const checkpoint = checkpoints.pending()[0]!;
      assert.equal(checkpoint.notebook, book.uri);
      const whole = round % 2 === 0;
      if (whole) await checkpoints.revert(checkpoint.id);
      else
        for (const d of [...checkpoint.cells].sort(() => random(3) - 1)) {
          const still = checkpoints.get(checkpoint.id)!.cells.find((c) => c.id === d.id)!;
          await checkpoints.revert(checkpoint.id, still.id);
        }
      assert.deepEqual(docs.codes(book.uri), was, `round ${round} (${whole ? 'whole' : 'cell by cell'}): ${JSON.stringify(ops)}`);
      assert.equal(checkpoints.get(checkpoint.id), undefined);
    }
  });

  it("names another agent's later change as the reason a cell is skipped", async () => {
    await batch([{ op: 'edit', ref: ids[0]!, code: 'a = 10', force: true }]);
    await batch([{ op: 'edit', ref: ids[0]!, code: 'a = 11', force: true }], agent('agent-2'));
    const older = checkpoints.pending()[1]!;
    const result = await checkpoints.revert(older.id);
    assert.deepEqual(result.reverted, []);
    assert.equal(result.skipped[0]?.by, 'agent-2 (unverified)');
    assert.deepEqual(docs.codes(A).slice(0, 1), ['a = 11']);
  });

  it("an agent's undo takes back its own newest change, and refuses with 409 naming the cell when work would be lost", async () => {
    await batch([{ op: 'edit', ref: ids[1]!, code: 'b = 20', force: true }]);
    await asAuthor(AGENT, () => checkpoints.undoOwn(undefined));
    assert.deepEqual(docs.codes(A), ['a = 1', 'b = 2', 'c = 3', '# notes']);

    await batch([{ op: 'edit', ref: ids[1]!, code: 'b = 21', force: true }]);
    docs.type(A, 1, 'b = 21 # typed');
    const refused = await asAuthor(AGENT, () => checkpoints.undoOwn(undefined)).catch((e: unknown) => e);
    assert.ok(refused instanceof BridgeError && refused.status === 409, String(refused));
    assert.match(refused.detail, new RegExp(`cell ${ids[1]} \\(index 1\\)`));
    assert.deepEqual(docs.codes(A)[1], 'b = 21 # typed', 'nothing changed');

    const none = await asAuthor(agent('agent-3'), () => checkpoints.undoOwn(undefined)).catch((e: unknown) => e);
    assert.ok(none instanceof BridgeError && none.status === 404);
  });

  it('undo without a credential is refused, saying to send the one returned with the change; the person can still revert it', async () => {
    await batch([{ op: 'edit', ref: ids[1]!, code: 'b = 20', force: true }]);
    // Another process with the same name and no credential, and one whose credential was minted just now.
    for (const caller of [{ client: AGENT.client }, { ...agent('agent-1'), minted: true as const }]) {
      const refused = await asAuthor(caller, () => checkpoints.undoOwn(undefined)).catch((e: unknown) => e);
      assert.ok(refused instanceof BridgeError && refused.status === 403, String(refused));
      assert.match(refused.detail, /X-Agent-Bridge-Credential/);
    }
    assert.equal(docs.codes(A)[1], 'b = 20', 'nothing was undone');
    await checkpoints.revert(checkpoints.pending()[0]!.id);
    assert.equal(docs.codes(A)[1], 'b = 2', "the person's revert");
  });

  it("undoes a chosen change by its id; lists only the caller's own, newest first, saying whether each can be undone", async () => {
    await batch([{ op: 'create', index: 4, code: 'test_cell = 1' }]);
    await batch([{ op: 'create', index: 5, code: 'chart = 1' }]);
    const other = agent('agent-2');
    await batch([{ op: 'edit', ref: ids[0]!, code: 'a = 5', force: true }], other);
    const { changes } = await asAuthor(AGENT, () => checkpoints.mine(undefined));
    assert.deepEqual(
      changes.map((c) => [c.summary, c.cells.map((d) => d.change), c.undoable]),
      [
        ['1 added', ['added'], true],
        ['1 added', ['added'], true],
      ],
    );
    assert.ok(changes[0]!.id > changes[1]!.id, 'newest first');
    const theirs = await asAuthor(other, () => checkpoints.undoOwn(undefined, changes[1]!.id)).catch((e: unknown) => e);
    assert.ok(theirs instanceof BridgeError && theirs.status === 404, 'another agent cannot undo it by its id');
    await asAuthor(AGENT, () => checkpoints.undoOwn(undefined, changes[1]!.id));
    assert.deepEqual(docs.codes(A), ['a = 5', 'b = 2', 'c = 3', '# notes', 'chart = 1'], 'the second-to-last change undone');
    docs.type(A, 4, 'chart = 2');
    const [last] = (await asAuthor(AGENT, () => checkpoints.mine(undefined))).changes;
    assert.equal(last?.undoable, false);
    assert.match(last!.why!, /changed since/);
    const refused = await asAuthor(AGENT, () => checkpoints.undoOwn(undefined, last!.id)).catch((e: unknown) => e);
    assert.ok(refused instanceof BridgeError && refused.status === 409 && refused.detail.includes(last!.cells[0]!.id));
    const none = await asAuthor({ client: 'x (unverified)' }, () => checkpoints.mine(undefined));
    assert.deepEqual(none.changes, []);
    assert.match(none.detail!, /X-Agent-Bridge-Credential/);
  });

  it("describes an agent's undo for the person: the change, its cells and whose it is", async () => {
    await batch([
      { op: 'create', index: 0, code: 'new = 1' },
      { op: 'edit', ref: ids[2]!, code: 'c = 30', force: true },
    ]);
    const [change] = checkpoints.pending();
    assert.match(
      checkpoints.describeUndo(AGENT, undefined),
      new RegExp(`^take back its own change ${change!.id}, made at \\d\\d:\\d\\d:\\d\\d: 1 added, 1 edited \\(cells 1, 4\\)$`),
    );
    assert.equal(
      checkpoints.describeUndo(agent('agent-2'), change!.id),
      `take back a change of its own (it has none numbered ${change!.id})`,
    );
    assert.equal(
      checkpoints.describeUndo({ client: 'x (unverified)' }, undefined),
      'take back a change of its own (it has none)',
    );
  });

  it("an earlier window's change: no client now can undo it; the person's revert finds its cells, and says a lost one can no longer be identified", async () => {
    await batch([
      { op: 'create', index: 0, code: 'made = 1' },
      { op: 'edit', ref: ids[1]!, code: 'b = 20', force: true },
    ]);
    // A new window: the same file, a new registry (run), the same name.
    const later = new Checkpoints(() => cells, {
      load: () => JSON.parse(JSON.stringify(saved)) as Checkpoint[],
      save: () => undefined,
    });
    const newRegistry = new ClientRegistry();
    const sameName = authorOf(newRegistry.identify(newRegistry.mint('agent-1', 'mcp'), 'agent-1'));
    const refused = await asAuthor(sameName, () => later.undoOwn(undefined)).catch((e: unknown) => e);
    assert.ok(refused instanceof BridgeError && refused.status === 404, String(refused));
    assert.deepEqual((await asAuthor(sameName, () => later.mine(undefined))).changes, []);
    // The new editor lost the created cell's id: it is named as such, never as deleted by the person.
    const made = docs.cells(A).find((c) => c.code === 'made = 1')!;
    await asAuthor(null, () => cells.batch(A, [{ op: 'delete', ref: made.id, force: true }], []));
    const result = await later.revert(later.pending()[0]!.id);
    assert.deepEqual(result.reverted, [ids[1]]);
    assert.deepEqual(
      result.skipped.map((s) => [s.why, s.by]),
      [[UNIDENTIFIED, null]],
    );
  });

  it('a batch applied in steps is on disk before its first step, and settled with what was applied after its last; one that failed goes', async () => {
    const ops = Array.from({ length: 30 }, (_, i) => ({ op: 'create' as const, index: 4 + i, code: `n${i} = ${i}` }));
    await batch(ops);
    const first = saves.find((s) => s.list.length)!;
    assert.equal(first.now, true, 'written at once');
    assert.equal(first.list[0]?.applying, true);
    assert.equal(first.list[0]?.summary, '30 added', 'what it plans');
    const [settled] = checkpoints.pending();
    assert.equal(settled?.applying, undefined);
    assert.equal(settled.summary, '30 added');
    docs.failNextApply = true;
    await assert.rejects(batch(ops.map((op) => ({ ...op, code: `${op.code} # again` }))));
    assert.equal(checkpoints.pending().length, 1, 'the failed batch left no checkpoint');
    assert.equal(saves.filter((s) => s.now).length, 2);
  });

  it("a batch the editor stopped in the middle of: the person's revert takes back what it applied and leaves, unblamed, what it never reached", async () => {
    await batch([{ op: 'create', index: 4, code: 'x = 0' }]);
    const applying = checkpoints.pending()[0]!;
    // As written before the first step of a batch that creates one more cell and edits one, found after a crash.
    const cutShort: Checkpoint = {
      ...applying,
      id: applying.id + 1,
      applying: true,
      cells: [
        applying.cells[0]!,
        { id: 'never', before: null, after: { ...applying.cells[0]!.after!, index: 5, code: 'y = 0' } },
        {
          id: ids[0]!,
          before: { ...applying.cells[0]!.after!, index: 0, code: 'a = 1' },
          after: { ...applying.cells[0]!.after!, index: 0, code: 'a = 9' },
        },
      ],
    };
    const later = new Checkpoints(() => cells, { load: () => [cutShort], save: () => undefined });
    const result = await later.revert(cutShort.id);
    assert.deepEqual(result.reverted, [applying.cells[0]!.id]);
    assert.ok(
      result.skipped.every((s) => s.by === null && !s.why.includes('person')),
      JSON.stringify(result.skipped),
    );
    assert.deepEqual(docs.codes(A), ['a = 1', 'b = 2', 'c = 3', '# notes']);
  });

  it('revert all by an agent since a time goes newest first, and keep clears a change from the list', async () => {
    await batch([{ op: 'create', index: 4, code: 'x = 1' }]);
    await batch([{ op: 'edit', ref: ids[0]!, code: 'a = 5', force: true }], agent('other'));
    await batch([{ op: 'create', index: 5, code: 'y = 1' }]);
    const results = await checkpoints.revertAllBy(AGENT.owner!, 0);
    assert.equal(results.length, 2);
    assert.deepEqual(docs.codes(A), ['a = 5', 'b = 2', 'c = 3', '# notes']);
    checkpoints.keep(checkpoints.pending()[0]!.id);
    assert.equal(checkpoints.pending().length, 0);
  });

  it('keeps code longer than the cap cut, and leaves that cell alone on revert, saying why', async () => {
    const long = 'x'.repeat(MAX_CODE_CHARS + 10);
    await batch([{ op: 'edit', ref: ids[0]!, code: long, force: true }]);
    await batch([{ op: 'edit', ref: ids[0]!, code: 'short = 1', force: true }]);
    const result = await checkpoints.revert(checkpoints.pending()[0]!.id);
    assert.deepEqual(result.reverted, []);
    assert.match(result.skipped[0]!.why, /longer than/);
    assert.equal(docs.codes(A)[0], 'short = 1');
  });

  it('is bounded in count, and restores its list from the store', async () => {
    for (let i = 0; i < MAX_CHECKPOINTS + 5; i++) await batch([{ op: 'edit', ref: ids[0]!, code: `a = ${i}`, force: true }]);
    assert.equal(saved.length, MAX_CHECKPOINTS);
    const reloaded = new Checkpoints(() => cells, { load: () => JSON.parse(JSON.stringify(saved)), save: () => undefined });
    assert.equal(reloaded.pending()[0]?.cells[0]?.after?.code, `a = ${MAX_CHECKPOINTS + 4}`);
  });
});

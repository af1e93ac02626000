import { strict as assert } from 'node:assert';
import { longestIncreasing, OpError, planBatch, type PlanOptions } from '../../src/core/cells/batch';
import type { BatchOp, CellState, NotebookChange } from '../../src/core/model/cellService';
import { BridgeError } from '../../src/core/bridgeError';

const cell = (id: string, code = id, kind: 'code' | 'markup' = 'code'): CellState => ({
  id,
  kind,
  language: kind === 'code' ? 'python' : 'markdown',
  code,
  version: 1,
  metadata: {},
});
const five = () => ['a', 'b', 'c', 'd', 'e'].map((id) => cell(id));

function options(overrides: Partial<PlanOptions> = {}): PlanOptions {
  let n = 0;
  return { notebook: 'nb.ipynb', defaultLanguage: 'python', newId: () => `n${n++}`, checkWrite: () => undefined, ...overrides };
}

/** Applies a change the way VS Code does: replacements from the highest end down. */
function apply(cells: readonly CellState[], change: NotebookChange): { id: string; code: string; kind: string }[] {
  const out = cells.map((c) => ({ id: c.id, code: c.code, kind: c.kind as string }));
  for (const t of change.texts) out[t.index]!.code = t.code;
  for (const s of [...change.splices].sort((a, b) => b.end - a.end))
    out.splice(s.start, s.end - s.start, ...s.cells.map((c) => ({ id: c.id, code: c.code, kind: c.kind as string })));
  return out;
}

function plan(ops: BatchOp[], cells = five(), extra: Partial<PlanOptions> = {}) {
  const p = planBatch(cells, ops, options(extra));
  const result = apply(cells, p.change);
  assert.deepEqual(
    result.map((c) => c.id),
    p.change.resultIds,
    'the change does not produce the planned cells',
  );
  assert.deepEqual(
    result.map((c) => c.id),
    p.layout.map((c) => c.id),
  );
  return { plan: p, result };
}

function fails(ops: BatchOp[], status: number, pattern: RegExp, cells = five(), extra: Partial<PlanOptions> = {}) {
  assert.throws(
    () => planBatch(cells, ops, options(extra)),
    (e: unknown) => e instanceof BridgeError && e.status === status && pattern.test(e.detail),
  );
}

describe('batch planning', () => {
  it('edits text in place: no cell is re-created', () => {
    const { plan: p, result } = plan([
      { op: 'edit', ref: 'b', code: 'B' },
      { op: 'edit', ref: 3, code: 'D' },
    ]);
    assert.deepEqual(p.change.splices, []);
    assert.deepEqual(p.change.texts, [
      { index: 1, code: 'B' },
      { index: 3, code: 'D' },
    ]);
    assert.deepEqual(
      result.map((c) => c.code),
      ['a', 'B', 'c', 'D', 'e'],
    );
  });

  it('inserts and deletes as replacements of the gaps only', () => {
    const { plan: p, result } = plan([
      { op: 'create', code: 'x', index: 0 },
      { op: 'delete', ref: 'c' },
      { op: 'create', code: 'y' },
    ]);
    assert.deepEqual(
      result.map((c) => c.id),
      ['n0', 'a', 'b', 'd', 'e', 'n1'],
    );
    assert.deepEqual(
      p.change.splices.map((s) => [s.start, s.end, s.cells.map((c) => c.id)]),
      [
        [0, 0, ['n0']],
        [2, 3, []],
        [5, 5, ['n1']],
      ],
    );
    assert.deepEqual(p.deleted, ['c']);
    assert.deepEqual(p.created, ['n0', 'n1']);
  });

  it('moves one cell by re-creating only that cell, as a copy that keeps its id', () => {
    const { plan: p, result } = plan([{ op: 'move', ref: 'a', to: 4 }]);
    assert.deepEqual(
      result.map((c) => c.id),
      ['b', 'c', 'd', 'e', 'a'],
    );
    const copies = p.change.splices.flatMap((s) => s.cells);
    assert.deepEqual(
      copies.map((c) => [c.id, c.copyOf, c.version]),
      [['a', 0, 1]],
    );
  });

  it('positions are sequential: index and to count the cells the earlier ops left', () => {
    const { result } = plan([
      { op: 'delete', ref: 0 },
      { op: 'create', code: 'x', index: 4 },
      { op: 'move', ref: 'b', after: 'e' },
    ]);
    assert.deepEqual(
      result.map((c) => c.id),
      ['c', 'd', 'e', 'b', 'n0'],
    );
  });

  it('refs are the cells before the batch, even after earlier ops moved things', () => {
    const { result } = plan([
      { op: 'create', code: 'x', index: 0 },
      { op: 'edit', ref: 0, code: 'A' }, // index 0 is still cell a
    ]);
    assert.deepEqual(
      result.map((c) => `${c.id}=${c.code}`),
      ['n0=x', 'a=A', 'b=b', 'c=c', 'd=d', 'e=e'],
    );
  });

  it('a create op may name its cell: later ops place cells after or before it by that name', () => {
    const { plan: p, result } = plan([
      { op: 'create', name: 'intro', code: '# Intro', kind: 'markup', after: 'b' },
      { op: 'create', name: 'calc', code: 'x = 1', after: 'intro' },
      { op: 'move', ref: 'e', before: 'calc' },
    ]);
    assert.deepEqual(
      result.map((c) => c.id),
      ['a', 'b', 'n0', 'e', 'n1', 'c', 'd'],
    );
    assert.deepEqual(Object.fromEntries(p.names), { intro: 'n0', calc: 'n1' });
  });

  it('refuses a name used before it is given, given twice, equal to a cell id, or edited by a later op', () => {
    fails(
      [
        { op: 'create', code: 'x', after: 'later' },
        { op: 'create', name: 'later' },
      ],
      404,
      /ops\.0: after: /,
    );
    fails(
      [
        { op: 'create', name: 'n' },
        { op: 'create', name: 'n' },
      ],
      400,
      /ops\.1: name "n" is already given/,
    );
    fails([{ op: 'create', name: 'c' }], 400, /ops\.0: name "c" is already the id of a cell/);
    fails(
      [
        { op: 'create', name: 'm' },
        { op: 'edit', ref: 'm', code: 'y' },
      ],
      400,
      /ops\.1: "m" is a cell this batch creates/,
    );
  });

  it('re-creates a cell whose kind changes, with the markdown language and a new version', () => {
    const { plan: p, result } = plan([{ op: 'edit', ref: 'c', code: '# hi', kind: 'markup' }]);
    assert.deepEqual(result[2], { id: 'c', code: '# hi', kind: 'markup' });
    const [copy] = p.change.splices.flatMap((s) => s.cells);
    assert.deepEqual([copy!.language, copy!.version, copy!.copyOf], ['markdown', 2, 2]);
  });

  it('reversing a notebook keeps the longest in-order run in place', () => {
    const { plan: p } = plan([
      { op: 'move', ref: 'e', to: 0 },
      { op: 'move', ref: 'd', to: 1 },
    ]);
    assert.equal(p.change.splices.flatMap((s) => s.cells).length, 2);
  });

  it('an empty notebook can be filled and emptied', () => {
    const { result } = plan([{ op: 'create', code: 'x' }], []);
    assert.deepEqual(
      result.map((c) => c.code),
      ['x'],
    );
    const { plan: p } = plan(['a', 'b', 'c', 'd', 'e'].map((ref) => ({ op: 'delete' as const, ref })));
    assert.deepEqual(p.change.splices, [{ start: 0, end: 5, cells: [] }]);
  });

  it('an edit that changes nothing plans an empty change', () => {
    assert.equal(plan([{ op: 'edit', ref: 'a', code: 'a' }]).plan.empty, true);
  });

  it('new code cells take the default language, markup cells markdown', () => {
    const { plan: p } = plan(
      [
        { op: 'create', code: 'x' },
        { op: 'create', kind: 'markup', code: '# t' },
        { op: 'create', code: 'y', language: 'r' },
      ],
      five(),
      { defaultLanguage: 'julia' },
    );
    assert.deepEqual(
      p.change.splices.flatMap((s) => s.cells).map((c) => c.language),
      ['julia', 'markdown', 'r'],
    );
  });

  describe('refuses, before anything changes', () => {
    it('an unknown id or an index out of range (404 with the count)', () => {
      fails([{ op: 'edit', ref: 'zz', code: '' }], 404, /^ops\.0: No cell with id 'zz' .* 5 cells/);
      fails([{ op: 'delete', ref: 5 }], 404, /^ops\.0: Cell index 5 is out of range: nb\.ipynb has 5 cells/);
      fails([{ op: 'create', before: 'zz' }], 404, /^ops\.0: before: No cell/);
    });
    it('an op on a cell another op deletes', () => {
      fails(
        [
          { op: 'edit', ref: 'b', code: 'x' },
          { op: 'delete', ref: 'b' },
        ],
        400,
        /^ops\.0: cell b is deleted by ops\.1/,
      );
      fails(
        [
          { op: 'delete', ref: 'b' },
          { op: 'move', ref: 'c', after: 'b' },
        ],
        400,
        /^ops\.1: cell b is deleted by ops\.0/,
      );
    });
    it('two deletes or two edits of one cell', () => {
      fails(
        [
          { op: 'delete', ref: 'b' },
          { op: 'delete', ref: 1 },
        ],
        400,
        /already deleted by ops\.0/,
      );
      fails(
        [
          { op: 'edit', ref: 'b', code: '1' },
          { op: 'edit', ref: 'b', code: '2' },
        ],
        400,
        /already edited by ops\.0/,
      );
    });
    it('positions out of range, counted where the op applies', () => {
      fails([{ op: 'create', index: 6 }], 400, /^ops\.0: "index" 6 is out of range: it must be between 0 and 5/);
      fails(
        [
          { op: 'delete', ref: 'a' },
          { op: 'create', index: 5 },
        ],
        400,
        /^ops\.1: "index" 5 .* between 0 and 4/,
      );
      fails([{ op: 'move', ref: 'a', to: 5 }], 400, /"to" 5 is out of range/);
    });
    it('ambiguous or missing positions', () => {
      fails([{ op: 'create', index: 1, after: 'a' }], 400, /at most one of "index", "before" and "after"/);
      fails([{ op: 'move', ref: 'a' }], 400, /give "to", "before" or "after"/);
      fails([{ op: 'move', ref: 'a', before: 'a' }], 400, /next to itself/);
    });
    it('a write the read-before-write check refuses, after all structural checks', () => {
      const checkWrite = (c: CellState) => (c.id === 'c' ? { why: `stale ${c.id}`, extra: {} } : undefined);
      fails([{ op: 'edit', ref: 'c', code: 'x' }], 409, /stale c/, five(), { checkWrite });
      // A structural error later in the batch wins over a stale cell earlier in it.
      fails(
        [
          { op: 'edit', ref: 'c', code: 'x' },
          { op: 'delete', ref: 'zz' },
        ],
        404,
        /zz/,
        five(),
        { checkWrite },
      );
    });
    it("checks every edited and deleted cell with its op's guard", () => {
      const seen: string[] = [];
      planBatch(
        five(),
        [
          { op: 'edit', ref: 'a', code: 'x', version: 3 },
          { op: 'delete', ref: 'b', force: true },
          { op: 'move', ref: 'c', to: 0 },
        ],
        options({
          checkWrite: (c, i, g) => {
            seen.push(`${c.id}@${i} ${JSON.stringify(g)}`);
            return undefined;
          },
        }),
      );
      assert.deepEqual(seen, [
        'a@0 {"op":"edit","ref":"a","code":"x","version":3}',
        'b@1 {"op":"delete","ref":"b","force":true}',
      ]);
    });
    it('refusals are typed: which op, and the reason without its name', () => {
      try {
        planBatch(
          five(),
          [
            { op: 'edit', ref: 'a', code: 'x' },
            { op: 'delete', ref: 'zz' },
          ],
          options(),
        );
        assert.fail('planned');
      } catch (error) {
        assert.ok(error instanceof OpError);
        assert.equal(error.op, 1);
        assert.equal(error.status, 404);
        assert.match(error.reason, /^No cell with id 'zz'/);
        assert.equal(error.detail, `ops.1: ${error.reason}`);
      }
    });
  });

  describe('metadata and tags', () => {
    const tagged = () => [
      { ...cell('a'), metadata: { tags: ['x'], papermill: { p: 1 } } },
      { ...cell('b'), metadata: {} },
    ];
    it('tags replace only the tags, in place (no re-creation), and leave the version alone', () => {
      const plan = planBatch(tagged(), [{ op: 'edit', ref: 'a', tags: ['parameters', 'parameters'] }], options());
      assert.deepEqual(plan.change.texts, []);
      assert.deepEqual(plan.change.splices, []);
      assert.deepEqual(plan.change.metadata, [{ index: 0, metadata: { papermill: { p: 1 }, tags: ['parameters'] } }]);
    });
    it('empty tags remove the key; metadata replaces the whole', () => {
      const plan = planBatch(
        tagged(),
        [
          { op: 'edit', ref: 'a', tags: [] },
          { op: 'edit', ref: 'b', metadata: { k: 2 } },
        ],
        options(),
      );
      assert.deepEqual(plan.change.metadata, [
        { index: 0, metadata: { papermill: { p: 1 } } },
        { index: 1, metadata: { k: 2 } },
      ]);
    });
    it('a created cell carries its tags; a moved one keeps its metadata', () => {
      const plan = planBatch(
        tagged(),
        [
          { op: 'create', code: 'n', tags: ['t'] },
          { op: 'move', ref: 'a', to: 2 },
        ],
        options(),
      );
      const created = plan.change.splices.flatMap((s) => s.cells);
      const byId = new Map(tagged().map((c) => [c.id, c.metadata]));
      assert.deepEqual(created.find((c) => c.id === 'n0')?.metadata, { tags: ['t'] });
      const copies = created.filter((c) => c.id !== 'n0');
      assert.ok(copies.length > 0);
      for (const c of copies) assert.deepEqual(c.metadata, byId.get(c.id));
    });
    it('an edit must change something; metadata and tags together are ambiguous', () => {
      fails([{ op: 'edit', ref: 'a' }], 400, /give what to change/, tagged());
      fails([{ op: 'edit', ref: 'a', tags: ['x'], metadata: {} }], 400, /not both/, tagged());
    });
  });
});

describe('longestIncreasing', () => {
  it('finds a longest strictly increasing subsequence', () => {
    assert.deepEqual(longestIncreasing([]), []);
    assert.deepEqual(longestIncreasing([0, 1, 2]), [0, 1, 2]);
    assert.deepEqual(longestIncreasing([4, 0, 1, 2, 3]), [1, 2, 3, 4]);
    assert.equal(longestIncreasing([3, 1, 4, 1, 5, 9, 2, 6]).length, 4);
    assert.equal(longestIncreasing([4, 3, 2, 1]).length, 1);
  });
});

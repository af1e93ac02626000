import { strict as assert } from 'node:assert';
import { planBatch } from '../../src/core/cells/batch';
import type { BatchOp, CellState, NotebookChange } from '../../src/core/model/cellService';
import { changeSteps, STEP_CELLS } from '../../src/core/cells/changeSteps';
import { rollbackPlan } from '../../src/core/cells/rollbackPlan';

interface Model {
  id: string;
  code: string;
  meta: string;
}

const cells = (n: number): CellState[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `o${i}`,
    kind: 'code',
    language: 'python',
    code: `x${i}`,
    version: 1,
    metadata: {},
  }));

/**
 * Applies one change the way VS Code applies one WorkspaceEdit: every index is one of the
 * notebook before it; copies (`copyOf`) come from `originals`, the notebook before the first step.
 */
function apply(now: readonly Model[], change: NotebookChange, originals: readonly Model[]): Model[] {
  assert.deepEqual(
    now.map((c) => c.id),
    change.expectIds,
    'the step expects other cells',
  );
  const out = now.map((c) => ({ ...c }));
  for (const t of change.texts) out[t.index]!.code = t.code;
  for (const m of change.metadata) out[m.index]!.meta = JSON.stringify(m.metadata);
  for (const s of [...change.splices].sort((a, b) => b.start - a.start || b.end - a.end)) {
    const made = s.cells.map((c) => ({
      id: c.id,
      code: c.code,
      meta: c.metadata ? JSON.stringify(c.metadata) : c.copyOf !== undefined ? originals[c.copyOf]!.meta : '{}',
    }));
    out.splice(s.start, s.end - s.start, ...made);
  }
  assert.deepEqual(
    out.map((c) => c.id),
    change.resultIds,
    'the step leaves other cells than it says',
  );
  return out;
}

/** A batch's change applied whole and in steps of `budget` ends in the same notebook. */
function sameInSteps(before: CellState[], ops: BatchOp[], budget: number): NotebookChange[] {
  let n = 0;
  const plan = planBatch(before, ops, {
    notebook: 'nb',
    defaultLanguage: 'python',
    newId: () => `n${n++}`,
    checkWrite: () => undefined,
  });
  const originals: Model[] = before.map((c) => ({ id: c.id, code: c.code, meta: '{}' }));
  const whole = apply(originals, plan.change, originals);
  const steps = changeSteps(plan.change, budget);
  let now = originals;
  for (const step of steps) {
    const weight =
      step.texts.length + step.metadata.length + step.splices.reduce((w, s) => w + s.end - s.start + s.cells.length, 0);
    assert.ok(weight <= budget || steps.length === 1, `a step of ${weight} cells, over ${budget}`);
    now = apply(now, step, originals);
  }
  assert.deepEqual(now, whole);
  return steps;
}

describe('change steps', () => {
  it('keeps a change within the budget as one step, the change itself', () => {
    const plan = planBatch(cells(3), [{ op: 'create', code: 'y' }], {
      notebook: 'nb',
      defaultLanguage: 'python',
      newId: () => 'n0',
      checkWrite: () => undefined,
    });
    assert.deepEqual(changeSteps(plan.change), [plan.change]);
  });

  it('splits the largest batch, 1,000 creates, into steps of STEP_CELLS that end as one edit would', () => {
    const ops: BatchOp[] = Array.from({ length: 1000 }, (_, i) => ({ op: 'create', code: `c${i}` }));
    const steps = sameInSteps(cells(1), ops, STEP_CELLS);
    assert.equal(steps.length, 1000 / STEP_CELLS);
  });

  it('splits edits, deletes, moves, metadata and creates in the middle alike', () => {
    const before = cells(40);
    const ops: BatchOp[] = [
      { op: 'create', code: 'head', index: 0 },
      ...Array.from({ length: 12 }, (_, i): BatchOp => ({ op: 'edit', ref: `o${i * 3}`, code: `e${i}` })),
      ...Array.from({ length: 6 }, (_, i): BatchOp => ({ op: 'delete', ref: `o${i * 3 + 1}` })),
      { op: 'move', ref: 'o38', to: 2 },
      { op: 'move', ref: 'o2', to: 30 },
      { op: 'edit', ref: 'o5', tags: ['t'] },
      { op: 'edit', ref: 'o8', kind: 'markup' },
      ...Array.from({ length: 15 }, (_, i): BatchOp => ({ op: 'create', code: `m${i}`, index: 10 + i })),
    ];
    for (const budget of [1, 2, 3, 7, 100]) sameInSteps(before, ops, budget);
  });

  it('splits one splice bigger than the budget: removals first, then insertions last cells first', () => {
    const before = cells(10);
    const ops: BatchOp[] = [
      ...Array.from({ length: 8 }, (_, i): BatchOp => ({ op: 'delete', ref: `o${i + 1}` })),
      ...Array.from({ length: 9 }, (_, i): BatchOp => ({ op: 'create', code: `n${i}`, index: 1 + i })),
    ];
    const steps = sameInSteps(before, ops, 3);
    assert.deepEqual(
      steps.map((s) => s.splices.map((p) => [p.start, p.end, p.cells.length])),
      [[[6, 9, 0]], [[3, 6, 0]], [[1, 3, 0]], [[1, 1, 3]], [[1, 1, 3]], [[1, 1, 3]]],
    );
  });
});

describe('rollback plan', () => {
  const [a, b, c, d] = ['a', 'b', 'c', 'd'];

  it('removes what the steps made and puts back what they removed, in place', () => {
    // Steps replaced c by X, Y and removed a; the person added P after b meanwhile: c comes back right after b.
    const now = [b, 'P', 'X', 'Y', d];
    const plan = rollbackPlan(now, [a, b, c, d], new Set(['X', 'Y']));
    assert.deepEqual(plan, [
      { start: 0, end: 0, restore: [0] },
      { start: 1, end: 1, restore: [2] },
      { start: 2, end: 4, restore: [] },
    ]);
  });

  it('nothing made, nothing removed: nothing to do', () => {
    assert.deepEqual(rollbackPlan([a, b], [a, b], new Set()), []);
  });

  it('made cells at the end, removed cells before them', () => {
    assert.deepEqual(rollbackPlan([a, 'X', 'Y'], [a, b, c], new Set(['X', 'Y'])), [{ start: 1, end: 3, restore: [1, 2] }]);
  });
});

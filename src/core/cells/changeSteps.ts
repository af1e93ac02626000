import type { CellMetadata, NewCell, NotebookChange } from '../model/cellService';

/**
 * Most cells one step of a change may create, remove, re-text or re-tag. VS Code hands every
 * extension the whole of one applied edit in a single message (each new cell opens a document
 * that every listening extension looks at), which blocks the extension host for as long as
 * they all take. Steps of 20 keep the host answering within bench `batch`'s target and a whole
 * 1,000-cell batch no slower than bigger steps (SETUP.md, Benchmarks: the figures per step size).
 */
export const STEP_CELLS = 20;

type Splice = NotebookChange['splices'][number];

/** Whether `changeSteps` splits the change (it touches more than `budget` cells). */
export function inSteps(change: NotebookChange, budget = STEP_CELLS): boolean {
  const spliced = change.splices.reduce((sum, s) => sum + s.end - s.start + s.cells.length, 0);
  return spliced + change.texts.length + change.metadata.length > budget;
}

/** One unit of a change, at a position of the notebook as it was. */
type Unit =
  | { kind: 'splice'; key: number; weight: number; splice: Splice; of: number }
  | { kind: 'text'; key: number; weight: 1; text: { index: number; code: string } }
  | { kind: 'metadata'; key: number; weight: 1; metadata: { index: number; metadata: CellMetadata } };

/**
 * Splits a change into steps of at most `budget` cells each, to be applied one after another;
 * a change within the budget stays one step (one edit, one undo step). Each step is a change of
 * its own, in the indices of the notebook as the steps before it left it (`expectIds` says which
 * cells that is), except `copyOf`, which still names a cell of the notebook before the first step.
 * Steps go from the end of the notebook to its start, so the positions of what is not yet applied
 * never move; a splice bigger than the budget becomes removals from its end, then insertions at
 * its start, last cells first.
 */
export function changeSteps(change: NotebookChange, budget = STEP_CELLS): NotebookChange[] {
  if (!inSteps(change, budget)) return [change];
  const units: Unit[] = [];
  change.splices.forEach((splice, of) => {
    const removed = splice.end - splice.start;
    if (removed + splice.cells.length <= budget) {
      units.push({ kind: 'splice', key: splice.start, weight: removed + splice.cells.length, splice, of });
      return;
    }
    for (let end = splice.end; end > splice.start; end -= budget) {
      const start = Math.max(splice.start, end - budget);
      units.push({ kind: 'splice', key: splice.start, weight: end - start, splice: { start, end, cells: [] }, of });
    }
    for (let to = splice.cells.length; to > 0; to -= budget) {
      const cells = splice.cells.slice(Math.max(0, to - budget), to);
      const at = { start: splice.start, end: splice.start, cells };
      units.push({ kind: 'splice', key: splice.start, weight: cells.length, splice: at, of });
    }
  });
  // A cell that stays sits outside every splice; a splice that inserts right before it comes after it.
  for (const text of change.texts) units.push({ kind: 'text', key: text.index + 0.5, weight: 1, text });
  for (const metadata of change.metadata) units.push({ kind: 'metadata', key: metadata.index + 0.5, weight: 1, metadata });
  // Stable: the pieces of one splice keep the order they were made in.
  units.sort((a, b) => b.key - a.key);

  const steps: NotebookChange[] = [];
  let ids = [...change.expectIds];
  let current: Unit[] = [];
  let weight = 0;
  const close = () => {
    if (!current.length) return;
    const before = ids;
    ids = [...ids];
    const splices: Splice[] = [];
    for (const u of current) {
      if (u.kind !== 'splice') continue;
      splices.push(u.splice);
      // Descending and disjoint: each splice leaves the positions below it as they were.
      ids.splice(u.splice.start, u.splice.end - u.splice.start, ...u.splice.cells.map((c: NewCell) => c.id));
    }
    steps.push({
      expectIds: before,
      texts: current.flatMap((u) => (u.kind === 'text' ? [u.text] : [])),
      metadata: current.flatMap((u) => (u.kind === 'metadata' ? [u.metadata] : [])),
      splices: splices.reverse(),
      resultIds: ids,
    });
    current = [];
    weight = 0;
  };
  for (const u of units) {
    // Two pieces of one splice are at one position: VS Code could not order them within one edit.
    const samePlace = u.kind === 'splice' && current.some((c) => c.kind === 'splice' && c.of === u.of);
    if (current.length && (weight + u.weight > budget || samePlace)) close();
    current.push(u);
    weight += u.weight;
  }
  close();
  return steps;
}

/**
 * The two sides of an agent's change as whole notebooks, for the person's review in VS Code's
 * notebook diff: the notebook as it is now, with the cells the change touched put back as they
 * were before it (or as the agent left them). The cells around them are the notebook's own, so
 * the diff shows the change in its context. Pure: the VS Code side turns these into notebooks.
 */
import { longestIncreasing } from './batch';
import { sameContent, type CellDelta, type CellFace } from './checkpoints';
import type { CellState } from './cellService';

/** A cell of one side: a cell of the notebook as it is now (its index), or a side the change kept of one of its cells. */
export type SideCell = { readonly now: number } | { readonly id: string; readonly face: CellFace };

/**
 * One side of a change over the cells now (their ids, in order). A cell the change edited where
 * it was stays where it is now, with that side of it; the other cells it touched (moved, created,
 * deleted, or gone since) are taken out, and that side of each (none for a cell it created, on
 * the before side, or deleted, on the after side) is put back at its index, in ascending order,
 * so each lands where it was when the cells around it are as they were.
 */
export function changeSide(deltas: readonly CellDelta[], now: readonly string[], side: 'before' | 'after'): SideCell[] {
  const byId = new Map(deltas.map((d) => [d.id, d]));
  const staying = editedInPlace(deltas, new Set(now));
  const cells: SideCell[] = now.flatMap((id, i): SideCell[] => {
    const d = byId.get(id);
    if (!d) return [{ now: i }];
    return staying.has(id) ? [{ id, face: d[side]! }] : [];
  });
  const placed = deltas
    .flatMap((d) => (!staying.has(d.id) && d[side] ? [{ id: d.id, face: d[side] }] : []))
    .sort((a, b) => a.face.index - b.face.index);
  for (const f of placed) cells.splice(Math.min(f.face.index, cells.length), 0, f);
  return cells;
}

/**
 * The cells a change edited without moving them, and which are still there: those with as many
 * cells it did not touch before them on both sides, keeping their order among themselves.
 */
function editedInPlace(deltas: readonly CellDelta[], present: ReadonlySet<string>): Set<string> {
  const untouchedBefore = (side: 'before' | 'after') =>
    new Map(
      deltas
        .filter((d) => d[side])
        .sort((a, b) => a[side]!.index - b[side]!.index)
        .map((d, k) => [d.id, d[side]!.index - k]),
    );
  const [before, after] = [untouchedBefore('before'), untouchedBefore('after')];
  const candidates = deltas
    .filter((d) => d.before && d.after && present.has(d.id) && before.get(d.id) === after.get(d.id))
    .sort((a, b) => a.after!.index - b.after!.index);
  return new Set(longestIncreasing(candidates.map((d) => d.before!.index)).map((k) => candidates[k]!.id));
}

/** Whether the notebook is now as the change left it: each cell it touched as the agent left it, where it left it. */
export function asLeft(deltas: readonly CellDelta[], now: readonly CellState[]): boolean {
  const after = changeSide(
    deltas,
    now.map((c) => c.id),
    'after',
  );
  return (
    after.length === now.length &&
    after.every((c, i) => ('now' in c ? c.now === i : c.id === now[i]!.id && !c.face.cut && sameContent(c.face, now[i]!)))
  );
}

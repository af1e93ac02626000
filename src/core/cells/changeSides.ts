/**
 * The sides of an agent's change as whole notebooks: the notebook as it is now, with some of the
 * cells the change touched put back as they were before it (a revert, the left side of the
 * review) or as the agent left them (the right side, once they changed since). The cells around
 * them are the notebook's own, so the person reviews the change in its context. Pure, and knows
 * nothing of checkpoints but the shape of a change's cells.
 */
import { longestIncreasing } from './batch';

/** One cell of a change: its side before (none: it created the cell) and after (none: it deleted it). */
export interface SidedCell<F extends { readonly index: number }> {
  readonly id: string;
  readonly before: F | null;
  readonly after: F | null;
}

export type Side = 'before' | 'after';

/**
 * A cell of one side: a cell of the notebook as it is now (its index), or the side a change kept
 * of one of its cells, either where that cell is now (`placed` false: edited where it was) or
 * placed where it was on that side.
 */
export type SideCell<F> = { readonly now: number } | { readonly id: string; readonly face: F; readonly placed: boolean };

/**
 * The notebook now (`now`: its cells' ids, in order) with the cells of `part` (some or all of a
 * change's `cells`) on `side`. A cell the change edited where it was stays where it is; the
 * others of `part` (moved, created, deleted, or gone since) are taken out, and their side (none
 * for a cell created, on the before side, or deleted, on the after side) is put back after the
 * cell that preceded it on that side: the same cell when it is still there, else the cell
 * untouched by the change counted as many places along. Exact while the cells the change did
 * not touch are as they were.
 */
export function changeSide<F extends { readonly index: number }>(
  cells: readonly SidedCell<F>[],
  now: readonly string[],
  side: Side,
  part: readonly SidedCell<F>[] = cells,
): SideCell<F>[] {
  const inPart = new Map(part.map((d) => [d.id, d]));
  const staying = editedInPlace(cells, new Set(now));
  const out: SideCell<F>[] = now.flatMap((id, i): SideCell<F>[] => {
    const d = inPart.get(id);
    if (!d) return [{ now: i }];
    return staying.has(id) ? [{ id, face: d[side]!, placed: false }] : [];
  });
  const touched = new Set(cells.map((d) => d.id));
  const untouchedNow = now.filter((id) => !touched.has(id));
  const sequence = sideSequence(cells, side);
  const at = (id: string) => out.findIndex((c) => ('now' in c ? now[c.now] === id : c.id === id));
  const placing = part.filter((d) => !staying.has(d.id) && d[side]).sort((a, b) => a[side]!.index - b[side]!.index);
  for (const d of placing) {
    let to = 0;
    for (let k = d[side]!.index - 1; k >= 0; k--) {
      const was = sequence[k];
      const id = typeof was === 'number' ? untouchedNow[was] : was;
      const found = id === undefined ? -1 : at(id);
      if (found >= 0) {
        to = found + 1;
        break;
      }
    }
    out.splice(to, 0, { id: d.id, face: d[side]!, placed: true });
  }
  return out;
}

/** One side of a change as it was: the ids of the cells it touched at their indices, and the n-th untouched cell as n. */
function sideSequence<F extends { readonly index: number }>(cells: readonly SidedCell<F>[], side: Side): (string | number)[] {
  const sequence: (string | number)[] = [];
  let untouched = 0;
  for (const d of cells.filter((c) => c[side]).sort((a, b) => a[side]!.index - b[side]!.index)) {
    while (sequence.length < d[side]!.index) sequence.push(untouched++);
    sequence.push(d.id);
  }
  return sequence;
}

/**
 * The cells a change edited without moving them, and which are still there: those with as many
 * untouched cells before them on both sides, keeping their order among themselves.
 */
function editedInPlace<F extends { readonly index: number }>(
  cells: readonly SidedCell<F>[],
  present: ReadonlySet<string>,
): Set<string> {
  const untouchedBefore = (side: Side) =>
    new Map(
      cells
        .filter((d) => d[side])
        .sort((a, b) => a[side]!.index - b[side]!.index)
        .map((d, k) => [d.id, d[side]!.index - k]),
    );
  const [before, after] = [untouchedBefore('before'), untouchedBefore('after')];
  const candidates = cells
    .filter((d) => d.before && d.after && present.has(d.id) && before.get(d.id) === after.get(d.id))
    .sort((a, b) => a.after!.index - b.after!.index);
  return new Set(longestIncreasing(candidates.map((d) => d.before!.index)).map((k) => candidates[k]!.id));
}
